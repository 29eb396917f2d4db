//! The k3s backend: the same topology API on testcontainers — a k3s container (the Kubernetes API the
//! controllers will run against) next to nats-server containers of the pinned version on one Docker
//! network. It needs a Docker engine; [`docker_available`] says whether one answers, and callers skip
//! with the printed reason when none does (this machine has none).
//!
//! Supported here: clusters of N servers; faults kill -9, SIGTERM, lame duck, pause/resume, restart on
//! the same store (the container's filesystem). Gateways, leafs, store wipes, config reloads and link
//! cuts answer `Unsupported` rather than pretending.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use testcontainers::bollard::Docker;
use testcontainers::bollard::query_parameters::KillContainerOptionsBuilder;
use testcontainers::core::{ContainerPort, ExecCommand, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

use crate::backend::{Backend, BackendError, Deployment, Fault};
use crate::install::PINNED;
use crate::topology::TopologySpec;
use crate::wait;

const NAME: &str = "k3s";

/// Whether a Docker engine answers; `Err` carries the reason to print when skipping.
pub async fn docker_available() -> Result<(), String> {
    let docker = Docker::connect_with_local_defaults()
        .map_err(|e| format!("no Docker client configuration: {e}"))?;
    match tokio::time::timeout(Duration::from_secs(3), docker.ping()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("no Docker engine answers: {e}")),
        Err(_) => Err("no Docker engine answered within 3 s".to_string()),
    }
}

#[derive(Debug, Clone)]
pub struct K3sBackend {
    pub k3s_image: (String, String),
    pub nats_image: (String, String),
}

impl Default for K3sBackend {
    fn default() -> Self {
        K3sBackend {
            k3s_image: ("rancher/k3s".into(), "v1.31.4-k3s1".into()),
            nats_image: ("nats".into(), format!("{PINNED}-alpine")),
        }
    }
}

fn err(message: impl std::fmt::Display) -> BackendError {
    BackendError::Other {
        backend: NAME.into(),
        message: message.to_string(),
    }
}

fn unsupported(what: &str) -> BackendError {
    BackendError::Unsupported {
        backend: NAME.into(),
        what: what.into(),
    }
}

struct NatsContainer {
    name: String,
    container: ContainerAsync<GenericImage>,
    client_port: u16,
    monitor_port: u16,
}

pub struct K3sDeployment {
    k3s: ContainerAsync<GenericImage>,
    servers: Vec<NatsContainer>,
    docker: Docker,
    http: reqwest::Client,
}

impl K3sDeployment {
    /// The kubeconfig k3s wrote (its server address is the container's, as seen from the network).
    pub async fn kubeconfig(&self) -> Result<String, BackendError> {
        let mut out = self
            .k3s
            .exec(ExecCommand::new(["cat", "/etc/rancher/k3s/k3s.yaml"]))
            .await
            .map_err(err)?;
        let bytes = out.stdout_to_vec().await.map_err(err)?;
        Ok(String::from_utf8_lossy(&bytes).to_string())
    }

    fn server(&self, name: &str) -> Result<&NatsContainer, BackendError> {
        self.servers
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| err(format!("no server named {name}")))
    }

    async fn jsz(&self, s: &NatsContainer) -> Result<Value, String> {
        let url = format!(
            "http://127.0.0.1:{}/jsz?accounts=true&streams=true",
            s.monitor_port
        );
        let r = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        r.json().await.map_err(|e| format!("GET {url}: {e}"))
    }
}

impl Backend for K3sBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn start<'a>(
        &'a self,
        spec: &'a TopologySpec,
    ) -> BoxFuture<'a, Result<Box<dyn Deployment>, BackendError>> {
        Box::pin(async move {
            docker_available()
                .await
                .map_err(|reason| BackendError::Unavailable {
                    backend: NAME.into(),
                    reason,
                })?;
            if spec.clusters.len() != 1 || !spec.leafs.is_empty() {
                return Err(unsupported("run superclusters or leaf nodes yet"));
            }
            let docker = Docker::connect_with_local_defaults().map_err(err)?;
            let network = format!("sim-{}-{}", std::process::id(), crate::ports::free_port());
            let k3s = GenericImage::new(self.k3s_image.0.clone(), self.k3s_image.1.clone())
                .with_wait_for(WaitFor::message_on_stderr("k3s is up and running"))
                .with_cmd(["server", "--disable=traefik", "--disable=metrics-server"])
                .with_privileged(true)
                .with_network(network.clone())
                .with_startup_timeout(Duration::from_secs(180))
                .start()
                .await
                .map_err(err)?;
            let c = &spec.clusters[0];
            let names: Vec<String> = (0..c.servers).map(|i| format!("{}-{i}", c.name)).collect();
            let mut servers = Vec::new();
            for name in &names {
                let routes: Vec<String> = names
                    .iter()
                    .filter(|n| *n != name)
                    .map(|n| format!("nats-route://{n}:6222"))
                    .collect();
                let mut cmd = vec![
                    "-js".to_string(),
                    "-n".into(),
                    name.clone(),
                    "-sd".into(),
                    "/data".into(),
                    "-m".into(),
                    "8222".into(),
                ];
                if c.servers > 1 {
                    cmd.extend([
                        "--cluster_name".into(),
                        c.name.clone(),
                        "--cluster".into(),
                        "nats://0.0.0.0:6222".into(),
                        "--routes".into(),
                        routes.join(","),
                    ]);
                }
                let container =
                    GenericImage::new(self.nats_image.0.clone(), self.nats_image.1.clone())
                        .with_exposed_port(ContainerPort::Tcp(4222))
                        .with_exposed_port(ContainerPort::Tcp(8222))
                        .with_wait_for(WaitFor::message_on_stderr("Server is ready"))
                        .with_cmd(cmd)
                        .with_network(network.clone())
                        .with_container_name(format!("{network}-{name}"))
                        .with_hostname(name.clone())
                        .start()
                        .await
                        .map_err(err)?;
                let client_port = container.get_host_port_ipv4(4222).await.map_err(err)?;
                let monitor_port = container.get_host_port_ipv4(8222).await.map_err(err)?;
                servers.push(NatsContainer {
                    name: name.clone(),
                    container,
                    client_port,
                    monitor_port,
                });
            }
            Ok(Box::new(K3sDeployment {
                k3s,
                servers,
                docker,
                http: reqwest::Client::builder()
                    .timeout(Duration::from_secs(2))
                    .build()
                    .map_err(err)?,
            }) as Box<dyn Deployment>)
        })
    }
}

