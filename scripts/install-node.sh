#!/usr/bin/env bash
# The host packages the sim's `node` backend (a real single-node Kubernetes, docs/node.md) runs on, beside the
# node binaries scripts/install-apiserver.sh builds: containerd and runc (the runtime), the CNI plugins (bridge,
# host-local, portmap), dnsmasq (the cluster DNS), iptables (kube-proxy's rules, through nftables) and conntrack.
# Debian/Ubuntu packages from the machine's configured sources, installed with apt-get when absent. The node needs
# root and CAP_NET_ADMIN; without them nothing is installed and the node tests skip saying why.
set -euo pipefail
want=(containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins dnsmasq:dnsmasq-base
  iptables:iptables nft:nftables conntrack:conntrack umoci:umoci)
missing=() pkgs=()
for w in "${want[@]}"; do
  c=${w%%:*} p=${w#*:}
  if [ "${c#/}" != "$c" ]; then [ -x "$c" ] && continue; else command -v "$c" >/dev/null && continue; fi
  missing+=("$c") pkgs+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "all present: containerd runc CNI plugins dnsmasq iptables nft conntrack umoci"
  exit 0
fi
echo "missing: ${missing[*]}"
if [ "$(id -u)" != 0 ]; then
  echo "not root: not installing them (the node backend needs root; its tests skip)"
  exit 0
fi
if ! grep -q '^CapEff:.*' /proc/self/status || [ $((0x$(awk '/^CapEff/ {print $2}' /proc/self/status) >> 12 & 1)) = 0 ]; then
  echo "no CAP_NET_ADMIN: not installing them (the node backend needs it; its tests skip)"
  exit 0
fi
command -v apt-get >/dev/null || { echo "no apt-get: not installing them (the node tests skip)"; exit 0; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
