//! What the node's parts read: containerd's config, the CNI network, the kubelet's and
//! kube-proxy's configuration files and the kubeconfigs, each a pure render of the node's
//! [`Layout`] and [`Ports`] (so a table test pins every setting this VM needs, and why).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// The networks the harness makes inside this machine; nothing else is addressed.
pub const NODE_IFACE: &str = "kn0";
/// The node's address, on the veth [`NODE_IFACE`] the harness creates (never the uplink).
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(10, 245, 0, 1);
/// The pods' bridge and network (the CNI bridge plugin makes it on the first pod).
pub const BRIDGE: &str = "kp0";
pub const POD_CIDR: &str = "10.244.0.0/24";
pub const SERVICE_CIDR: &str = "10.96.0.0/24";
/// The apiserver's ClusterIP (the first of [`SERVICE_CIDR`]).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
/// The kube-dns Service; its manual Endpoints point at dnsmasq on [`NODE_IP`].
pub const DNS_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
/// The node's name (and the kubelet's serving certificate's DNS name).
pub const NODE_NAME: &str = "sim-node";
/// The sandbox image, built from the pause binary the install step compiles.
pub const PAUSE_IMAGE: &str = "localhost/pause:3.4";

/// The ports the node's parts listen on: the apiserver and dnsmasq on [`NODE_IP`], the rest on
/// 127.0.0.1; all but DNS picked free at `up`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    pub apiserver: u16,
    pub etcd_client: u16,
    pub etcd_peer: u16,
    pub controller_manager: u16,
    pub scheduler: u16,
    pub kubelet: u16,
    pub kubelet_healthz: u16,
    pub proxy_metrics: u16,
    pub proxy_healthz: u16,
}

/// Where everything of one node lives: one work directory, removed by `down`.
#[derive(Clone, Debug)]
pub struct Layout {
    pub dir: PathBuf,
}

impl Layout {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }
    pub fn pki(&self) -> PathBuf {
        self.path("pki")
    }
    pub fn pki_file(&self, name: &str) -> PathBuf {
        self.pki().join(name)
    }
    pub fn log(&self, part: &str) -> PathBuf {
        self.path("log").join(format!("{part}.log"))
    }
    pub fn kubeconfig(&self, who: &str) -> PathBuf {
        self.path("kubeconfig").join(format!("{who}.kubeconfig"))
    }
    pub fn containerd_socket(&self) -> PathBuf {
        self.path("containerd/containerd.sock")
    }
    pub fn hosts_file(&self) -> PathBuf {
        self.path("dns/hosts")
    }
    /// The names outside Kubernetes the cluster DNS answers ([`super::outside`]).
    pub fn outside_hosts_file(&self) -> PathBuf {
        self.path("dns/outside")
    }
    /// The directory of the static local PersistentVolumes (StorageClass `local`).
    pub fn volumes(&self) -> PathBuf {
        self.path("volumes")
    }
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// containerd's own config (version 2): its own root, state and socket under the work dir, the
/// CRI plugin with the local pause image, runc through cgroupfs (`SystemdCgroup = false`: the
/// kubelet's cgroup driver), and `restrict_oom_score_adj`: this VM lacks CAP_SYS_RESOURCE, and
/// without the clamp every sandbox fails in runc (`oom_score_adj: Permission denied`).
pub fn containerd_toml(l: &Layout, runc: &Path, cni_bin: &Path) -> String {
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{runc_root}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
"#,
        root = p(&l.path("containerd/root")),
        state = p(&l.path("containerd/state")),
        sock = p(&l.containerd_socket()),
        opt = p(&l.path("containerd/opt")),
        runc = p(runc),
        runc_root = p(&l.path("containerd/runc")),
        cni_bin = p(cni_bin),
        cni_conf = p(&l.path("cni/net.d")),
    )
}

