//! The host as the node found it, and putting it back: the node adds links (its veth pair,
//! the pods' bridge and veths), routes, mounts (pod volumes, network namespaces), sysctls (the
//! kubelet's panic and overcommit settings, forwarding), nftables rules (kube-proxy's and the CNI
//! masquerade, through iptables-nft) and cgroups. [`Baseline::record`] takes them before `up`;
//! [`restore`] undoes every difference; [`Baseline::differences`] says what still differs.
//! iptables-legacy is never called: its tables, once made, last until a reboot.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// The sysctls the kubelet, kube-proxy and the CNI bridge set.
pub const SYSCTLS: [&str; 14] = [
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.conf.all.route_localnet",
    "net.ipv4.ip_forward",
    "net.ipv6.conf.all.forwarding",
    "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_tcp_timeout_established",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
];

/// Directories the kubelet and containerd make outside the node's work dir, when absent before.
pub const HOST_DIRS: [&str; 4] = [
    "/var/log/pods",
    "/var/log/containers",
    "/var/lib/kubelet",
    "/usr/libexec/kubernetes",
];

/// One snapshot of what the node touches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    pub links: BTreeSet<String>,
    pub routes: BTreeSet<String>,
    pub mounts: BTreeSet<String>,
    pub sysctls: BTreeMap<String, String>,
    /// `nft list ruleset`, as text.
    pub nft: String,
    pub cgroups: BTreeSet<String>,
    pub netns: BTreeSet<String>,
    /// Of [`HOST_DIRS`], those that existed.
    pub dirs: BTreeSet<String>,
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd} {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {}: {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip -o link` names, without the `@peer` suffix of a veth.
pub fn link_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// Mount points of `/proc/mounts` (the second field), FUSE filesystems left out: the node mounts
/// none (pod volumes, network namespaces and overlay root filesystems), while the sim's store
/// fault layer mounts one per server under a test's own temp dir. Counted, a test running beside
/// the node read as the node's leftover (a host "differing from its baseline"), and `restore`
/// would have unmounted another test's store.
pub fn mount_points(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let point = fields.nth(1)?;
            let fstype = fields.next().unwrap_or_default();
            (!fstype.starts_with("fuse")).then(|| point.to_string())
        })
        .collect()
}

/// The kubelet's and containerd's cgroups: every directory named kubepods or k8s.io, and below.
fn cgroup_dirs() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Ok(controllers) = std::fs::read_dir("/sys/fs/cgroup") else {
        return out;
    };
    for c in controllers.flatten() {
        for top in ["kubepods", "k8s.io"] {
            walk(&c.path().join(top), &mut out);
        }
    }
    out
}

fn walk(dir: &Path, out: &mut BTreeSet<String>) {
    if !dir.is_dir() {
        return;
    }
    out.insert(dir.display().to_string());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), out);
            }
        }
    }
}

fn names_in(dir: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

impl Baseline {
    /// The host now.
    pub fn record() -> Result<Self, String> {
        let mut sysctls = BTreeMap::new();
        for key in SYSCTLS {
            let path = format!("/proc/sys/{}", key.replace('.', "/"));
            if let Ok(v) = std::fs::read_to_string(path) {
                sysctls.insert(key.to_string(), v.trim().to_string());
            }
        }
        Ok(Self {
            links: link_names(&run("ip", &["-o", "link"])?),
            routes: run("ip", &["route", "show", "table", "all"])?
                .lines()
                .map(str::to_string)
                .collect(),
            mounts: mount_points(
                &std::fs::read_to_string("/proc/mounts").map_err(|e| e.to_string())?,
            ),
            sysctls,
            nft: run("nft", &["list", "ruleset"])?,
            cgroups: cgroup_dirs(),
            netns: names_in("/run/netns"),
            dirs: HOST_DIRS
                .iter()
                .filter(|d| Path::new(d).exists())
                .map(|d| d.to_string())
                .collect(),
        })
    }

    /// What differs between this baseline and `now`, a line each ("" when the host is back).
    pub fn differences(&self, now: &Baseline) -> Vec<String> {
        let mut out = vec![];
        set_diff("link", &self.links, &now.links, &mut out);
        set_diff("route", &self.routes, &now.routes, &mut out);
        set_diff("mount", &self.mounts, &now.mounts, &mut out);
        set_diff("cgroup", &self.cgroups, &now.cgroups, &mut out);
        set_diff("netns", &self.netns, &now.netns, &mut out);
        set_diff("dir", &self.dirs, &now.dirs, &mut out);
        for (k, v) in &self.sysctls {
            match now.sysctls.get(k) {
                Some(n) if n == v => {}
                n => out.push(format!("sysctl {k}: {v} before, {n:?} now")),
            }
        }
        if self.nft.trim() != now.nft.trim() {
            out.push(format!(
                "nft ruleset: {} lines before, {} now",
                self.nft.lines().count(),
                now.nft.lines().count()
            ));
        }
        out
    }
}

fn set_diff(what: &str, before: &BTreeSet<String>, now: &BTreeSet<String>, out: &mut Vec<String>) {
    for added in now.difference(before) {
        out.push(format!("{what} added: {added}"));
    }
    for gone in before.difference(now) {
        out.push(format!("{what} gone: {gone}"));
    }
}

/// Undoes what the node added since `b` (the node's processes must be stopped). Returns what
/// could not be undone, a line each.
pub fn restore(b: &Baseline) -> Vec<String> {
    let mut failed = vec![];
    let now = match Baseline::record() {
        Ok(now) => now,
        Err(e) => return vec![format!("reading the host: {e}")],
    };
    // Mounts, deepest first: pod volumes, the sandboxes' network namespaces, overlay rootfs.
    let mut new_mounts: Vec<_> = now.mounts.difference(&b.mounts).collect();
    new_mounts.reverse();
    for m in new_mounts {
        if let Err(e) = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH) {
            failed.push(format!("umount {m}: {e}"));
        }
    }
    for n in now.netns.difference(&b.netns) {
        let path = Path::new("/run/netns").join(n);
        let _ = nix::mount::umount2(&path, nix::mount::MntFlags::MNT_DETACH);
        if let Err(e) = std::fs::remove_file(&path) {
            failed.push(format!("remove {}: {e}", path.display()));
        }
    }
    for l in now.links.difference(&b.links) {
        if let Err(e) = run("ip", &["link", "del", l]) {
            // A veth goes with its peer's namespace or the bridge's end; gone is what counts.
            if link_names(&run("ip", &["-o", "link"]).unwrap_or_default()).contains(l) {
                failed.push(e);
            }
        }
    }
    // The ruleset as it was, in one transaction (iptables-nft's tables are nftables tables).
    let rules = format!("flush ruleset\n{}", b.nft);
    let file = std::env::temp_dir().join(format!("sim-node-nft-{}.conf", std::process::id()));
    match std::fs::write(&file, rules) {
        Ok(()) => {
            if let Err(e) = run("nft", &["-f", &file.display().to_string()]) {
                failed.push(e);
            }
            let _ = std::fs::remove_file(&file);
        }
        Err(e) => failed.push(format!("write {}: {e}", file.display())),
    }
    for (k, v) in &b.sysctls {
        if now.sysctls.get(k) != Some(v) {
            let path = format!("/proc/sys/{}", k.replace('.', "/"));
            if let Err(e) = std::fs::write(&path, v) {
                failed.push(format!("sysctl {k}={v}: {e}"));
            }
        }
    }
    let mut new_cgroups: Vec<_> = now.cgroups.difference(&b.cgroups).collect();
    // Containers outlive their shims; what is left in the node's cgroups is killed, and each
    // cgroup waited for to empty (≤ 5 s) before it can be removed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let pids = cgroup_pids(&new_cgroups);
        if pids.is_empty() || std::time::Instant::now() > deadline {
            break;
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    new_cgroups.reverse();
    for c in new_cgroups {
        if let Err(e) = std::fs::remove_dir(c) {
            failed.push(format!("rmdir {c}: {e}"));
        }
    }
    for d in HOST_DIRS {
        if !b.dirs.contains(d)
            && Path::new(d).exists()
            && let Err(e) = std::fs::remove_dir_all(d)
        {
            failed.push(format!("remove {d}: {e}"));
        }
    }
    failed
}

/// The processes in these cgroups.
fn cgroup_pids(cgroups: &[&String]) -> BTreeSet<i32> {
    cgroups
        .iter()
        .filter_map(|c| std::fs::read_to_string(Path::new(c).join("cgroup.procs")).ok())
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Where the state of the machine's one node is kept between `up` and `down`: the baseline and
/// the PIDs, so the next `up` restores a host that a killed run left (nothing else can: a
/// SIGKILL runs no destructor).
pub fn state_dir() -> PathBuf {
    PathBuf::from("/run/sim-node")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_names_drop_the_peer_suffix() {
        let text = "1: lo: <LOOPBACK,UP> mtu 65536\n7: veth1a2b@if3: <BROADCAST> mtu 1500\n9: kp0: <UP> mtu 1500\n";
        let names: Vec<_> = link_names(text).into_iter().collect();
        assert_eq!(names, ["kp0", "lo", "veth1a2b"]);
    }

    #[test]
    fn differences_name_each_change_and_nothing_when_equal() {
        let before = Baseline {
            links: ["lo", "eth0"].map(String::from).into(),
            sysctls: [("net.ipv4.ip_forward".to_string(), "0".to_string())].into(),
            nft: String::new(),
            ..Default::default()
        };
        assert!(before.differences(&before.clone()).is_empty());
        let mut now = before.clone();
        now.links.insert("kp0".into());
        now.sysctls.insert("net.ipv4.ip_forward".into(), "1".into());
        now.nft = "table ip nat {\n}\n".into();
        now.mounts.insert("/run/netns/cni-1".into());
        let d = before.differences(&now);
        assert_eq!(
            d,
            [
                "link added: kp0",
                "mount added: /run/netns/cni-1",
                "sysctl net.ipv4.ip_forward: 0 before, Some(\"1\") now",
                "nft ruleset: 0 lines before, 2 now",
            ]
        );
    }

    #[test]
    fn mount_points_are_the_second_field() {
        let m = mount_points("proc /proc proc rw 0 0\noverlay /w/rootfs overlay rw 0 0\n");
        assert!(m.contains("/w/rootfs") && m.contains("/proc"));
    }

    #[test]
    fn fuse_mounts_of_tests_beside_the_node_are_not_the_nodes() {
        let m = mount_points(
            "faultfs /tmp/sim-topology-bROASL/c1-0/store fuse rw,nosuid 0 0\n\
             fusectl /sys/fs/fuse/connections fusectl rw 0 0\n\
             nsfs /run/netns/cni-1 nsfs rw 0 0\n",
        );
        assert_eq!(m.into_iter().collect::<Vec<_>>(), ["/run/netns/cni-1"]);
    }
}
