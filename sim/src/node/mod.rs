//! The `node` backend: a real single-node Kubernetes 1.20 on this machine (docs/node.md) — etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy built by
//! `scripts/install-apiserver.sh node`, containerd + runc + the CNI plugins from the distribution
//! (`scripts/install-node.sh`), images made with umoci and imported with `ctr`, cluster DNS from
//! dnsmasq fed by a watch of Endpoints. No Docker, no registry, no traffic off the machine: the node
//! address is on a veth pair the harness creates, never the uplink.
//!
//! The pure cores, each with its table tests: the parts' configuration ([`node_config`]), the node's
//! PKI ([`pki`]), the host's baseline and its restoration ([`host`]), the DNS hosts file ([`dns`])
//! and what the node needs of the machine ([`missing`]). The shell: [`Node::up`] and
//! [`Node::down`] (`up.rs`), images ([`image`]).

pub mod containers;
pub mod dns;
mod drain;
pub mod fit;
pub mod host_baseline;
pub mod image;
pub mod node_config;
pub mod node_pki;
pub mod outside;
pub mod pods;
pub mod servers;
mod up;

pub use up::{Node, import_image};

use std::path::{Path, PathBuf};

use crate::apiserver::ApiServerError;

/// Everything that can go wrong bringing up or taking down the node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The machine lacks what the node needs; the message names every missing piece and how to get it.
    #[error("the node backend is unavailable here: {}", .0.join("; "))]
    Unavailable(Vec<String>),
    #[error("failed to {what} ({}): {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the node's {part}: {message}")]
    Part { part: &'static str, message: String },
    #[error(transparent)]
    ApiServer(#[from] ApiServerError),
}

/// A [`NodeError::Part`]: `part` of the node did not come up, and why.
pub(crate) fn part(part: &'static str, message: impl Into<String>) -> NodeError {
    NodeError::Part {
        part,
        message: message.into(),
    }
}

/// The binaries the install step builds, by cache subdirectory.
pub const CACHED: [(&str, &str); 8] = [
    ("kube-apiserver-1.20/bin", "kube-apiserver"),
    ("kube-apiserver-1.20/bin", "etcd"),
    ("kube-node-1.20/bin", "kube-controller-manager"),
    ("kube-node-1.20/bin", "kube-scheduler"),
    ("kube-node-1.20/bin", "kubelet"),
    ("kube-node-1.20/bin", "kube-proxy"),
    ("kube-node-1.20/bin", "pause"),
    ("kubectl-1.20/bin", "kubectl"),
];

/// The distribution's programs the node runs or calls, and the package that carries each.
pub const SYSTEM: [(&str, &str); 9] = [
    ("/usr/bin/containerd", "containerd"),
    ("/usr/bin/ctr", "containerd"),
    ("/usr/sbin/runc", "runc"),
    ("/usr/lib/cni/bridge", "containernetworking-plugins"),
    ("/usr/sbin/dnsmasq", "dnsmasq-base"),
    ("/usr/sbin/iptables", "iptables"),
    ("/usr/sbin/nft", "nftables"),
    ("/usr/sbin/conntrack", "conntrack"),
    ("/usr/bin/umoci", "umoci"),
];

/// What the machine has, as [`missing`] judges it (gathered by [`Machine::probe`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    pub root: bool,
    pub net_admin: bool,
    /// Every path of [`CACHED`] (under the cache) and [`SYSTEM`] that exists.
    pub present: Vec<PathBuf>,
}

impl Machine {
    /// Reads the effective uid and capabilities from `/proc/self/status` and looks for each file.
    pub fn probe(cache: &Path) -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or_default()
                .to_string()
        };
        let root = field("Uid:").split_whitespace().nth(1) == Some("0");
        // CAP_NET_ADMIN is bit 12 of the effective set.
        let net_admin =
            u64::from_str_radix(&field("CapEff:"), 16).is_ok_and(|c| c & (1 << 12) != 0);
        let present = wanted(cache).into_iter().filter(|p| p.exists()).collect();
        Self {
            root,
            net_admin,
            present,
        }
    }
}

