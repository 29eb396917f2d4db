//! What the steps share ([`StepContext`]) and how a step's server selector resolves
//! ([`resolve`]).

use std::collections::BTreeMap;
#[cfg(feature = "kube")]
use std::collections::BTreeSet;
#[cfg(feature = "kube")]
use std::path::Path;
use std::time::Duration;

use super::HostPlane;
#[cfg(feature = "kube")]
use super::client_run::ClientRun;
use crate::backend::Deployment;
#[cfg(feature = "kube")]
use crate::control_plane::ControlPlane;
#[cfg(feature = "kube")]
use crate::controlled;

/// What the steps share: the host, the manifests' variables, the NatsClusters applied, the
/// clients and the account keys recorded when the workload started.
#[derive(Default)]
pub(super) struct StepContext {
    pub(super) host: Option<HostPlane>,
    pub(super) vars: BTreeMap<String, String>,
    /// (namespace, name) of every NatsCluster the scenario applied.
    #[cfg(feature = "kube")]
    pub(super) clusters: Vec<(String, String)>,
    /// The clients of `clients:`, by name, once the workload started.
    #[cfg(feature = "kube")]
    pub(super) clients: BTreeMap<String, ClientRun>,
    /// `Kind/namespace/name` of every NatsAccount of the auth plane → its public key.
    #[cfg(feature = "kube")]
    pub(super) account_keys: BTreeMap<String, String>,
    /// Per account key, the sim servers whose resolver directory held its JWT then.
    #[cfg(feature = "kube")]
    pub(super) resolver_held: BTreeMap<String, BTreeSet<String>>,
    /// The workload's streams: what `record_leader_spread` counts the leaders of.
    pub(super) streams: Vec<String>,
    /// What each `record_leader_spread` step counted, by its name: stream leaders per server.
    pub(super) leader_counts: BTreeMap<String, BTreeMap<String, u64>>,
    /// How the steps through the system account reach it, where the topology has one.
    #[cfg(feature = "kube")]
    pub(super) system: Option<super::system_access::SystemAccess>,
    /// Stops every publisher of `publishers` (`stop_publishers`).
    pub(super) publishers_stop: Option<tokio::sync::watch::Sender<bool>>,
    /// The ledger of each publisher, by the stream it publishes to (`audit_stream`).
    pub(super) ledgers: BTreeMap<String, crate::ledger::Ledger>,
    /// The creds the workload connects with, where the sim signed them (`audit_stream`).
    pub(super) workload_creds: Option<String>,
    /// What each publisher sends, by the stream it publishes to (`read_replicas`).
    pub(super) published: BTreeMap<String, crate::traffic::PublisherSpec>,
    /// What each `read_replicas` step found, replica by replica.
    pub(super) replica_reads: Vec<super::ReplicaRead>,
}

impl StepContext {
    #[cfg(feature = "kube")]
    pub(super) fn host(&self) -> Result<&HostPlane, String> {
        self.host
            .as_ref()
            .ok_or_else(|| "the host is not running".to_string())
    }

    #[cfg(feature = "kube")]
    pub(super) fn system_access(&self) -> Result<&super::system_access::SystemAccess, String> {
        self.system
            .as_ref()
            .ok_or_else(|| "this topology gives the steps no system account".to_string())
    }

    /// Reserves the ports of the manifest's NatsClusters and records them and their variables.
    #[cfg(feature = "kube")]
    pub(super) fn reserve(&mut self, path: &Path) -> Result<Vec<(String, String)>, String> {
        let found = match self.host()? {
            ControlPlane::Local(host) => {
                controlled::reserve(host, path).map_err(|e| e.to_string())?
            }
            ControlPlane::Node(_) => node_clusters(path)?,
        };
        let mut out = Vec::new();
        for (cluster, vars) in found {
            self.vars.extend(vars);
            if !self.clusters.contains(&cluster) {
                self.clusters.push(cluster.clone());
            }
            out.push(cluster);
        }
        Ok(out)
    }

    /// Per server of every NatsCluster applied, its restarts; per controller, its restarts.
    #[cfg(feature = "kube")]
    pub(super) async fn restarts(&self) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
        use cluster_controller::server_lifecycle::ServerLifecycle;
        let mut servers = BTreeMap::new();
        let mut controllers = BTreeMap::new();
        let Some(plane) = &self.host else {
            return (servers, controllers);
        };
        let host = match plane {
            ControlPlane::Local(host) => host,
            ControlPlane::Node(_) => {
                return (plane.server_restarts(), plane.controller_restarts().await);
            }
        };
        for (ns, name) in &self.clusters {
            let Ok(cluster) = controlled::read_cluster(host, ns, name).await else {
                continue;
            };
            if let Ok(observed) = host.server_lifecycle().observe(&cluster).await {
                for o in observed {
                    servers.insert(o.server_name, o.restarts);
                }
            }
        }
        for c in host.controller_names() {
            controllers.insert(c.clone(), host.controller_restarts(&c).unwrap_or(0));
        }
        (servers, controllers)
    }

    /// Without the harnesses there is no host, and no server lifecycle or controller counts
    /// restarts: both empty, as for any run without a host.
    #[cfg(not(feature = "kube"))]
    pub(super) async fn restarts(&self) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
        (BTreeMap::new(), BTreeMap::new())
    }
}

/// Resolves a server selector against the deployment.
pub(super) async fn resolve(
    dep: &dyn Deployment,
    selector: &str,
    last_faulted: &Option<String>,
) -> Result<String, String> {
    if selector == "last-faulted" {
        return last_faulted
            .clone()
            .ok_or_else(|| "no server was faulted yet".to_string());
    }
    if selector == "meta-leader" {
        return dep
            .meta_leader(Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string());
    }
    if let Some(stream) = selector.strip_prefix("stream-leader:") {
        return dep
            .stream_leader(stream, Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string());
    }
    if let Some(cluster) = selector.strip_prefix("meta-follower:") {
        let leader = dep
            .meta_leader(Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string())?;
        return super::placement::meta_follower(&dep.server_names(), cluster, &leader);
    }
    if let Some(stream) = selector.strip_prefix("stream-follower:") {
        let leader = dep
            .stream_leader(stream, Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string())?;
        return dep
            .server_names()
            .into_iter()
            .find(|n| *n != leader)
            .ok_or_else(|| format!("stream {stream} has no follower"));
    }
    if dep.server_names().iter().any(|n| n == selector) {
        return Ok(selector.to_string());
    }
    Err(format!("no server matches {selector:?}"))
}

#[cfg(feature = "kube")]
/// The NatsClusters of the manifest at `path` on the node, with the variable naming each one's
/// client Service (`<name>.client`, `<name>.clients`): the node's servers have no ports to
/// reserve, and a gateway or leaf URL is not named (topologies of several NatsClusters run on the
/// local backend).
fn node_clusters(path: &Path) -> Result<Vec<crate::controlled::Reserved>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(controlled::nats_clusters_in(&text)
        .into_iter()
        .map(|(ns, name, _)| {
            let url = format!("nats://{name}.{ns}.svc:4222");
            let vars = vec![
                (format!("{name}.client"), url.clone()),
                (
                    format!("{name}.clients"),
                    serde_json::to_string(&[&url]).unwrap_or_default(),
                ),
            ];
            ((ns, name), vars)
        })
        .collect())
}
