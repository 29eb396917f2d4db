//! The k3s backend of [`crate::kube_backend`]: a k3s container (testcontainers' k3s module, the
//! pinned [`K3S_IMAGE`]) the chart is Helm-installed into, as the node backend does on this
//! machine's own kubelet. Its own code is only what [`crate::kube_backend`] leaves to a backend:
//! start the container ([`k3s_start`]), import an image (the archive copied into the mounted
//! images directory, then [`k3s_import_command`] run inside), the kubeconfig
//! ([`k3s_kubeconfig`]) and stop; beside them, while it runs, the stories' outside names fed to
//! k3s's CoreDNS ([`k3s_outside_server`]) as the node's dnsmasq answers them, and the network
//! outside Kubernetes ([`K3sOutside`]): the run's own Docker network, created before the container
//! and removed after it, as [`crate::k3s_outside`] writes it down. Needs a Docker engine:
//! [`crate::k3s::docker_available`] says why not, and [`K3sKube::start`] refuses with that reason
//! (this machine has none).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use testcontainers::bollard::Docker;
use testcontainers::bollard::exec::StartExecResults;
use testcontainers::bollard::models::{ExecConfig, Ipam, IpamConfig, NetworkCreateRequest};
use testcontainers::core::Mount;
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, ImageExt};
use testcontainers_modules::k3s::{K3s, KUBE_SECURE_PORT};

use crate::k3s_outside::{
    CLUSTER_DNS, STORIES_KEY, address_command, coredns_server, route_commands, unanswered,
};
use crate::kube_backend::{
    Flavor, ImageArchive, K3S_IMAGE, K3S_OUTSIDE_KEY, KubeBackend, KubeCluster, KubeError,
    OutsideNet, k3s_import_command, k3s_kubeconfig, k3s_outside_server, k3s_start,
};

const NAME: &str = "k3s";

fn failed(what: &'static str, message: impl std::fmt::Display) -> KubeError {
    KubeError::Failed {
        backend: NAME,
        what,
        message: message.to_string(),
    }
}

/// Starts k3s clusters (the pinned [`K3S_IMAGE`]).
#[derive(Clone, Debug, Default)]
pub struct K3sKube;

/// A running k3s container with its kubeconfig written under the run's directory.
pub struct K3sCluster {
    container: ContainerAsync<K3s>,
    images: PathBuf,
    kubeconfig: PathBuf,
    client: kube::Client,
    docker: Docker,
    dns: tokio::task::JoinHandle<()>,
    outside: Arc<K3sOutside>,
}

