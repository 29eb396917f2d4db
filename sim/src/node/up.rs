//! Bringing the node up and taking it down: the parts started in order, each waited for, every
//! process owned by PID; the host recorded before and put back after.
//!
//! Measured here: nothing → Node Ready in 19–21 s; a pod Running; `down` leaves no difference.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use super::host_baseline::{self, Baseline};
use super::node_config::{self, DNS_SERVICE_IP, Layout, NODE_IFACE, NODE_IP, NODE_NAME, Ports};
use super::{Machine, NodeError, missing, part, sh};
use crate::apiserver::child_process::{Proc, free_ports};

/// How long each part may take to answer before `up` gives up on it.
const PART_DEADLINE: Duration = Duration::from_secs(90);
/// How long `down` waits for the pods to stop before it kills what is left.
/// (A nats-server's lame duck alone takes its 30 s minimum, and a controller's pod must be gone
/// before what it recreated stays deleted.)
const DRAIN_DEADLINE: Duration = Duration::from_secs(180);

/// A running node. Dropping it takes it down.
pub struct Node {
    layout: Layout,
    ports: Ports,
    procs: Vec<Proc>,
    baseline: Baseline,
    client: Client,
    dns: Option<tokio::task::JoinHandle<()>>,
    dnsmasq: u32,
    volumes: usize,
    _lock: File,
    down: bool,
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> NodeError {
    let path = path.to_path_buf();
    move |source| NodeError::Io { what, path, source }
}

/// Polls `ok` until it holds or [`PART_DEADLINE`] passes.
async fn until<F, Fut>(
    what: &'static str,
    proc: Option<&mut Proc>,
    mut ok: F,
) -> Result<(), NodeError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    let mut proc = proc;
    loop {
        if ok().await {
            return Ok(());
        }
        if let Some(p) = proc.as_deref_mut()
            && let Some(status) = p.exited()
        {
            return Err(part(
                what,
                format!("exited ({status}):\n{}", p.log_tail(30)),
            ));
        }
        if start.elapsed() > PART_DEADLINE {
            return Err(part(what, format!("not ready after {PART_DEADLINE:?}")));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Node {
    /// The kube-rs client of the node's admin (system:masters).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The admin's kubeconfig, for kubectl and Helm.
    pub fn kubeconfig(&self) -> PathBuf {
        self.layout.kubeconfig("admin")
    }

    /// Makes an image of one static binary (entrypoint `/<name>`) and imports it as both
    /// `base_name:tag` and `base_name@<digest>`; returns the digest (a pod may name either).
    pub fn import_binary(
        &self,
        binary: &Path,
        name: &str,
        tag: &str,
        base_name: &str,
    ) -> Result<String, NodeError> {
        let archive = super::image::single_binary(&self.layout.path("images"), binary, name, tag)?;
        import_image(&self.layout, &archive.path, base_name)?;
        Ok(archive.digest)
    }

    /// Imports an OCI archive that names itself (an `org.opencontainers.image.ref.name` of a whole
    /// reference: the images `scripts/image.py` writes) under that name.
    pub fn import_archive(&self, archive: &Path) -> Result<(), NodeError> {
        import(&self.layout, archive, None)
    }

    /// Imports an OCI archive under `base_name` and by digest when given, else under the name it
    /// gives itself (`crate::kube_backend::KubeCluster::import`).
    pub fn import_named(&self, archive: &Path, base_name: Option<&str>) -> Result<(), NodeError> {
        import(&self.layout, archive, base_name)
    }

    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// The addresses and names outside Kubernetes the pods reach ([`super::outside`]).
    pub fn outside(&self) -> super::outside::Outside {
        super::outside::Outside {
            hosts: self.layout.outside_hosts_file(),
            dnsmasq: self.dnsmasq,
        }
    }

    /// The kubelet's containers, for signals and pauses from the host.
    pub fn containers(&self) -> super::containers::Containers {
        super::containers::Containers {
            socket: self.layout.containerd_socket(),
        }
    }

    /// Brings the node up in `dir` (a fresh directory), with `volumes` static local PVs.
    pub async fn up(cache: &Path, dir: &Path, volumes: usize) -> Result<Self, NodeError> {
        let gaps = missing(&Machine::probe(cache), cache);
        if !gaps.is_empty() {
            return Err(NodeError::Unavailable(gaps));
        }
        let lock = lock_machine()?;
        recover_stale_run();
        let baseline = Baseline::record().map_err(|e| part("host baseline", e))?;
        save_state(&baseline, &[])?;
        let layout = Layout::new(dir);
        let [
            apiserver,
            etcd_client,
            etcd_peer,
            controller_manager,
            scheduler,
            kubelet,
            kubelet_healthz,
            proxy_metrics,
            proxy_healthz,
        ] = free_ports::<9>()?;
        let ports = Ports {
            apiserver,
            etcd_client,
            etcd_peer,
            controller_manager,
            scheduler,
            kubelet,
            kubelet_healthz,
            proxy_metrics,
            proxy_healthz,
        };
        add_node_address()?;
        write_files(&layout, &ports)?;
        let client = crate::apiserver::launch::client_of(
            &layout.kubeconfig("admin"),
            &format!("https://{NODE_IP}:{}", ports.apiserver),
        )
        .await?;
        let mut node = Self {
            layout,
            ports,
            procs: vec![],
            baseline,
            client,
            dns: None,
            dnsmasq: 0,
            volumes,
            _lock: lock,
            down: false,
        };
        node.start_parts(cache).await?;
        Ok(node)
    }

    fn spawn(
        &mut self,
        name: &'static str,
        program: &Path,
        args: Vec<String>,
    ) -> Result<usize, NodeError> {
        let p = Proc::spawn(name, program, &args, self.layout.log(name))?;
        self.procs.push(p);
        let pids: Vec<u32> = self.procs.iter().map(Proc::pid).collect();
        save_state(&self.baseline, &pids)?;
        Ok(self.procs.len() - 1)
    }

    async fn start_parts(&mut self, cache: &Path) -> Result<(), NodeError> {
        let l = self.layout.clone();
        let pki = |f: &str| l.pki_file(f).display().to_string();
        let kc = |who: &str| l.kubeconfig(who).display().to_string();
        let bin = |dir: &str, b: &str| cache.join(dir).join("bin").join(b);
        let node_bin = |b: &str| bin("kube-node-1.20", b);

        // containerd, and the sandbox image.
        let i = self.spawn(
            "containerd",
            Path::new("/usr/bin/containerd"),
            vec![
                "--config".into(),
                l.path("containerd/config.toml").display().to_string(),
            ],
        )?;
        let sock = l.containerd_socket().display().to_string();
        until("containerd", Some(&mut self.procs[i]), || {
            let sock = sock.clone();
            async move {
                Command::new("/usr/bin/ctr")
                    .args(["--address", &sock, "version"])
                    .output()
                    .is_ok_and(|o| o.status.success())
            }
        })
        .await?;
        let pause =
            super::image::single_binary(&l.path("images"), &node_bin("pause"), "pause", "3.4")?;
        import_image(&l, &pause.path, "localhost/pause")?;

        // etcd and the apiserver.
        let p = self.ports;
        let i = self.spawn(
            "etcd",
            &bin("kube-apiserver-1.20", "etcd"),
            vec![
                format!("--data-dir={}", l.path("etcd").display()),
                format!("--listen-client-urls=http://127.0.0.1:{}", p.etcd_client),
                format!("--advertise-client-urls=http://127.0.0.1:{}", p.etcd_client),
                format!("--listen-peer-urls=http://127.0.0.1:{}", p.etcd_peer),
                format!(
                    "--initial-advertise-peer-urls=http://127.0.0.1:{}",
                    p.etcd_peer
                ),
                format!("--initial-cluster=default=http://127.0.0.1:{}", p.etcd_peer),
            ],
        )?;
        let etcd_port = p.etcd_client;
        until("etcd", Some(&mut self.procs[i]), || async move {
            std::net::TcpStream::connect(("127.0.0.1", etcd_port)).is_ok()
        })
        .await?;
        let i = self.spawn(
            "kube-apiserver",
            &bin("kube-apiserver-1.20", "kube-apiserver"),
            vec![
                format!("--etcd-servers=http://127.0.0.1:{}", p.etcd_client),
                format!("--bind-address={NODE_IP}"),
                format!("--advertise-address={NODE_IP}"),
                format!("--secure-port={}", p.apiserver),
                "--insecure-port=0".into(),
                format!("--tls-cert-file={}", pki("apiserver.crt")),
                format!("--tls-private-key-file={}", pki("apiserver.key")),
                format!("--client-ca-file={}", pki("ca.crt")),
                "--authorization-mode=Node,RBAC".into(),
                "--enable-admission-plugins=NodeRestriction".into(),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", pki("sa.pub")),
                format!("--service-account-signing-key-file={}", pki("sa.key")),
                format!("--service-cluster-ip-range={}", node_config::SERVICE_CIDR),
                format!(
                    "--kubelet-client-certificate={}",
                    pki("apiserver-kubelet-client.crt")
                ),
                format!(
                    "--kubelet-client-key={}",
                    pki("apiserver-kubelet-client.key")
                ),
                format!("--kubelet-certificate-authority={}", pki("ca.crt")),
                "--kubelet-preferred-address-types=InternalIP".into(),
                format!("--cert-dir={}", l.path("apiserver-certs").display()),
            ],
        )?;
        let client = self.client.clone();
        until("kube-apiserver", Some(&mut self.procs[i]), || {
            let client = client.clone();
            async move {
                let req = http::Request::get("/readyz").body(Vec::new());
                match req {
                    Ok(req) => client
                        .request_text(req)
                        .await
                        .is_ok_and(|t| t.trim() == "ok"),
                    Err(_) => false,
                }
            }
        })
        .await?;

        self.spawn(
            "kube-controller-manager",
            &node_bin("kube-controller-manager"),
            [
                node_config::control_plane_flags(
                    &l,
                    "controller-manager",
                    p.controller_manager,
                    "cm-certs",
                ),
                vec![
                    format!("--service-account-private-key-file={}", pki("sa.key")),
                    format!("--root-ca-file={}", pki("ca.crt")),
                    "--use-service-account-credentials=true".into(),
                    format!("--cluster-signing-cert-file={}", pki("ca.crt")),
                    format!("--cluster-signing-key-file={}", pki("ca.key")),
                    format!("--service-cluster-ip-range={}", node_config::SERVICE_CIDR),
                    "--allocate-node-cidrs=false".into(),
                    format!("--flex-volume-plugin-dir={}", l.path("cm-flex").display()),
                ],
            ]
            .concat(),
        )?;
        self.spawn(
            "kube-scheduler",
            &node_bin("kube-scheduler"),
            node_config::control_plane_flags(&l, "scheduler", p.scheduler, "scheduler-certs"),
        )?;
        let i = self.spawn(
            "kubelet",
            &node_bin("kubelet"),
            vec![
                format!("--config={}", l.path("kubelet.yaml").display()),
                format!("--kubeconfig={}", kc("kubelet")),
                "--container-runtime=remote".into(),
                format!("--container-runtime-endpoint=unix://{sock}"),
                "--runtime-request-timeout=5m".into(),
                format!("--root-dir={}", l.path("kubelet").display()),
                format!("--cert-dir={}", l.path("kubelet/pki").display()),
                format!(
                    "--volume-plugin-dir={}",
                    l.path("kubelet/volume-plugins").display()
                ),
                format!("--node-ip={NODE_IP}"),
                format!("--hostname-override={NODE_NAME}"),
            ],
        )?;
        self.spawn(
            "kube-proxy",
            &node_bin("kube-proxy"),
            vec![format!("--config={}", l.path("kube-proxy.yaml").display())],
        )?;
        let nodes: Api<KubeNode> = Api::all(self.client.clone());
        until("kubelet (Node Ready)", Some(&mut self.procs[i]), || {
            let nodes = nodes.clone();
            async move {
                nodes
                    .get_opt(NODE_NAME)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|n| {
                        n.status
                            .and_then(|s| s.conditions)
                            .unwrap_or_default()
                            .iter()
                            .any(|c| c.type_ == "Ready" && c.status == "True")
                    })
            }
        })
        .await?;

        // The cluster DNS.
        let hosts = l.hosts_file();
        std::fs::write(&hosts, "").map_err(io("write the DNS hosts file", &hosts))?;
        let outside = l.outside_hosts_file();
        std::fs::write(&outside, "").map_err(io("write the outside names", &outside))?;
        let i = self.spawn(
            "dnsmasq",
            Path::new("/usr/sbin/dnsmasq"),
            vec![
                "--keep-in-foreground".into(),
                "--conf-file=/dev/null".into(),
                "--no-hosts".into(),
                "--no-resolv".into(),
                format!("--addn-hosts={}", hosts.display()),
                format!("--addn-hosts={}", outside.display()),
                format!("--listen-address={NODE_IP}"),
                "--bind-interfaces".into(),
                "--port=53".into(),
                "--user=root".into(),
                "--local=/cluster.local/".into(),
                "--domain-needed".into(),
            ],
        )?;
        // Listening, so its SIGHUP handler is in place: a SIGHUP before that (the first sync's,
        // milliseconds after the spawn) killed it, and with it every name the pods resolve.
        until("dnsmasq", Some(&mut self.procs[i]), || async {
            std::net::TcpStream::connect((NODE_IP, 53)).is_ok()
        })
        .await?;
        let dnsmasq = self.procs[i].pid();
        self.dnsmasq = dnsmasq;
        self.dns = Some(tokio::spawn(super::dns::sync(
            self.client.clone(),
            hosts,
            dnsmasq,
        )));
        self.apply(&cluster_objects(&l, self.volumes)?).await?;
        Ok(())
    }

    /// Server-side applies each object of a multi-document YAML as the node's admin; a namespaced
    /// object that names no namespace goes to `default`.
    pub async fn apply(&self, yaml: &str) -> Result<(), NodeError> {
        self.apply_in("default", yaml).await
    }

    /// [`Node::apply`], a namespaced object that names no namespace going to `namespace`.
    pub async fn apply_in(&self, namespace: &str, yaml: &str) -> Result<(), NodeError> {
        // Parsed before the first await: the YAML parser is not Send.
        let objects = serde_yaml::Deserializer::from_str(yaml)
            .map(|doc| {
                <kube::api::DynamicObject as serde::Deserialize>::deserialize(doc)
                    .map_err(|e| part("cluster objects", e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        for obj in objects {
            let gvk = obj
                .types
                .as_ref()
                .map(kube::api::GroupVersionKind::try_from)
                .transpose()
                .map_err(|e| part("cluster objects", e.to_string()))?
                .ok_or_else(|| part("cluster objects", "an object without apiVersion/kind"))?;
            let (ar, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
                .await
                .map_err(|e| part("cluster objects", e.to_string()))?;
            let name = obj.metadata.name.clone().unwrap_or_default();
            let api: Api<kube::api::DynamicObject> = match caps.scope {
                kube::discovery::Scope::Namespaced => {
                    let ns = obj.metadata.namespace.as_deref().unwrap_or(namespace);
                    Api::namespaced_with(self.client.clone(), ns, &ar)
                }
                kube::discovery::Scope::Cluster => Api::all_with(self.client.clone(), &ar),
            };
            api.patch(
                &name,
                &PatchParams::apply("sim-node").force(),
                &Patch::Apply(&obj),
            )
            .await
            .map_err(|e| part("cluster objects", format!("{name}: {e}")))?;
        }
        Ok(())
    }

    /// Takes the node down and puts the host back; the lines are what still differs. The
    /// workloads are deleted first and their pods stopped by the kubelet, each with its grace
    /// period and preStop hook (a nats-server's lame duck), before the parts are killed.
    pub async fn down(mut self) -> Vec<String> {
        let mut left = super::drain::drain(&self.client, DRAIN_DEADLINE).await;
        left.extend(self.teardown());
        left
    }

    fn teardown(&mut self) -> Vec<String> {
        if std::mem::replace(&mut self.down, true) {
            return vec![];
        }
        if let Some(dns) = self.dns.take() {
            dns.abort();
        }
        while let Some(mut p) = self.procs.pop() {
            p.kill();
        }
        kill_shims(&self.layout.containerd_socket());
        let mut left = host_baseline::restore(&self.baseline);
        match Baseline::record() {
            Ok(now) => left.extend(self.baseline.differences(&now)),
            Err(e) => left.push(format!("reading the host: {e}")),
        }
        let _ = std::fs::remove_dir_all(host_baseline::state_dir());
        left
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        for line in self.teardown() {
            tracing::warn!(%line, "the node left the host changed");
        }
    }
}

/// One node per machine: it owns fixed addresses and the host's ruleset.
fn lock_machine() -> Result<File, NodeError> {
    let dir = host_baseline::state_dir();
    std::fs::create_dir_all(&dir).map_err(io("create the node's state dir", &dir))?;
    let path = dir.join("lock");
    let f = File::create(&path).map_err(io("create the node lock", &path))?;
    f.try_lock().map_err(|e| {
        part(
            "lock",
            format!(
                "another node runs on this machine ({}): {e}",
                path.display()
            ),
        )
    })?;
    Ok(f)
}

fn save_state(b: &Baseline, pids: &[u32]) -> Result<(), NodeError> {
    let path = host_baseline::state_dir().join("state.json");
    let text = serde_json::json!({"baseline": b, "pids": pids}).to_string();
    std::fs::write(&path, text).map_err(io("save the node's state", &path))
}

/// A run killed before `down` left processes and host changes; kill and undo them.
fn recover_stale_run() {
    let path = host_baseline::state_dir().join("state.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return;
    };
    #[derive(serde::Deserialize)]
    struct State {
        baseline: Baseline,
        pids: Vec<u32>,
    }
    if let Ok(s) = serde_json::from_str::<State>(&text) {
        for pid in s.pids.iter().rev() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        for line in host_baseline::restore(&s.baseline) {
            tracing::warn!(%line, "restoring the host a killed node run left");
        }
    }
    let _ = std::fs::remove_file(&path);
}

fn add_node_address() -> Result<(), NodeError> {
    // A veth pair, not a dummy: this VM's kernel has no dummy module; a pair has carrier.
    let peer = format!("{NODE_IFACE}p");
    let add = [
        "link", "add", NODE_IFACE, "type", "veth", "peer", "name", &peer,
    ];
    sh("node address", "ip", &add)?;
    sh("node address", "ip", &["link", "set", &peer, "up"])?;
    sh(
        "node address",
        "ip",
        &["addr", "add", &format!("{NODE_IP}/32"), "dev", NODE_IFACE],
    )?;
    sh("node address", "ip", &["link", "set", NODE_IFACE, "up"])?;
    Ok(())
}

fn write_files(l: &Layout, ports: &Ports) -> Result<(), NodeError> {
    for d in [
        "pki",
        "log",
        "kubeconfig",
        "containerd",
        "cni/net.d",
        "dns",
        "kubelet",
        "images",
        "volumes",
    ] {
        let p = l.path(d);
        std::fs::create_dir_all(&p).map_err(io("create a node directory", &p))?;
    }
    super::node_pki::generate(&l.pki())?;
    let server = format!("https://{NODE_IP}:{}", ports.apiserver);
    let files = [
        (
            l.path("containerd/config.toml"),
            node_config::containerd_toml(l, Path::new("/usr/sbin/runc"), Path::new("/usr/lib/cni")),
        ),
        (
            l.path("cni/net.d/10-sim-node.conflist"),
            node_config::cni_conflist(l),
        ),
        (l.path("kubelet.yaml"), node_config::kubelet_yaml(l, ports)),
        (
            l.path("kube-proxy.yaml"),
            node_config::kube_proxy_yaml(l, ports),
        ),
        (l.path("dns/resolv.conf"), node_config::resolv_conf()),
        (
            l.kubeconfig("admin"),
            node_config::kubeconfig(l, &server, "admin"),
        ),
        (
            l.kubeconfig("controller-manager"),
            node_config::kubeconfig(l, &server, "controller-manager"),
        ),
        (
            l.kubeconfig("scheduler"),
            node_config::kubeconfig(l, &server, "scheduler"),
        ),
        (
            l.kubeconfig("kubelet"),
            node_config::kubeconfig(l, &server, "kubelet"),
        ),
        (
            l.kubeconfig("kube-proxy"),
            node_config::kubeconfig(l, &server, "kube-proxy"),
        ),
    ];
    for (path, text) in files {
        std::fs::write(&path, text).map_err(io("write a node file", &path))?;
    }
    Ok(())
}

/// Imports an OCI archive into the CRI's namespace as `base_name:<its tag>` and, for a pod that
/// names its image by digest, `base_name@<its manifest digest>`.
pub fn import_image(l: &Layout, archive: &Path, base_name: &str) -> Result<(), NodeError> {
    import(l, archive, Some(base_name))
}

/// `ctr images import` into the CRI's namespace: under `base_name` (and by digest) when given,
/// else under the name the archive gives itself.
fn import(l: &Layout, archive: &Path, base_name: Option<&str>) -> Result<(), NodeError> {
    let sock = l.containerd_socket().display().to_string();
    let archive = archive.display().to_string();
    let mut args = vec!["--address", &sock, "-n", "k8s.io", "images", "import"];
    if let Some(base) = base_name {
        args.extend(["--base-name", base, "--digests"]);
    }
    args.push(&archive);
    sh("image import", "/usr/bin/ctr", &args).map(drop)
}

/// The cluster's own objects: the kube-dns Service with its manual Endpoints at dnsmasq, and the
/// default StorageClass `local` with static PVs whose directories any uid may write (the
/// restricted pods run as a non-root user).
fn cluster_objects(l: &Layout, volumes: usize) -> Result<String, NodeError> {
    let mut out = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: kube-dns, namespace: kube-system}}\n\
         spec:\n  clusterIP: {DNS_SERVICE_IP}\n  ports: [{{name: dns, port: 53, protocol: UDP}}, {{name: dns-tcp, port: 53, protocol: TCP}}]\n\
         ---\napiVersion: v1\nkind: Endpoints\nmetadata: {{name: kube-dns, namespace: kube-system}}\n\
         subsets:\n- addresses: [{{ip: {NODE_IP}}}]\n  ports: [{{name: dns, port: 53, protocol: UDP}}, {{name: dns-tcp, port: 53, protocol: TCP}}]\n\
         ---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: local\n  annotations: {{storageclass.kubernetes.io/is-default-class: \"true\"}}\n\
         provisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n"
    );
    for i in 0..volumes {
        let dir = l.volumes().join(format!("pv{i}"));
        std::fs::create_dir_all(&dir).map_err(io("create a local volume", &dir))?;
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .map_err(io("open a local volume to the pods' user", &dir))?;
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: local-pv{i}}}\nspec:\n  capacity: {{storage: 10Gi}}\n  \
             accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Delete\n  storageClassName: local\n  local: {{path: {}}}\n  \
             nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{NODE_NAME}]}}]}}]}}}}\n",
            dir.display()
        ));
    }
    Ok(out)
}

/// containerd's shims outlive it; those serving this node's socket are killed by PID.
fn kill_shims(sock: &Path) {
    let needle = sock.display().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("containerd-shim") && cmdline.contains(&needle) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