impl Deployment for K3sDeployment {
    fn backend(&self) -> &'static str {
        NAME
    }
    fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }
    fn client_urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| format!("nats://127.0.0.1:{}", s.client_port))
            .collect()
    }
    fn meta_leader(&self, timeout: Duration) -> BoxFuture<'_, Result<String, BackendError>> {
        Box::pin(async move {
            if self.servers.len() < 2 {
                return Ok(self
                    .servers
                    .first()
                    .map(|s| s.name.clone())
                    .unwrap_or_default());
            }
            let n = self.servers.len() as u64;
            wait::poll("meta leader with all peers", timeout, || async {
                let mut leader = None;
                for s in &self.servers {
                    let j = self.jsz(s).await?;
                    let l = j["meta_cluster"]["leader"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    if l.is_empty() || j["meta_cluster"]["cluster_size"].as_u64() != Some(n) {
                        return Err(format!("{} sees no full meta group yet", s.name));
                    }
                    if leader.get_or_insert(l.clone()) != &l {
                        return Err("servers disagree on the meta leader".into());
                    }
                }
                Ok(leader)
            })
            .await
            .map_err(err)
        })
    }
    fn stream_leader(
        &self,
        stream: &str,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<String, BackendError>> {
        let stream = stream.to_string();
        Box::pin(async move {
            wait::poll(&format!("a leader for {stream}"), timeout, || async {
                for s in &self.servers {
                    let Ok(j) = self.jsz(s).await else { continue };
                    for acc in j["account_details"].as_array().into_iter().flatten() {
                        for st in acc["stream_detail"].as_array().into_iter().flatten() {
                            if st["name"].as_str() == Some(stream.as_str())
                                && st["cluster"]["leader"].as_str() == Some(s.name.as_str())
                            {
                                return Ok(Some(s.name.clone()));
                            }
                        }
                    }
                }
                Ok(None)
            })
            .await
            .map_err(err)
        })
    }
    fn wait_healthz(&self, timeout: Duration) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            wait::poll("healthz on every server", timeout, || async {
                for s in &self.servers {
                    let url = format!("http://127.0.0.1:{}/healthz", s.monitor_port);
                    let ok = self
                        .http
                        .get(&url)
                        .send()
                        .await
                        .map(|r| r.status().is_success())
                        .unwrap_or(false);
                    if !ok {
                        return Err(format!("{} not healthy", s.name));
                    }
                }
                Ok(Some(()))
            })
            .await
            .map_err(err)
        })
    }
    fn fault<'a>(
        &'a mut self,
        server: &'a str,
        fault: Fault,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let s = self.server(server)?;
            let id = s.container.id().to_string();
            let kill = |signal: &'static str| {
                let docker = self.docker.clone();
                let id = id.clone();
                async move {
                    let opts = KillContainerOptionsBuilder::default()
                        .signal(signal)
                        .build();
                    docker.kill_container(&id, Some(opts)).await.map_err(err)
                }
            };
            match fault {
                Fault::Kill9 => kill("SIGKILL").await,
                Fault::Sigterm => kill("SIGTERM").await,
                // The nats image runs nats-server as PID 1; `--signal ldm=1` addresses it.
                Fault::LameDuck => s
                    .container
                    .exec(ExecCommand::new(["nats-server", "--signal", "ldm=1"]))
                    .await
                    .map(|_| ())
                    .map_err(err),
                Fault::Pause => s.container.pause().await.map_err(err),
                Fault::Resume => s.container.unpause().await.map_err(err),
                Fault::Restart => {
                    if s.container.is_running().await.map_err(err)? {
                        kill("SIGKILL").await?;
                    }
                    s.container.start().await.map_err(err)
                }
                Fault::WipeStore => Err(unsupported("wipe a store")),
            }
        })
    }
    fn reload_with<'a>(
        &'a mut self,
        _server: &'a str,
        _append: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async { Err(unsupported("edit a server's config")) })
    }
    fn gateway_link<'a>(
        &'a self,
        _a: &'a str,
        _b: &'a str,
        _cut: bool,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async { Err(unsupported("cut gateway links")) })
    }
    fn leaf_link<'a>(
        &'a self,
        _leaf: &'a str,
        _cut: bool,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async { Err(unsupported("cut leaf links")) })
    }
}
