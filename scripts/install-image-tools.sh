#!/usr/bin/env bash
# The OCI tools e2e's image tests (e2e/tests/image) take the images with: umoci (unpack into a runtime bundle),
# runc (run it), skopeo (read the archive) and containerd with ctr (import it as a node does). Debian/Ubuntu
# packages, installed with apt-get when absent; without apt-get, or without root or passwordless sudo, nothing is
# installed and each test that needs a missing tool skips saying which. `just image` itself needs none of them
# (python3 and cargo). On a machine running systemd, Debian's containerd package enables and starts its service.
set -euo pipefail
want=(umoci runc skopeo containerd ctr)
missing=()
for c in "${want[@]}"; do command -v "$c" >/dev/null || missing+=("$c"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "all present: ${want[*]}"
  exit 0
fi
echo "missing: ${missing[*]}"
if ! command -v apt-get >/dev/null; then
  echo "no apt-get: not installing them (the image tests that need them skip)"
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "neither root nor passwordless sudo: not installing them (the image tests that need them skip)"
  exit 0
fi
pkgs=()
for c in "${missing[@]}"; do
  case $c in
    ctr) p=containerd ;;
    *) p=$c ;;
  esac
  [[ " ${pkgs[*]} " == *" $p "* ]] || pkgs+=("$p")
done
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
