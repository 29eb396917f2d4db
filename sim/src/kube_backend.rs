//! One trait for the Kubernetes the chart is Helm-installed into: the sim's node (this machine's
//! own kubelet, [`crate::node`]) and k3s (a container where a Docker engine answers,
//! `crate::k3s_cluster`, cargo feature `k3s`). What differs between them is only [`KubeBackend::start`]
//! and, on the [`KubeCluster`] it returns, importing an image, the kubeconfig and stopping.
//! Everything else — the images built, the chart's release, the stories applied, the runner and
//! its expectations — is the same code (e2e's `on_cluster` and `conformance::run`).
//!
//! What a backend does is also written down as data: [`plan`] lists the commands a run carries
//! out, in order, and [`k3s_plan`] is the k3s backend's list; both are pure and table-tested, so
//! the k3s backend's plan is checked on every run of the gate, also where no Docker engine answers
//! (this machine).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;

/// Why a Kubernetes backend could not start, import or answer.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The backend cannot run on this machine; the reason says what is missing.
    #[error("the {backend} backend is not available here: {reason}")]
    Unavailable {
        backend: &'static str,
        reason: String,
    },
    #[error("the {backend} backend failed to {what}: {message}")]
    Failed {
        backend: &'static str,
        what: &'static str,
        message: String,
    },
    /// The node's own error, as the node says it (its outside network).
    #[error(transparent)]
    Node(#[from] crate::node::NodeError),
}

/// How the chart's release must be installed on a backend's Kubernetes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Kubernetes 1.20 (the node): older than the chart's minimum and without CEL, so the
    /// version check is off (`kubeVersionCheck: false`), the OpenAPI validation is off and the
    /// apply client-side (see e2e's `chart::release_args`).
    Kube120,
    /// A current Kubernetes (k3s): the chart's default values, Helm's defaults.
    Current,
}

/// A running Kubernetes the sim brought up.
pub trait KubeCluster: Send + Sync {
    /// The backend's name (`node`, `k3s`).
    fn backend(&self) -> &'static str;
    /// How the chart is installed here.
    fn flavor(&self) -> Flavor;
    /// The admin's kubeconfig, readable by this process (Helm, kubectl).
    fn kubeconfig(&self) -> PathBuf;
    /// A kube-rs client of the admin.
    fn client(&self) -> kube::Client;
    /// Imports an OCI archive into the cluster's containerd (namespace `k8s.io`): under
    /// `base_name` and by digest when given, else under the name the archive gives itself.
    fn import<'a>(
        &'a self,
        archive: &'a Path,
        base_name: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), KubeError>>;
    /// The network outside Kubernetes the cluster's pods reach (where a story's own NATS servers
    /// run as processes on this machine); `None` when it could not be set up.
    fn outside(&self) -> Option<Arc<dyn OutsideNet>>;
    /// Stops the cluster; the lines say what it left behind (empty: nothing).
    fn stop(self: Box<Self>) -> BoxFuture<'static, Vec<String>>;
}

/// A backend's network outside Kubernetes: addresses on this machine its pods reach, names its
/// cluster DNS answers for them, and the address of that DNS as this machine reaches it. The
/// node's is [`crate::node::outside::Outside`] (addresses on the node's interface, names in its
/// dnsmasq's hosts file); k3s's is the run's Docker network (`crate::k3s_outside`).
pub trait OutsideNet: Send + Sync {
    /// Adds outside address `n` (1–254, `10.245.1.<n>` on both backends) where this machine
    /// listens on it and the pods reach it (again: no change) and returns it.
    fn address(&self, n: u8) -> Result<Ipv4Addr, KubeError>;
    /// Makes `entries` (address, name) the outside names the cluster DNS answers, replacing the
    /// ones before.
    fn name<'a>(
        &'a self,
        entries: &'a [(Ipv4Addr, String)],
    ) -> BoxFuture<'a, Result<(), KubeError>>;
    /// The cluster DNS as a process on this machine reaches it (a `resolv.conf` nameserver).
    fn dns_address(&self) -> Ipv4Addr;
}

