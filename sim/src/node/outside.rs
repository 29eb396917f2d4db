//! Addresses and names outside Kubernetes that the node's pods reach: the hosts a story's NATS
//! servers "run elsewhere" on (story 03's `nats-1.legacy.example.internal`, a partner's
//! gateways). They are processes on this machine, bound to addresses the harness adds to the
//! node's own interface [`NODE_IFACE`] (so `down`, which deletes that interface, takes them with
//! it), in [`OUTSIDE_PREFIX`]; their names answer from the cluster DNS through a second hosts
//! file beside the one the Endpoints watch writes.
//!
//! A pod reaches them as it reaches dnsmasq on the node address: its default route is the host.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use super::NodeError;
use super::node_config::NODE_IFACE;

/// The first three octets of the outside addresses: `10.245.1.<n>`, beside the node address
/// `10.245.0.1`, outside the pod and Service networks.
pub const OUTSIDE_PREFIX: [u8; 3] = [10, 245, 1];

/// The outside address number `n` (1–254).
pub fn address(n: u8) -> Ipv4Addr {
    let [a, b, c] = OUTSIDE_PREFIX;
    Ipv4Addr::new(a, b, c, n)
}

/// The hosts file text naming `entries` (address, name), one line each, sorted.
pub fn hosts(entries: &[(Ipv4Addr, String)]) -> String {
    let mut lines: Vec<String> = entries.iter().map(|(ip, n)| format!("{ip} {n}")).collect();
    lines.sort();
    lines.dedup();
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// The node's outside network: add addresses, name them. Cheap to clone; valid while the node
/// is up.
#[derive(Clone, Debug)]
pub struct Outside {
    pub(super) hosts: PathBuf,
    pub(super) dnsmasq: u32,
}

impl Outside {
    /// Adds outside address `n` to the node's interface (again: no change) and returns it.
    pub fn address(&self, n: u8) -> Result<Ipv4Addr, NodeError> {
        let ip = address(n);
        let out = std::process::Command::new("ip")
            .args(["addr", "replace", &format!("{ip}/32"), "dev", NODE_IFACE])
            .output()
            .map_err(|e| super::part("outside address", format!("ip addr: {e}")))?;
        if !out.status.success() {
            return Err(super::part(
                "outside address",
                format!(
                    "ip addr replace {ip}/32 dev {NODE_IFACE}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ));
        }
        Ok(ip)
    }

    /// Makes `entries` (address, name) the outside names the cluster DNS answers, replacing the
    /// ones before, and has dnsmasq re-read them.
    pub fn name(&self, entries: &[(Ipv4Addr, String)]) -> Result<(), NodeError> {
        let tmp = self.hosts.with_extension("tmp");
        std::fs::write(&tmp, hosts(entries))
            .and_then(|()| std::fs::rename(&tmp, &self.hosts))
            .map_err(|source| NodeError::Io {
                what: "write the outside names",
                path: self.hosts.clone(),
                source,
            })?;
        let pid = nix::unistd::Pid::from_raw(self.dnsmasq as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP)
            .map_err(|e| super::part("outside names", format!("SIGHUP dnsmasq: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_addresses_sit_beside_the_node_address_outside_the_cluster_networks() {
        assert_eq!(address(3), Ipv4Addr::new(10, 245, 1, 3));
        assert_ne!(address(1), super::super::node_config::NODE_IP);
    }

    #[test]
    fn the_hosts_file_names_each_address_once_in_order() {
        let text = hosts(&[
            (address(2), "nats-2.legacy.example.internal".into()),
            (address(1), "nats-1.legacy.example.internal".into()),
            (address(1), "nats-1.legacy.example.internal".into()),
        ]);
        assert_eq!(
            text,
            "10.245.1.1 nats-1.legacy.example.internal\n10.245.1.2 nats-2.legacy.example.internal\n"
        );
    }
}