/// The pods' network: a bridge with the host as gateway, addresses from host-local IPAM (its
/// state under the work dir), masquerade out, hairpin (a pod reaching itself through a Service).
pub fn cni_conflist(l: &Layout) -> String {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": "sim-node",
        "plugins": [
            {
                "type": "bridge", "bridge": BRIDGE, "isGateway": true, "ipMasq": true, "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": p(&l.path("cni/ipam")),
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    })
    .to_string()
}

/// The kubelet: cgroupfs (the hybrid cgroup v1 host), swap tolerated, the cluster DNS, a node
/// status every 2 s (Ready in ~9 s after the apiserver instead of ~17 s), eviction thresholds
/// that a test machine's disk does not trip, and its ports on 127.0.0.1 / the node address.
pub fn kubelet_yaml(l: &Layout, ports: &Ports) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
address: {NODE_IP}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
clusterDomain: cluster.local
clusterDNS: [{DNS_SERVICE_IP}]
tlsCertFile: {cert}
tlsPrivateKeyFile: {key}
authentication: {{anonymous: {{enabled: false}}, webhook: {{enabled: true}}, x509: {{clientCAFile: {ca}}}}}
authorization: {{mode: Webhook}}
resolvConf: {resolv}
serializeImagePulls: false
evictionHard: {{memory.available: "100Mi", nodefs.available: "2%", imagefs.available: "2%"}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusReportFrequency: 10s
nodeStatusUpdateFrequency: 2s
"#,
        port = ports.kubelet,
        healthz = ports.kubelet_healthz,
        cert = p(&l.pki_file("kubelet-serving.crt")),
        key = p(&l.pki_file("kubelet-serving.key")),
        ca = p(&l.pki_file("ca.crt")),
        resolv = p(&l.path("dns/resolv.conf")),
    )
}

/// kube-proxy in iptables mode (through iptables-nft), conntrack left as the host has it.
pub fn kube_proxy_yaml(l: &Layout, ports: &Ports) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: {POD_CIDR}
hostnameOverride: {NODE_NAME}
bindAddress: {NODE_IP}
metricsBindAddress: 127.0.0.1:{metrics}
healthzBindAddress: 127.0.0.1:{healthz}
clientConnection: {{kubeconfig: {kc}}}
conntrack: {{maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
"#,
        metrics = ports.proxy_metrics,
        healthz = ports.proxy_healthz,
        kc = p(&l.kubeconfig("kube-proxy")),
    )
}

