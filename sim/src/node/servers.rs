//! A deployment whose servers are the node's pods ([`PodServers`]): the NatsClusters a scenario
//! applied on the node backend, as the cluster controller and the kubelet run them. The host
//! reaches them as a user's client in the cluster would: traffic through each NatsCluster's
//! client Service (its ClusterIP, kube-proxy choosing a ready server), monitoring by pod IP
//! (looked up at each call: a replaced pod has a new one). Faults are signals to a pod's nats
//! process; the kubelet, not the sim, starts it again.

use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use nats_api::cluster::NatsCluster;
use serde_json::Value;

use super::containers::Containers;
use crate::backend::{BackendError, Deployment, Fault};
use crate::monitored::{self, Member, Monitored};
use crate::wait;

const BACKEND: &str = "node";

/// One server: its pod (`<server>-0`, the StatefulSet of one) in its namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PodServer {
    name: String,
    namespace: String,
    cluster: String,
    /// The client Service's URL: `nats://<ClusterIP>:<port>`.
    client_url: String,
}

/// The servers of the NatsClusters applied on the node.
pub struct PodServers {
    client: kube::Client,
    servers: Vec<PodServer>,
    http: reqwest::Client,
    /// The kubelet's containers, where the host may signal them.
    containers: Option<Containers>,
}

impl std::fmt::Debug for PodServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodServers")
            .field("servers", &self.servers)
            .finish_non_exhaustive()
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
        what: format!("{what} on a pod the kubelet runs"),
    }
}

impl PodServers {
    /// The servers of the NatsClusters `(namespace, name)` as they stand now; faults reach them
    /// through `containers` when given.
    pub async fn new(
        client: kube::Client,
        clusters: &[(String, String)],
        containers: Option<Containers>,
    ) -> Result<Self, String> {
        let mut servers = Vec::new();
        for (ns, name) in clusters {
            let cluster = Api::<NatsCluster>::namespaced(client.clone(), ns)
                .get(name)
                .await
                .map_err(|e| format!("NatsCluster {ns}/{name}: {e}"))?;
            let client_url = service_url(&client, ns, name).await?;
            for ordinal in 0..cluster.spec.replicas.max(0) as u32 {
                servers.push(PodServer {
                    name: nats_api::cluster::names::server(name, ordinal),
                    namespace: ns.clone(),
                    cluster: name.clone(),
                    client_url: client_url.clone(),
                });
            }
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            client,
            servers,
            http,
            containers,
        })
    }

    fn server(&self, name: &str) -> Result<&PodServer, String> {
        self.servers
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| format!("no server {name}"))
    }

    /// The server's pod now.
    async fn pod(&self, s: &PodServer) -> Result<Pod, String> {
        let pod = format!("{}-0", s.name);
        Api::<Pod>::namespaced(self.client.clone(), &s.namespace)
            .get(&pod)
            .await
            .map_err(|e| format!("pod {}/{pod}: {e}", s.namespace))
    }

    async fn get(&self, name: &str, path: &str) -> Result<Value, String> {
        let s = self.server(name)?;
        let pod = self.pod(s).await?;
        let ip = pod
            .status
            .as_ref()
            .and_then(|st| st.pod_ip.clone())
            .ok_or_else(|| format!("{name}'s pod has no IP yet"))?;
        let port = container_port(&pod, "monitor").unwrap_or(8222);
        let url = format!("http://{ip}:{port}{path}");
        let resp = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        resp.json().await.map_err(|e| format!("GET {url}: {e}"))
    }
}

/// The named port of the pod's nats container.
fn container_port(pod: &Pod, name: &str) -> Option<i32> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "nats")?
        .ports
        .as_ref()?
        .iter()
        .find(|p| p.name.as_deref() == Some(name))
        .map(|p| p.container_port)
}

/// `nats://<ClusterIP>:<client port>` of the client Service `namespace/name`.
async fn service_url(client: &kube::Client, namespace: &str, name: &str) -> Result<String, String> {
    let svc = Api::<Service>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|e| format!("the client Service {namespace}/{name}: {e}"))?;
    let spec = svc
        .spec
        .ok_or_else(|| format!("the client Service {namespace}/{name} has no spec"))?;
    let ip = spec
        .cluster_ip
        .filter(|ip| !ip.is_empty() && ip != "None")
        .ok_or_else(|| format!("the client Service {namespace}/{name} has no ClusterIP"))?;
    let port = spec
        .ports
        .unwrap_or_default()
        .iter()
        .find(|p| p.name.as_deref() == Some("client"))
        .map(|p| p.port)
        .unwrap_or(4222);
    Ok(format!("nats://{ip}:{port}"))
}

impl Monitored for PodServers {
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
        Box::pin(self.get(name, path))
    }
}

impl Deployment for PodServers {
    fn backend(&self) -> &'static str {
        BACKEND
    }
    fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }
    /// Each server's NatsCluster's client Service: a pod replaced keeps no address.
    fn client_urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.client_url.clone()).collect()
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
            let containers = self
                .containers
                .as_ref()
                .ok_or_else(|| unsupported("a fault (no access to the node's containers)"))?;
            let s = self.server(server).map_err(other)?;
            let pod = self.pod(s).await.map_err(other)?;
            let status = pod
                .status
                .as_ref()
                .and_then(|st| st.container_statuses.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.name == "nats"))
                .and_then(|c| c.container_id.clone())
                .unwrap_or_default();
            let id = Containers::id_of(&status)
                .ok_or_else(|| other(format!("{server}'s nats container is not running")))?;
            let done = match fault {
                Fault::Kill9 => containers.signal(id, "SIGKILL"),
                Fault::Sigterm => containers.signal(id, "SIGTERM"),
                Fault::LameDuck => containers.signal(id, "SIGUSR2"),
                Fault::Pause => containers.pause(id),
                Fault::Resume => containers.resume(id),
                Fault::Restart => return Err(unsupported("restart (the kubelet restarts)")),
                Fault::WipeStore => return Err(unsupported("wipe_store")),
            };
            done.map_err(|e| other(format!("{fault:?} of {server}: {e}")))
        })
    }
}

/// Waits until the pod of every server of NatsCluster `namespace/name` is Ready (its readiness
/// probe is the server's healthz).
pub async fn wait_ready(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), String> {
    wait::poll(
        &format!("the pods of NatsCluster {namespace}/{name} Ready"),
        timeout,
        || async {
            let cluster = Api::<NatsCluster>::namespaced(client.clone(), namespace)
                .get(name)
                .await
                .map_err(|e| format!("NatsCluster {namespace}/{name}: {e}"))?;
            let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
            let mut waiting = Vec::new();
            for ordinal in 0..cluster.spec.replicas.max(0) as u32 {
                let pod = format!("{}-0", nats_api::cluster::names::server(name, ordinal));
                let ready = pods
                    .get_opt(&pod)
                    .await
                    .map_err(|e| format!("pod {namespace}/{pod}: {e}"))?
                    .is_some_and(|p| pod_ready(&p));
                if !ready {
                    waiting.push(pod);
                }
            }
            if waiting.is_empty() {
                Ok(Some(()))
            } else {
                Err(format!("not Ready yet: {}", waiting.join(", ")))
            }
        },
    )
    .await
    .map_err(|e| e.to_string())
}

/// Whether the pod's Ready condition is True (and it is not being deleted).
pub fn pod_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