fn wanted(cache: &Path) -> Vec<PathBuf> {
    CACHED
        .iter()
        .map(|(dir, bin)| cache.join(dir).join(bin))
        .chain(SYSTEM.iter().map(|(path, _)| PathBuf::from(path)))
        .collect()
}

/// What keeps the node from running here, each with the step that fixes it; empty when it can run.
pub fn missing(m: &Machine, cache: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if !m.root {
        out.push("not root (the node makes links, mounts and cgroups)".to_string());
    }
    if !m.net_admin {
        out.push("no CAP_NET_ADMIN (the node makes a veth pair and a bridge)".to_string());
    }
    let absent = |p: &Path| !m.present.iter().any(|q| q == p);
    let cached: Vec<_> = CACHED
        .iter()
        .filter(|(dir, bin)| absent(&cache.join(dir).join(bin)))
        .map(|(_, bin)| *bin)
        .collect();
    if !cached.is_empty() {
        out.push(format!(
            "{} not built (run scripts/install-apiserver.sh node and kubectl)",
            cached.join(", ")
        ));
    }
    let mut packages: Vec<_> = SYSTEM
        .iter()
        .filter(|(path, _)| absent(Path::new(path)))
        .map(|(_, pkg)| *pkg)
        .collect();
    packages.dedup();
    if !packages.is_empty() {
        out.push(format!(
            "packages {} not installed (run scripts/install-node.sh)",
            packages.join(", ")
        ));
    }
    out
}

/// Runs `program args…`; its stdout, or an error of `part_name` with its stderr.
pub(crate) fn sh(
    part_name: &'static str,
    program: &str,
    args: &[&str],
) -> Result<String, NodeError> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|e| part(part_name, format!("{program} {}: {e}", args.join(" "))))?;
    if !out.status.success() {
        return Err(part(
            part_name,
            format!(
                "{program} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(root: bool, net_admin: bool, present: Vec<PathBuf>) -> Machine {
        Machine {
            root,
            net_admin,
            present,
        }
    }

    #[test]
    fn missing_names_every_absent_piece_and_its_fix() {
        let cache = Path::new("/c");
        let all = wanted(cache);
        let without = |names: &[&str]| -> Vec<PathBuf> {
            all.iter()
                .filter(|p| !names.iter().any(|n| p.ends_with(n)))
                .cloned()
                .collect()
        };
        let cases: Vec<(&str, Machine, Vec<&str>)> = vec![
            (
                "everything present",
                machine(true, true, all.clone()),
                vec![],
            ),
            (
                "unprivileged",
                machine(false, false, all.clone()),
                vec!["not root", "no CAP_NET_ADMIN"],
            ),
            (
                "node binaries not built",
                machine(true, true, without(&["kubelet", "pause"])),
                vec!["kubelet, pause not built (run scripts/install-apiserver.sh node"],
            ),
            (
                "containerd absent: one package named once",
                machine(true, true, without(&["containerd", "ctr"])),
                vec!["packages containerd not installed (run scripts/install-node.sh)"],
            ),
            (
                "nothing",
                machine(true, true, vec![]),
                vec![
                    "kube-apiserver, etcd, kube-controller-manager",
                    "packages containerd, runc",
                ],
            ),
        ];
        for (name, m, want) in cases {
            let got = missing(&m, cache);
            assert_eq!(got.len(), want.len(), "{name}: {got:?}");
            for (g, w) in got.iter().zip(&want) {
                assert!(g.starts_with(w), "{name}: {g:?} does not start with {w:?}");
            }
        }
    }

    #[test]
    fn probe_reads_this_process() {
        let m = Machine::probe(Path::new("/nonexistent-cache"));
        assert!(
            m.present
                .iter()
                .all(|p| !p.starts_with("/nonexistent-cache"))
        );
        // The uid the kernel reports for this process is the one probe reads.
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let uid0 = status.lines().any(|l| l.starts_with("Uid:\t0\t0"));
        assert_eq!(m.root, uid0);
    }
}
