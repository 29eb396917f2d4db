#!/usr/bin/env bash
# Installs Helm for the chart tests: there is no helm binary here, so it is PyPI's helm-python-sdk
# (Helm v4's own Go SDK in a wheel: lint, render, install, upgrade, uninstall, test), pinned in
# scripts/helm.py (HELM_PYTHON_SDK_VERSION), which is how the tests call it. Installed with the
# machine's own pip configuration into ~/.cache/nats-operators/helm-python-sdk/<version> (nothing
# system-wide); a second run with it present returns at once.
#
# usage: scripts/install-helm.sh
# env:   NATS_OPERATORS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/nats-operators)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=$(sed -n 's/^HELM_PYTHON_SDK_VERSION = "\(.*\)"$/\1/p' scripts/helm.py)
[ -n "$VERSION" ] || { echo "install-helm: no HELM_PYTHON_SDK_VERSION in scripts/helm.py" >&2; exit 1; }
CACHE=${NATS_OPERATORS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nats-operators}
DIR=$CACHE/helm-python-sdk/$VERSION

command -v python3 >/dev/null || {
  echo "install-helm: python3 is needed (apt-get install python3 python3-pip)" >&2
  exit 1
}
if [ ! -f "$DIR/helm_python/__init__.py" ]; then
  echo "[install-helm] installing helm-python-sdk==$VERSION into $DIR"
  rm -rf "$DIR.partial"
  mkdir -p "$(dirname "$DIR")"
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check --no-deps --target "$DIR.partial" \
    "helm-python-sdk==$VERSION"
  rm -rf "$DIR"
  mv "$DIR.partial" "$DIR"
fi
python3 scripts/helm.py version