/// A kubeconfig for one client certificate of the node's PKI.
pub fn kubeconfig(l: &Layout, server: &str, cert: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: sim-node\n  cluster: {{server: \"{server}\", certificate-authority: {ca}}}\n\
         users:\n- name: u\n  user: {{client-certificate: {crt}, client-key: {key}}}\n\
         contexts:\n- name: sim-node\n  context: {{cluster: sim-node, user: u}}\ncurrent-context: sim-node\n",
        ca = p(&l.pki_file("ca.crt")),
        crt = p(&l.pki_file(&format!("{cert}.crt"))),
        key = p(&l.pki_file(&format!("{cert}.key"))),
    )
}

/// The flags kube-controller-manager and kube-scheduler share: `who`'s kubeconfig for the API,
/// for authenticating and for authorizing its own callers, its secure port on 127.0.0.1 (the
/// insecure one off), its serving certificates in `cert_dir`, and no leader election (one node).
pub fn control_plane_flags(l: &Layout, who: &str, secure_port: u16, cert_dir: &str) -> Vec<String> {
    let kc = p(&l.kubeconfig(who));
    vec![
        format!("--kubeconfig={kc}"),
        format!("--authentication-kubeconfig={kc}"),
        format!("--authorization-kubeconfig={kc}"),
        "--bind-address=127.0.0.1".into(),
        "--port=0".into(),
        format!("--secure-port={secure_port}"),
        format!("--cert-dir={}", p(&l.path(cert_dir))),
        "--leader-elect=false".into(),
    ]
}

/// The pods' resolv.conf base: no upstream nameserver of the host (a pod's queries stay on the
/// cluster DNS, which answers `cluster.local` only).
pub fn resolv_conf() -> String {
    "# the sim node: pods resolve cluster.local names only\noptions ndots:5\n".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_plane_flags_name_the_part_its_port_and_its_certificates() {
        let l = Layout::new("/n");
        let cases = [
            ("controller-manager", 10257, "cm-certs"),
            ("scheduler", 10259, "scheduler-certs"),
        ];
        for (who, port, certs) in cases {
            let flags = control_plane_flags(&l, who, port, certs);
            let kc = format!("/n/kubeconfig/{who}.kubeconfig");
            for want in [
                format!("--kubeconfig={kc}"),
                format!("--authentication-kubeconfig={kc}"),
                format!("--authorization-kubeconfig={kc}"),
                format!("--secure-port={port}"),
                format!("--cert-dir=/n/{certs}"),
                "--bind-address=127.0.0.1".to_string(),
                "--port=0".to_string(),
                "--leader-elect=false".to_string(),
            ] {
                assert!(flags.contains(&want), "{who}: {want} not in {flags:?}");
            }
            assert_eq!(flags.len(), 8, "{who}: {flags:?}");
        }
    }

    fn ports() -> Ports {
        Ports {
            apiserver: 1,
            etcd_client: 2,
            etcd_peer: 3,
            controller_manager: 4,
            scheduler: 5,
            kubelet: 6,
            kubelet_healthz: 7,
            proxy_metrics: 8,
            proxy_healthz: 9,
        }
    }

    #[test]
    fn containerd_clamps_oom_score_adj_and_keeps_to_its_own_dirs() {
        let l = Layout::new("/w");
        let t = containerd_toml(&l, Path::new("/usr/sbin/runc"), Path::new("/usr/lib/cni"));
        for want in [
            "restrict_oom_score_adj = true",
            "SystemdCgroup = false",
            "root = \"/w/containerd/root\"",
            "address = \"/w/containerd/containerd.sock\"",
            "sandbox_image = \"localhost/pause:3.4\"",
            "conf_dir = \"/w/cni/net.d\"",
        ] {
            assert!(t.contains(want), "{want} missing from\n{t}");
        }
    }

    #[test]
    fn the_pod_network_is_the_harness_bridge_and_subnet() {
        let v: serde_json::Value =
            serde_json::from_str(&cni_conflist(&Layout::new("/w"))).expect("json");
        let bridge = &v["plugins"][0];
        assert_eq!(bridge["bridge"], BRIDGE);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], POD_CIDR);
        assert_eq!(bridge["ipam"]["dataDir"], "/w/cni/ipam");
    }

    #[test]
    fn kubelet_and_proxy_listen_where_the_ports_say() {
        let l = Layout::new("/w");
        let k: serde_yaml::Value = serde_yaml::from_str(&kubelet_yaml(&l, &ports())).expect("yaml");
        assert_eq!(k["port"], 6);
        assert_eq!(k["healthzPort"], 7);
        assert_eq!(k["address"], NODE_IP.to_string());
        assert_eq!(k["cgroupDriver"], "cgroupfs");
        assert_eq!(k["clusterDNS"][0], DNS_SERVICE_IP.to_string());
        assert_eq!(k["resolvConf"], "/w/dns/resolv.conf");
        let kp: serde_yaml::Value =
            serde_yaml::from_str(&kube_proxy_yaml(&l, &ports())).expect("yaml");
        assert_eq!(kp["metricsBindAddress"], "127.0.0.1:8");
        assert_eq!(kp["mode"], "iptables");
        let kc: serde_yaml::Value =
            serde_yaml::from_str(&kubeconfig(&l, "https://x:1", "admin")).expect("yaml");
        assert_eq!(kc["users"][0]["user"]["client-key"], "/w/pki/admin.key");
    }
}
