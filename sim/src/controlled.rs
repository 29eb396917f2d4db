//! A deployment whose servers the cluster controller started: the NatsClusters applied through a
//! [`Host`] run as local processes of its [`LocalServerLifecycle`](crate::local::LocalServerLifecycle), and the scenario runner's
//! workload, ledger and faults reach them as they reach a sim topology.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cluster_controller::server_lifecycle::ServerLifecycle;
use futures::future::BoxFuture;
use kube::Api;
use nats_api::cluster::NatsCluster;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::Deserialize;
use serde_json::Value;

use crate::backend::{BackendError, Deployment, Fault};
use crate::control_plane::{Host, HostError, Objects};
use crate::monitored::{self, Member, Monitored};
use crate::wait;

const BACKEND: &str = "local";

/// One server of a NatsCluster, as the server lifecycle placed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlledServer {
    pub name: String,
    pub namespace: String,
    pub cluster: String,
    pub ordinal: u32,
    pub client_url: String,
    pub monitor_url: String,
}

/// The NatsClusters of a manifest: (namespace, name, replicas), read before applying so their
/// ports can be reserved and named in other manifests.
pub fn nats_clusters_in(text: &str) -> Vec<(String, String, u32)> {
    serde_yaml::Deserializer::from_str(text)
        .filter_map(|d| serde_yaml::Value::deserialize(d).ok())
        .filter(|v| v.get("kind").and_then(|k| k.as_str()) == Some("NatsCluster"))
        .filter_map(|v| {
            let meta = v.get("metadata")?;
            let name = meta.get("name")?.as_str()?.to_string();
            let ns = meta
                .get("namespace")
                .and_then(|n| n.as_str())
                .unwrap_or("default")
                .to_string();
            let replicas = v
                .get("spec")
                .and_then(|s| s.get("replicas"))
                .and_then(|r| r.as_u64())
                .unwrap_or(1) as u32;
            Some((ns, name, replicas))
        })
        .collect()
}

/// Reads the NatsCluster `namespace/name` from the apiserver.
pub async fn read_cluster(
    host: &Objects,
    namespace: &str,
    name: &str,
) -> Result<NatsCluster, String> {
    Api::<NatsCluster>::namespaced(host.client(), namespace)
        .get(name)
        .await
        .map_err(|e| format!("NatsCluster {namespace}/{name}: {e}"))
}

/// Waits until every server of NatsCluster `namespace/name` runs and answers `/healthz` through
/// the server lifecycle the cluster controller drives.
pub async fn wait_servers(
    host: &Host,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), String> {
    wait::poll(
        &format!("the servers of NatsCluster {namespace}/{name} ready"),
        timeout,
        || async {
            let cluster = read_cluster(host, namespace, name).await?;
            let want = cluster.spec.replicas.max(0) as u32;
            let observed = host
                .server_lifecycle()
                .observe(&cluster)
                .await
                .map_err(|e| e.to_string())?;
            let ready = observed
                .iter()
                .filter(|o| o.ordinal < want && o.ready)
                .count() as u32;
            if ready == want {
                Ok(Some(()))
            } else {
                Err(format!("{ready}/{want} servers ready: {observed:?}"))
            }
        },
    )
    .await
    .map_err(|e| e.to_string())
}

/// The servers of the given NatsClusters.
pub struct Controlled {
    host: Arc<Host>,
    servers: Vec<ControlledServer>,
    http: reqwest::Client,
}

impl std::fmt::Debug for Controlled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controlled")
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

impl Controlled {
    /// The servers of the NatsClusters `(namespace, name)` as they stand now.
    pub async fn new(host: Arc<Host>, clusters: &[(String, String)]) -> Result<Self, String> {
        let mut servers = Vec::new();
        for (ns, name) in clusters {
            let cluster = read_cluster(&host, ns, name).await?;
            for ordinal in 0..cluster.spec.replicas.max(0) as u32 {
                let a = host.server_lifecycle().address(&cluster, ordinal);
                servers.push(ControlledServer {
                    name: nats_api::cluster::names::server(name, ordinal),
                    namespace: ns.clone(),
                    cluster: name.clone(),
                    ordinal,
                    client_url: a.client_url,
                    monitor_url: a.monitor_url,
                });
            }
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            host,
            servers,
            http,
        })
    }

    pub fn servers(&self) -> &[ControlledServer] {
        &self.servers
    }

    fn server(&self, name: &str) -> Result<&ControlledServer, BackendError> {
        self.servers
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| other(format!("no server {name}")))
    }

    async fn monitor_url(&self, url: String) -> Result<Value, String> {
        let resp = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        resp.json().await.map_err(|e| format!("GET {url}: {e}"))
    }
}