impl OutsideNet for crate::node::outside::Outside {
    fn address(&self, n: u8) -> Result<Ipv4Addr, KubeError> {
        Ok(crate::node::outside::Outside::address(self, n)?)
    }

    fn name<'a>(
        &'a self,
        entries: &'a [(Ipv4Addr, String)],
    ) -> BoxFuture<'a, Result<(), KubeError>> {
        Box::pin(async move { Ok(crate::node::outside::Outside::name(self, entries)?) })
    }

    fn dns_address(&self) -> Ipv4Addr {
        crate::node::node_config::NODE_IP
    }
}

/// A way to start a Kubernetes: the node or k3s.
pub trait KubeBackend: Send + Sync {
    fn name(&self) -> &'static str;
    /// Starts a fresh cluster whose files live under `dir`.
    fn start<'a>(&'a self, dir: &'a Path)
    -> BoxFuture<'a, Result<Box<dyn KubeCluster>, KubeError>>;
}

/// An image a run imports: an OCI archive, under the name it gives itself (the controllers,
/// `scripts/image.py`) or under `base_name` and by digest (the nats-server images).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageArchive {
    pub archive: PathBuf,
    pub base_name: Option<String>,
}

/// The chart's release a run installs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    pub chart: PathBuf,
    pub name: String,
    pub namespace: String,
    /// The run's own values files (later ones win), before the flavor's.
    pub values: Vec<PathBuf>,
}

/// One command of a run, in the order [`plan`] lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Start the backend's Kubernetes: what it runs, as words (for k3s: the container).
    Start {
        backend: &'static str,
        run: Vec<String>,
    },
    /// Import one image archive into the cluster's containerd.
    Import(ImageArchive),
    /// Write (or find) the admin's kubeconfig at this path.
    Kubeconfig(PathBuf),
    /// Create the release's namespace.
    Namespace(String),
    /// `helm install` with exactly these arguments (after the shim's name).
    HelmInstall(Vec<String>),
    /// Apply one story's manifests, step by step, waiting for its status examples.
    Apply(String),
    /// Stop the cluster.
    Stop,
}

/// The values files and Helm flags of `release` under `flavor`, after the run's own: on
/// [`Flavor::Kube120`] the test values file `kube120_values` (the version check off) and the two
/// flags 1.20 needs; on [`Flavor::Current`] nothing: the chart's defaults.
pub fn helm_install_args(
    release: &Release,
    kubeconfig: &Path,
    flavor: Flavor,
    kube120_values: &Path,
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "install".into(),
        release.chart.display().to_string(),
        release.name.clone(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--namespace".into(),
        release.namespace.clone(),
    ];
    let mut values = Vec::new();
    if flavor == Flavor::Kube120 {
        args.extend([
            "--disable-openapi-validation".into(),
            "--server-side".into(),
            "false".into(),
        ]);
        values.push(kube120_values.to_path_buf());
    }
    values.extend(release.values.iter().cloned());
    for v in values {
        args.extend(["-f".into(), v.display().to_string()]);
    }
    args
}

/// What a run does, in order, whatever the backend: start it (`start`), import every image,
/// take the kubeconfig, create the release's namespace, `helm install`, apply each story, stop.
pub fn plan(
    start: Step,
    flavor: Flavor,
    images: &[ImageArchive],
    kubeconfig: &Path,
    release: &Release,
    kube120_values: &Path,
    stories: &[String],
) -> Vec<Step> {
    let mut out = vec![start];
    out.extend(images.iter().cloned().map(Step::Import));
    out.push(Step::Kubeconfig(kubeconfig.to_path_buf()));
    out.push(Step::Namespace(release.namespace.clone()));
    out.push(Step::HelmInstall(helm_install_args(
        release,
        kubeconfig,
        flavor,
        kube120_values,
    )));
    out.extend(stories.iter().cloned().map(Step::Apply));
    out.push(Step::Stop);
    out
}