/// Runs `command` in container `id` through the Docker API; its exit code and its output.
async fn exec(
    docker: &Docker,
    id: &str,
    command: &[String],
) -> Result<(Option<i64>, String), String> {
    let config = ExecConfig {
        cmd: Some(command.to_vec()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..Default::default()
    };
    let created = docker
        .create_exec(id, config)
        .await
        .map_err(|e| e.to_string())?;
    let mut output = String::new();
    if let StartExecResults::Attached {
        output: mut stream, ..
    } = docker
        .start_exec(&created.id, None)
        .await
        .map_err(|e| e.to_string())?
    {
        while let Some(chunk) = stream.next().await {
            output.push_str(&chunk.map_err(|e| e.to_string())?.to_string());
        }
    }
    let inspected = docker
        .inspect_exec(&created.id)
        .await
        .map_err(|e| e.to_string())?;
    Ok((inspected.exit_code, output))
}

impl KubeBackend for K3sKube {
    fn name(&self) -> &'static str {
        NAME
    }

    fn start<'a>(
        &'a self,
        dir: &'a Path,
    ) -> BoxFuture<'a, Result<Box<dyn KubeCluster>, KubeError>> {
        Box::pin(async move {
            crate::k3s::docker_available()
                .await
                .map_err(|reason| KubeError::Unavailable {
                    backend: NAME,
                    reason,
                })?;
            let s = k3s_start(dir);
            let docker = Docker::connect_with_local_defaults().map_err(|e| failed("start", e))?;
            create_network(&docker).await?;
            let mut request = K3s::default()
                .with_name(s.image.0.clone())
                .with_tag(s.image.1.clone())
                .with_cmd(s.args.clone())
                .with_privileged(s.privileged)
                .with_network(s.network.clone())
                .with_startup_timeout(Duration::from_secs(300));
            for (host, inside) in &s.mounts {
                std::fs::create_dir_all(host)
                    .map_err(|e| failed("start", format!("{}: {e}", host.display())))?;
                request = request.with_mount(Mount::bind_mount(
                    host.display().to_string(),
                    inside.clone(),
                ));
            }
            let container = match request.start().await {
                Ok(c) => c,
                Err(e) => {
                    let _ = docker.remove_network(&s.network).await;
                    return Err(failed("start", e));
                }
            };
            let k3s_ip = match container.get_bridge_ip_address().await {
                Ok(std::net::IpAddr::V4(ip)) => ip,
                other => {
                    let _ = container.rm().await;
                    let _ = docker.remove_network(&s.network).await;
                    return Err(failed(
                        "start",
                        format!("the container's address on {}: {other:?}", s.network),
                    ));
                }
            };
            let port = container
                .get_host_port_ipv4(KUBE_SECURE_PORT)
                .await
                .map_err(|e| failed("start", e))?;
            let conf = s.mounts[0].0.join("k3s.yaml");
            let written =
                crate::wait::poll("k3s's kubeconfig", Duration::from_secs(60), || async {
                    Ok(std::fs::read_to_string(&conf).ok())
                })
                .await
                .map_err(|e| failed("write the kubeconfig", e))?;
            let kubeconfig = dir.join("kubeconfig");
            std::fs::write(&kubeconfig, k3s_kubeconfig(&written, port)).map_err(|e| {
                failed(
                    "write the kubeconfig",
                    format!("{}: {e}", kubeconfig.display()),
                )
            })?;
            let config = kube::config::Kubeconfig::read_from(&kubeconfig)
                .map_err(|e| failed("read the kubeconfig", e))?;
            let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
                .await
                .map_err(|e| failed("read the kubeconfig", e))?;
            let client = kube::Client::try_from(config).map_err(|e| failed("make a client", e))?;
            let dns = tokio::spawn(feed_outside_names(client.clone()));
            let outside = Arc::new(K3sOutside {
                k3s: k3s_ip,
                root: nix::unistd::geteuid().is_root(),
                routes: OnceLock::new(),
                client: client.clone(),
            });
            Ok(Box::new(K3sCluster {
                container,
                images: s.mounts[1].0.clone(),
                kubeconfig,
                client,
                docker,
                dns,
                outside,
            }) as Box<dyn KubeCluster>)
        })
    }
}

impl KubeCluster for K3sCluster {
    fn backend(&self) -> &'static str {
        NAME
    }

    fn flavor(&self) -> Flavor {
        Flavor::Current
    }

    fn kubeconfig(&self) -> PathBuf {
        self.kubeconfig.clone()
    }

    fn client(&self) -> kube::Client {
        self.client.clone()
    }

    fn import<'a>(
        &'a self,
        archive: &'a Path,
        base_name: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), KubeError>> {
        Box::pin(async move {
            let image = ImageArchive {
                archive: archive.to_path_buf(),
                base_name: base_name.map(str::to_string),
            };
            let file = archive.file_name().ok_or_else(|| {
                failed(
                    "import an image",
                    format!("{} names no file", archive.display()),
                )
            })?;
            let copy = self.images.join(file);
            if copy != archive {
                std::fs::copy(archive, &copy)
                    .map_err(|e| failed("import an image", format!("{}: {e}", copy.display())))?;
            }
            let command = k3s_import_command(&image);
            let (code, output) = exec(&self.docker, self.container.id(), &command)
                .await
                .map_err(|e| failed("import an image", e))?;
            if code != Some(0) {
                return Err(failed(
                    "import an image",
                    format!("{} exited {code:?}: {}", command.join(" "), output.trim()),
                ));
            }
            Ok(())
        })
    }

    fn outside(&self) -> Option<Arc<dyn OutsideNet>> {
        Some(self.outside.clone())
    }

    fn stop(self: Box<Self>) -> BoxFuture<'static, Vec<String>> {
        Box::pin(async move {
            self.dns.abort();
            let mut left = Vec::new();
            if let Err(e) = self.container.rm().await {
                left.push(format!(
                    "the k3s container ({}:{}) not removed: {e}",
                    K3S_IMAGE.0, K3S_IMAGE.1
                ));
            }
            // The bridge goes with the network, and the outside addresses and routes with it.
            let network = crate::k3s_outside::NETWORK;
            if let Err(e) = self.docker.remove_network(network).await {
                left.push(format!("the Docker network {network} not removed: {e}"));
            }
            left
        })
    }
}

