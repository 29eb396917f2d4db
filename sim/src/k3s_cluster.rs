//! The k3s backend of [`crate::kube_backend`]: a k3s container (testcontainers' k3s module, the
//! pinned [`K3S_IMAGE`]) the chart is Helm-installed into, as the node backend does on this
//! machine's own kubelet. Its own code is only what [`crate::kube_backend`] leaves to a backend:
//! start the container ([`k3s_start`]), import an image (the archive copied into the mounted
//! images directory, then [`k3s_import_command`] run inside), the kubeconfig
//! ([`k3s_kubeconfig`]) and stop; beside them, while it runs, the stories' outside names fed to
//! k3s's CoreDNS ([`k3s_outside_server`]) as the node's dnsmasq answers them. Needs a Docker engine: [`crate::k3s::docker_available`] says
//! why not, and [`K3sKube::start`] refuses with that reason (this machine has none).

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use testcontainers::bollard::Docker;
use testcontainers::bollard::exec::StartExecResults;
use testcontainers::bollard::models::ExecConfig;
use testcontainers::core::Mount;
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, ImageExt};
use testcontainers_modules::k3s::{K3s, KUBE_SECURE_PORT};

use crate::kube_backend::{
    Flavor, ImageArchive, K3S_IMAGE, K3S_OUTSIDE_KEY, KubeBackend, KubeCluster, KubeError,
    k3s_import_command, k3s_kubeconfig, k3s_outside_server, k3s_start,
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
            let mut request = K3s::default()
                .with_name(s.image.0.clone())
                .with_tag(s.image.1.clone())
                .with_cmd(s.args.clone())
                .with_privileged(s.privileged)
                .with_startup_timeout(Duration::from_secs(300));
            for (host, inside) in &s.mounts {
                std::fs::create_dir_all(host)
                    .map_err(|e| failed("start", format!("{}: {e}", host.display())))?;
                request = request.with_mount(Mount::bind_mount(
                    host.display().to_string(),
                    inside.clone(),
                ));
            }
            let container = request.start().await.map_err(|e| failed("start", e))?;
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
            let docker = Docker::connect_with_local_defaults().map_err(|e| failed("start", e))?;
            let dns = tokio::spawn(feed_outside_names(client.clone()));
            Ok(Box::new(K3sCluster {
                container,
                images: s.mounts[1].0.clone(),
                kubeconfig,
                client,
                docker,
                dns,
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

    fn stop(self: Box<Self>) -> BoxFuture<'static, Vec<String>> {
        Box::pin(async move {
            self.dns.abort();
            match self.container.rm().await {
                Ok(()) => vec![],
                Err(e) => vec![format!(
                    "the k3s container ({}:{}) not removed: {e}",
                    K3S_IMAGE.0, K3S_IMAGE.1
                )],
            }
        })
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