/// The pinned k3s image: a current Kubernetes (1.35), at or above the chart's minimum (1.34).
pub const K3S_IMAGE: (&str, &str) = ("rancher/k3s", "v1.35.0-k3s1");

/// Where a k3s container keeps its kubeconfig (`k3s.yaml`), and where the run's image archives
/// appear inside it.
pub const K3S_CONF_DIR: &str = "/etc/rancher/k3s";
pub const K3S_IMAGES_DIR: &str = "/sim-images";

/// How the k3s container is started: image, arguments, bind mounts (host → container).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct K3sStart {
    pub image: (String, String),
    /// The k3s server's arguments.
    pub args: Vec<String>,
    /// Privileged: k3s runs containerd and a kubelet inside.
    pub privileged: bool,
    pub mounts: Vec<(PathBuf, String)>,
    /// The Docker network it joins (the run's own, [`crate::k3s_outside::network`]).
    pub network: String,
}

/// The k3s container for a run under `dir`: the pinned image, no traefik and no metrics-server
/// (the chart needs neither), containerd's native snapshotter (overlay inside a container's
/// overlay is refused on some hosts), the kubeconfig written where the host reads it, the
/// run's image archives mounted for `ctr images import`, on the run's own Docker network with its
/// pod and Service networks and cluster DNS pinned (k3s's defaults) where the host's routes
/// expect them ([`crate::k3s_outside`]).
pub fn k3s_start(dir: &Path) -> K3sStart {
    use crate::k3s_outside::{CLUSTER_CIDR, CLUSTER_DNS, NETWORK, SERVICE_CIDR};
    let mut args: Vec<String> = [
        "server",
        "--snapshotter=native",
        "--disable=traefik",
        "--disable=metrics-server",
        "--write-kubeconfig-mode=644",
    ]
    .map(String::from)
    .to_vec();
    args.extend([
        format!("--cluster-cidr={CLUSTER_CIDR}"),
        format!("--service-cidr={SERVICE_CIDR}"),
        format!("--cluster-dns={CLUSTER_DNS}"),
    ]);
    K3sStart {
        image: (K3S_IMAGE.0.into(), K3S_IMAGE.1.into()),
        args,
        privileged: true,
        mounts: vec![
            (dir.join("k3s-conf"), K3S_CONF_DIR.into()),
            (dir.join("images"), K3S_IMAGES_DIR.into()),
        ],
        network: NETWORK.into(),
    }
}

/// The command that imports `image` inside the k3s container (its archive copied into the
/// images mount first): k3s's own `ctr` into the kubelet's namespace.
pub fn k3s_import_command(image: &ImageArchive) -> Vec<String> {
    let file = image
        .archive
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut cmd: Vec<String> = ["ctr", "-n", "k8s.io", "images", "import"]
        .map(String::from)
        .to_vec();
    if let Some(base) = &image.base_name {
        cmd.extend(["--base-name".into(), base.clone(), "--digests".into()]);
    }
    cmd.push(format!("{K3S_IMAGES_DIR}/{file}"));
    cmd
}

/// The k3s backend's plan for a run under `dir`: the container started as [`k3s_start`] says,
/// each image imported with [`k3s_import_command`], the kubeconfig `dir/kubeconfig` (k3s's own,
/// its server address rewritten to the API port Docker mapped), the chart with its default values,
/// the stories, the container removed.
pub fn k3s_plan(
    dir: &Path,
    images: &[ImageArchive],
    release: &Release,
    stories: &[String],
) -> Vec<Step> {
    let s = k3s_start(dir);
    let mut run = vec![
        "docker-run".to_string(),
        format!("{}:{}", s.image.0, s.image.1),
    ];
    if s.privileged {
        run.push("--privileged".into());
    }
    run.push(format!("--network {}", s.network));
    for (host, inside) in &s.mounts {
        run.push(format!("-v {}:{inside}", host.display()));
    }
    run.extend(s.args);
    let start = Step::Start {
        backend: "k3s",
        run,
    };
    plan(
        start,
        Flavor::Current,
        images,
        &dir.join("kubeconfig"),
        release,
        Path::new("(none: the chart's defaults)"),
        stories,
    )
}