/// Creates the run's Docker network ([`crate::k3s_outside::network`]), removing first one a run
/// that died left behind (which fails, harmlessly, while a container still uses it).
async fn create_network(docker: &Docker) -> Result<(), KubeError> {
    let n = crate::k3s_outside::network();
    let _ = docker.remove_network(&n.name).await;
    let request = NetworkCreateRequest {
        name: n.name.clone(),
        driver: Some("bridge".into()),
        ipam: Some(Ipam {
            config: Some(vec![IpamConfig {
                subnet: Some(n.subnet),
                ip_range: Some(n.ip_range),
                gateway: Some(n.gateway),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        options: Some(n.options.into_iter().collect()),
        ..Default::default()
    };
    docker
        .create_network(request)
        .await
        .map(|_| ())
        .map_err(|e| failed("create the Docker network", format!("{}: {e}", n.name)))
}

/// Runs `command` on the host (an `ip` command, maybe through `sudo -n`); its stderr when it fails.
fn run(command: &[String]) -> Result<(), String> {
    let (program, args) = command.split_first().ok_or("an empty command")?;
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", command.join(" ")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}: {}",
        command.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// k3s's network outside Kubernetes ([`crate::k3s_outside`]): outside addresses on the run's
/// bridge, the host's routes into the cluster (set once, before the first address: only a story
/// with servers outside needs them, and they need root or `sudo -n`), names in CoreDNS.
pub struct K3sOutside {
    /// The k3s container's address on the run's network.
    k3s: Ipv4Addr,
    root: bool,
    routes: OnceLock<Result<(), String>>,
    client: kube::Client,
}

/// How long CoreDNS has to answer names written to it (the kubelet's ConfigMap sync, then its
/// `reload`: about a minute and a half at worst).
const NAMES_WITHIN: Duration = Duration::from_secs(180);

impl K3sOutside {
    /// The host's routes into the cluster, set on the first call.
    fn routes(&self) -> Result<(), KubeError> {
        self.routes
            .get_or_init(|| {
                route_commands(self.k3s, self.root)
                    .iter()
                    .try_for_each(|c| run(c))
            })
            .clone()
            .map_err(|e| failed("route the host into the cluster", e))
    }
}

/// What the cluster DNS answers now for `name` (its A records; none when it does not answer
/// within 2 s), asked over UDP with a query hickory-proto writes and reads.
async fn cluster_dns_a(name: &str) -> Vec<Ipv4Addr> {
    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::{Name, RData, RecordType};
    let Ok(fqdn) = Name::from_ascii(name) else {
        return vec![];
    };
    let mut query = Message::query();
    query.metadata.recursion_desired = true;
    query.add_query(Query::query(fqdn, RecordType::A));
    let Ok(bytes) = query.to_vec() else {
        return vec![];
    };
    let Ok(socket) = tokio::net::UdpSocket::bind("0.0.0.0:0").await else {
        return vec![];
    };
    if socket.connect((CLUSTER_DNS, 53)).await.is_err() || socket.send(&bytes).await.is_err() {
        return vec![];
    }
    let mut buf = [0u8; 1500];
    let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(2), socket.recv(&mut buf)).await
    else {
        return vec![];
    };
    match Message::from_vec(&buf[..n]) {
        Ok(answer) if answer.metadata.id == query.metadata.id => answer
            .answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::A(a) => Some(a.0),
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

impl OutsideNet for K3sOutside {
    fn address(&self, n: u8) -> Result<Ipv4Addr, KubeError> {
        self.routes()?;
        let ip = crate::node::outside::address(n);
        run(&address_command(ip, self.root)).map_err(|e| failed("add an outside address", e))?;
        Ok(ip)
    }

    /// Writes the names as [`STORIES_KEY`] of `kube-system/coredns-custom` (its own field
    /// manager, beside the Services' names), then waits until CoreDNS answers them (queried from
    /// the host through the routes): it reads them once the kubelet updates the mounted
    /// ConfigMap and its `reload` notices, where the node's dnsmasq re-reads at once.
    fn name<'a>(
        &'a self,
        entries: &'a [(Ipv4Addr, String)],
    ) -> BoxFuture<'a, Result<(), KubeError>> {
        Box::pin(async move {
            use k8s_openapi::api::core::v1::ConfigMap;
            use kube::api::{Api, Patch, PatchParams};
            let maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
            let map = serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "coredns-custom", "namespace": "kube-system"},
                "data": {STORIES_KEY: coredns_server(entries)},
            });
            self.routes()?;
            maps.patch(
                "coredns-custom",
                &PatchParams::apply("sim-k3s-stories").force(),
                &Patch::Apply(&map),
            )
            .await
            .map_err(|e| failed("name the outside addresses", e))?;
            crate::wait::poll(
                "k3s's CoreDNS answers the outside names",
                NAMES_WITHIN,
                || async {
                    let mut got = std::collections::BTreeMap::new();
                    for (_, name) in entries {
                        if !got.contains_key(name) {
                            got.insert(name.clone(), cluster_dns_a(name).await);
                        }
                    }
                    let missing = unanswered(entries, |n| got.get(n).cloned().unwrap_or_default());
                    Ok(missing.is_empty().then_some(()))
                },
            )
            .await
            .map_err(|e| failed("name the outside addresses", e))
        })
    }

    fn dns_address(&self) -> Ipv4Addr {
        CLUSTER_DNS
    }
}

/// Keeps k3s's CoreDNS answering the stories' outside names: every 2 s the Services' ClusterIPs
/// are read and, when the text changed, written as [`K3S_OUTSIDE_KEY`] of the ConfigMap
/// `kube-system/coredns-custom` (CoreDNS's `reload` picks it up). Runs until aborted.
async fn feed_outside_names(client: kube::Client) {
    use k8s_openapi::api::core::v1::{ConfigMap, Service};
    use kube::api::{Api, ListParams, Patch, PatchParams};
    let services: Api<Service> = Api::all(client.clone());
    let maps: Api<ConfigMap> = Api::namespaced(client, "kube-system");
    let mut written = String::new();
    loop {
        if let Ok(list) = services.list(&ListParams::default()).await {
            let pairs: Vec<(String, String)> = list
                .items
                .into_iter()
                .filter_map(|s| {
                    let ip = s.spec.and_then(|spec| spec.cluster_ip)?;
                    Some((ip, s.metadata.name?))
                })
                .collect();
            let text = k3s_outside_server(&pairs);
            if text != written {
                let map = serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "coredns-custom", "namespace": "kube-system"},
                    "data": {K3S_OUTSIDE_KEY: text},
                });
                let applied = maps
                    .patch(
                        "coredns-custom",
                        &PatchParams::apply("sim-k3s").force(),
                        &Patch::Apply(&map),
                    )
                    .await;
                match applied {
                    Ok(_) => written = text,
                    Err(e) => tracing::warn!("k3s outside names: {e}"),
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
