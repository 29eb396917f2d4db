# Contributor entry points. `just --list` shows them; every recipe is a plain cargo/bash command underneath.

# Install what the tests need (nats-server, the apiservers) into ~/.cache/nats-operators.
setup:
    bash scripts/setup.sh

# Build and install what the sim's node backend runs on (docs/node.md): the kubelet, kube-proxy,
# kube-controller-manager, kube-scheduler and pause (built, cached) and containerd, runc, the CNI plugins
# and dnsmasq (apt, root). The gate's setup does not build them (about 10 minutes on a fresh machine).
node-install:
    bash scripts/install-apiserver.sh node
    bash scripts/install-node.sh

# The node backend's tests (root; after `just node-install`): a StatefulSet of nats-servers on the
# node, then the chart Helm-installed and story 01 rolled under ledger traffic (docs/node.md).
node-test:
    cargo nextest run -p sim -p e2e --features sim/node,e2e/node --test node --profile nightly --no-fail-fast --no-capture

# Build every crate.
build:
    cargo build --workspace

# The gate's tests as CI runs them: every test under cargo-nextest (profile ci), doc tests, report.
test:
    cargo test --workspace --no-run --quiet
    target/debug/sim apiserver-pool -- cargo nextest run --workspace --profile ci --no-fail-fast
    cargo test --workspace --doc --quiet
    scripts/test-report target/nextest/ci/junit.xml

# The nightly tier: every test with the scenarios' timing expectations judged (SIM_TIMINGS=judge),
# then the tests that boot an apiserver three times over (a race shows as a failure of one run);
# see docs/testing.md.
nightly:
    # The image tests' build first (the three static binaries, cold about 4 min on 2 idle cores): inside
    # the first image test it would count against that test's time limit.
    out=$(mktemp -d) && python3 scripts/image.py --profile image-test --out "$out" cluster-controller; rc=$?; rm -rf "$out"; exit $rc
    SIM_TIMINGS=judge cargo nextest run --workspace --profile nightly --no-fail-fast
    scripts/test-report target/nextest/nightly/junit.xml
    cargo nextest run --workspace --profile nightly --no-fail-fast -E 'test-group(apiserver)' --stress-count 3

# Regenerate the CRD YAML from the Rust types, into deploy/crds and the chart (CI fails when a copy drifts).
crds:
    cargo run -q -p nats-api --bin crdgen

# Fail when deploy/crds or the chart's copy differs from what the types generate.
crds-check:
    cargo run -q -p nats-api --bin crdgen -- --check

# Regenerate everything the Helm chart derives: its CRDs (with deploy/crds), the goldens of its renders
# (deploy/helm/testdata/*.golden.yaml) and the permission table of docs/controllers.md and docs/install.md (from
# files/rbac.yaml). CI fails when any of them drifts (crdgen --check, e2e's chart_render and chart_rbac tests).
chart:
    cargo run -q -p nats-api --bin crdgen
    CHART_UPDATE=1 cargo nextest run -p e2e --test api -E 'test(/^chart_(render|rbac)::/)'
    python3 scripts/helm.py lint --strict deploy/helm/nats-operators

# Build the controller images offline: each binary static, alone in a FROM scratch image run as uid 65532, an OCI
# archive under target/images/ a node imports without a registry (`ctr -n k8s.io images import`), labelled and
# annotated with its version, commit, source and time, a CycloneDX SBOM beside it; prints each name, digest and
# size. `just image cluster-controller` builds one. docs/install.md, "Images".
image *BINARIES:
    python3 scripts/image.py {{BINARIES}}

# Cut a release (CHANGELOG.md): bump the workspace, chart and image version to VERSION, move CHANGELOG.md's
# Unreleased section under it, run the release checks (`--gate`: all of .ci/run), commit, tag vVERSION and
# package the tagged chart into target/chart/. `just release 0.2.0 --dry-run` prints the plan and changes nothing.
release VERSION *FLAGS:
    python3 scripts/release.py {{VERSION}} {{FLAGS}}

# Run one scripted scenario and print its report, e.g. `just scenario baseline`. `--backend node`
# runs it on the sim's real node with the chart installed (root, after `just node-install`; add
# `--local` for the local backend's run first and the per-step times side by side); `--backend
# k3s` on k3s (Docker, `--features k3s`). docs/scenarios.md, docs/node.md. The sim is built with the
# Kubernetes harnesses (`--features kube`), so any scenario runs; the README's main job builds it without.
scenario NAME *FLAGS:
    #!/usr/bin/env bash
    set -euo pipefail
    flags=" {{FLAGS}} "
    if [[ $flags == *" --backend node "* ]]; then
        local=""; [[ $flags == *" --local "* ]] && local="--local"
        exec cargo run -q -p e2e --features node --bin node-scenario -- {{NAME}} $local
    fi
    exec cargo run -q -p sim --features kube --bin sim -- scenario {{NAME}} {{FLAGS}}

# The conformance run: every story of docs/stories applied in story order on the sim's real node,
# the chart Helm-installed, each step's status examples reached; a line per story says pass, FAIL, NOT RUN YET
# or why it does not apply here. `just conformance 01` runs one. Root, after `just node-install`.
# `just conformance --backend k3s [STORY...]`: the same on a k3s container (a Docker engine; the k3s
# feature built only then); without Docker it exits 1 with the reason (docs/node.md, "k3s").
conformance *ARGS:
    cargo run -q -p e2e --features "node{{ if ARGS =~ 'k3s' { ',k3s' } else { '' } }}" --bin conformance -- {{ARGS}}

# Try the controllers without a cluster: a kube-apiserver with the CRDs and the three controllers
# (NatsClusters as local nats-server processes) to drive with kubectl, until Ctrl-C (docs/try-it.md).
up:
    cargo run -q -p sim --features kube --bin sim -- up

# Stop a `just up` running in the background.
down:
    cargo run -q -p sim --features kube --bin sim -- down

# The performance figures, each against its floor measured in the same run: target/bench/summary.json and
# the table of docs/performance.md (`just bench --only render` runs one group and leaves the docs).
bench *ARGS:
    cargo build -q --release -p jetstream-controller -p auth-controller -p cluster-controller
    cargo run -q --profile bench-host -p bench -- --binaries target/release {{ARGS}}

# List the scenarios under scenarios/.
scenarios:
    cargo run -q -p sim --bin sim -- list

# The whole CI gate, as CI runs it.
ci:
    bash .ci/run

# Format and lint the way CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --all-features -- -D warnings