/// The kubeconfig k3s wrote, pointed at `https://127.0.0.1:<port>` (the API port Docker mapped)
/// instead of the container's own address.
pub fn k3s_kubeconfig(written: &str, port: u16) -> String {
    written
        .lines()
        .map(|line| match line.trim_start().strip_prefix("server:") {
            Some(_) => {
                let indent = &line[..line.len() - line.trim_start().len()];
                format!("{indent}server: https://127.0.0.1:{port}")
            }
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The ConfigMap key k3s's CoreDNS imports as a server block (`import /etc/coredns/custom/*.server`,
/// the optional ConfigMap `coredns-custom` in `kube-system`).
pub const K3S_OUTSIDE_KEY: &str = "outside.server";

/// The CoreDNS server block that answers the stories' outside names on k3s as the node's
/// dnsmasq does ([`crate::node::dns::outside_names`]): each `(ClusterIP, Service name)` of a
/// NatsCluster's gateway or leafnode Service under `gw.<c>.example.net` / `leaf.<c>.example.net`,
/// sorted (the same Services give the same text, so an unchanged feed writes nothing).
pub fn k3s_outside_server(services: &[(String, String)]) -> String {
    let mut lines: Vec<String> = services
        .iter()
        .filter(|(ip, _)| !ip.is_empty() && ip != "None")
        .flat_map(|(ip, name)| {
            crate::node::dns::outside_names(name)
                .into_iter()
                .map(move |n| format!("        {ip} {n}"))
        })
        .collect();
    lines.sort();
    lines.dedup();
    format!(
        "{domain}:53 {{\n    hosts {{\n{entries}        fallthrough\n    }}\n    forward . /etc/resolv.conf\n}}\n",
        domain = crate::node::dns::OUTSIDE_DOMAIN,
        entries = lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
}

/// The node backend ([`crate::node::Node`]): this machine's own Kubernetes 1.20, `volumes`
/// static local volumes, its parts from `cache`.
#[derive(Clone, Debug)]
pub struct NodeBackend {
    pub cache: PathBuf,
    pub volumes: usize,
}

impl KubeBackend for NodeBackend {
    fn name(&self) -> &'static str {
        "node"
    }

    fn start<'a>(
        &'a self,
        dir: &'a Path,
    ) -> BoxFuture<'a, Result<Box<dyn KubeCluster>, KubeError>> {
        Box::pin(async move {
            match crate::node::Node::up(&self.cache, dir, self.volumes).await {
                Ok(node) => Ok(Box::new(node) as Box<dyn KubeCluster>),
                Err(crate::node::NodeError::Unavailable(gaps)) => Err(KubeError::Unavailable {
                    backend: "node",
                    reason: gaps.join("; "),
                }),
                Err(e) => Err(KubeError::Failed {
                    backend: "node",
                    what: "start",
                    message: e.to_string(),
                }),
            }
        })
    }
}

impl KubeCluster for crate::node::Node {
    fn backend(&self) -> &'static str {
        "node"
    }

    fn flavor(&self) -> Flavor {
        Flavor::Kube120
    }

    fn kubeconfig(&self) -> PathBuf {
        crate::node::Node::kubeconfig(self)
    }

    fn client(&self) -> kube::Client {
        crate::node::Node::client(self)
    }

    fn import<'a>(
        &'a self,
        archive: &'a Path,
        base_name: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), KubeError>> {
        Box::pin(async move {
            self.import_named(archive, base_name)
                .map_err(|e| KubeError::Failed {
                    backend: "node",
                    what: "import an image",
                    message: e.to_string(),
                })
        })
    }

    fn outside(&self) -> Option<Arc<dyn OutsideNet>> {
        Some(Arc::new(crate::node::Node::outside(self)))
    }

    fn stop(self: Box<Self>) -> BoxFuture<'static, Vec<String>> {
        Box::pin(async move { (*self).down().await })
    }
}

#[cfg(test)]
mod tests;
