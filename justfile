# Contributor entry points. `just --list` shows them; every recipe is a plain cargo/bash command underneath.

# Install what the tests need (nats-server, the apiservers) into ~/.cache/nats-operators.
setup:
    bash scripts/setup.sh

# Build every crate.
build:
    cargo build --workspace

# The test tiers CI runs: unit, live NATS, API (real apiserver), fast scenarios.
test:
    cargo test --workspace

# Regenerate the CRD YAML from the Rust types (CI fails when the committed copy drifts).
crds:
    cargo run -q -p nats-api --bin crdgen

# Fail when deploy/crds differs from what the types generate.
crds-check:
    cargo run -q -p nats-api --bin crdgen -- --check

# Run one scripted scenario on the local backend and print its report, e.g. `just scenario baseline`.
scenario NAME:
    cargo run -q -p sim --bin sim -- scenario {{NAME}}

# List the scenarios under scenarios/.
scenarios:
    cargo run -q -p sim --bin sim -- list

# The whole CI gate, as CI runs it.
ci:
    bash .ci/run

# Format and lint the way CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
