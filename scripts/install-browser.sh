#!/usr/bin/env bash
# Headless Chromium for the report page's browser check (sim's scenario_baseline_30s renders the
# report.html of a real run, reads the DOM back and takes a screenshot): Debian's `chromium` package,
# installed with apt-get from the machine's configured sources when absent. Without apt-get, or without root
# or passwordless sudo, nothing is installed and the check skips saying why. `sim scenario` itself needs no
# browser: the page is plain HTML and SVG.
set -euo pipefail
if command -v chromium >/dev/null; then
  echo "present: $(chromium --version 2>/dev/null | sed -n 1p)"
  exit 0
fi
echo "missing: chromium"
if ! command -v apt-get >/dev/null; then
  echo "no apt-get: not installing it (the report page's browser check skips)"
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "neither root nor passwordless sudo: not installing it (the report page's browser check skips)"
  exit 0
fi
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
chromium --version 2>/dev/null | sed -n 1p