impl Monitored for Controlled {
    fn members(&self) -> Vec<Member> {
        self.servers
            .iter()
            .map(|s| Member {
                name: s.name.clone(),
                cluster: s.cluster.clone(),
            })
            .collect()
    }
    fn monitor<'a>(&'a self, name: &'a str, path: &'a str) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let s = self.server(name).map_err(|e| e.to_string())?;
            self.monitor_url(format!("{}{path}", s.monitor_url)).await
        })
    }
}

fn other(message: String) -> BackendError {
    BackendError::Other {
        backend: BACKEND.into(),
        message,
    }
}

fn unsupported(what: &str) -> BackendError {
    BackendError::Unsupported {
        backend: BACKEND.into(),
        what: format!("{what} on a server the cluster controller runs (apply a manifest instead)"),
    }
}

impl Deployment for Controlled {
    fn backend(&self) -> &'static str {
        BACKEND
    }
    fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }
    fn client_urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.client_url.clone()).collect()
    }
    fn monitor_urls(&self) -> Vec<(String, String)> {
        self.servers
            .iter()
            .map(|s| (s.name.clone(), s.monitor_url.clone()))
            .collect()
    }
    fn meta_leader(&self, timeout: Duration) -> BoxFuture<'_, Result<String, BackendError>> {
        monitored::wait_meta_leader(self, BACKEND, timeout)
    }
    fn stream_leader(
        &self,
        stream: &str,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<String, BackendError>> {
        monitored::wait_stream_leader(self, BACKEND, stream, timeout)
    }
    fn wait_healthz(&self, timeout: Duration) -> BoxFuture<'_, Result<(), BackendError>> {
        monitored::wait_healthz(self, BACKEND, timeout)
    }
    fn fault<'a>(
        &'a mut self,
        server: &'a str,
        fault: Fault,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let s = self.server(server)?;
            let signal = match fault {
                Fault::Kill9 => Signal::SIGKILL,
                Fault::Sigterm => Signal::SIGTERM,
                Fault::LameDuck => Signal::SIGUSR2,
                Fault::Pause => Signal::SIGSTOP,
                Fault::Resume => Signal::SIGCONT,
                Fault::Restart => return Err(unsupported("restart")),
                Fault::WipeStore => return Err(unsupported("wipe_store")),
            };
            let pid = self
                .host
                .server_lifecycle()
                .pid(&s.namespace, &s.cluster, s.ordinal)
                .ok_or_else(|| other(format!("server {server} runs no process")))?;
            kill(Pid::from_raw(pid as i32), signal)
                .map_err(|e| other(format!("{signal} to {server} (pid {pid}): {e}")))
        })
    }
}

/// A NatsCluster `(namespace, name)` whose ports are reserved, with the variables naming them.
pub type Reserved = ((String, String), Vec<(String, String)>);

/// Reserves the ports of every NatsCluster in the manifest at `path` and returns the variables
/// other manifests name them by: `<name>.client`, `<name>.gateway`, `<name>.leafnodes` (server
/// 0's URL) and `<name>.clients` (every server's client URL, as a YAML list).
pub fn reserve(host: &Host, path: &Path) -> Result<Vec<Reserved>, HostError> {
    let text = std::fs::read_to_string(path).map_err(|source| HostError::ReadManifest {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(nats_clusters_in(&text)
        .into_iter()
        .map(|(ns, name, replicas)| {
            let ports = host.server_lifecycle().reserve_ports(&ns, &name, replicas);
            let url = |p: u16| format!("nats://127.0.0.1:{p}");
            let mut vars = Vec::new();
            if let Some(p) = ports.first() {
                vars.push((format!("{name}.client"), url(p.client)));
                vars.push((format!("{name}.gateway"), url(p.gateway)));
                vars.push((format!("{name}.leafnodes"), url(p.leafnode)));
            }
            let clients: Vec<String> = ports.iter().map(|p| url(p.client)).collect();
            vars.push((
                format!("{name}.clients"),
                serde_json::to_string(&clients).unwrap_or_default(),
            ));
            ((ns, name), vars)
        })
        .collect())
}
