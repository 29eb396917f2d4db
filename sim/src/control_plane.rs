//! The local backend's control plane (ARCHITECTURE §3): a real kube-apiserver with the CRDs
//! installed, and the controllers running in-process as tokio tasks against it — the JetStream
//! controller and the cluster controller on the local server lifecycle, so a NatsCluster applied
//! here becomes nats-server processes on 127.0.0.1.
//!
//! Scenario steps reach the controllers through a [`Host`]: apply a manifest (server-side apply
//! of every document), annotate an object, wait for a condition, restart a controller (its task
//! aborted and started again from nothing, as a pod restart would).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::local::LocalServerLifecycle;
use kube::Client;
use tokio::task::JoinHandle;

use crate::apiserver::{ApiServer, ApiServerError};
use crate::elected::Replicas;

/// The field manager the sim applies manifests as (a user's `kubectl apply --server-side`).
pub const FIELD_MANAGER: &str = "sim";
/// The namespace an object reference without one names.
pub const DEFAULT_NAMESPACE: &str = "nats";
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    ApiServer(#[from] ApiServerError),
    #[error("creating the servers' directory: {0}")]
    Dir(#[source] std::io::Error),
    #[error("reading manifest {path}: {source}")]
    ReadManifest {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("manifest {path}, document {index}: {message}")]
    BadDocument {
        path: PathBuf,
        index: usize,
        message: String,
    },
    #[error("no kind {kind} is served (apiVersion {api_version})")]
    UnknownKind { kind: String, api_version: String },
    #[error("discovery: {0}")]
    Discovery(#[source] kube::Error),
    #[error("applying {object}: {source}")]
    Apply {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("object reference {0:?} is not Kind/name or Kind/namespace/name")]
    BadReference(String),
    #[error("annotation {0:?} is not key=value (or key- to remove it)")]
    BadAnnotation(String),
    #[error("annotating {object}: {source}")]
    Annotate {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("{object} has no condition {condition} within {waited:?} (last: {last})")]
    ConditionTimeout {
        object: String,
        condition: String,
        waited: Duration,
        last: String,
    },
    #[error("no controller named {0} (known: auth, cluster, jetstream)")]
    UnknownController(String),
    #[error("controller {0} does not run as replicas under leader election (scenario `replicas:`)")]
    NotElected(String),
    #[error("no replica of controller {0} leads")]
    NoLeader(String),
    #[error("{action} {object}: {source}")]
    Object {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
}

pub(crate) mod controller_factories;
mod local_or_node;
mod plane_objects;
pub use controller_factories::{
    ControllerFactory, auth_controller_with_system_connection, controllers,
};
pub use local_or_node::{ControlPlane, NodeHost};
pub use plane_objects::{ObjectRef, Objects, condition_of, parse_condition, substitute};

struct Running {
    factory: ControllerFactory,
    task: JoinHandle<()>,
    restarts: u32,
}

/// A kube-apiserver, the local server lifecycle, and the controllers running against them.
pub struct Host {
    // Field order is drop order: the controllers stop first, then the servers they started,
    // then the apiserver, then the directory.
    running: Mutex<BTreeMap<String, Running>>,
    /// The controllers run as replicas under leader election ([`Host::elect`]).
    elected: Mutex<BTreeMap<String, Replicas>>,
    /// Starts exited servers again, as a kubelet would.
    supervisor: JoinHandle<()>,
    /// Stops the servers of a NatsCluster that is gone, as the garbage collector and the kubelet
    /// would ([`crate::local::collect`]).
    collector: JoinHandle<()>,
    server_lifecycle: LocalServerLifecycle,
    /// The apiserver's objects, through the admin client.
    objects: Objects,
    api: ApiServer,
    dir: tempfile::TempDir,
}

/// A host's objects are its apiserver's: `host.apply_manifest(..)`, `host.get(..)`.
impl std::ops::Deref for Host {
    type Target = Objects;
    fn deref(&self) -> &Objects {
        &self.objects
    }
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("api", &self.api)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let running = std::mem::take(&mut *self.lock());
        for (_, r) in running {
            r.task.abort();
        }
        self.supervisor.abort();
        self.collector.abort();
        // An aborted task drops its share of the server lifecycle only when the runtime next polls it;
        // the processes must not wait for that.
        self.server_lifecycle.kill_all();
    }
}

impl Host {
    /// Starts kube-apiserver 1.20, installs every CRD, creates `namespaces`, and runs the
    /// named controllers (see [`controllers`]).
    pub async fn start(namespaces: &[&str], run: &[&str]) -> Result<Self, HostError> {
        Self::start_in(&std::env::temp_dir(), namespaces, run).await
    }

    /// [`Host::start`] with the apiserver's directory and the servers' under `parent` (both go
    /// when the host is dropped).
    pub async fn start_in(
        parent: &Path,
        namespaces: &[&str],
        run: &[&str],
    ) -> Result<Self, HostError> {
        // Booted over a seed holding the CRDs; installing them adds the CEL judge.
        let crds = nats_api::crds::all();
        let api = ApiServer::start_seeded(parent, &crds).await?;
        api.install_crds(&crds).await?;
        for ns in namespaces {
            api.create_namespace(ns).await?;
        }
        let dir = tempfile::Builder::new()
            .prefix("sim-host-")
            .tempdir_in(parent)
            .map_err(HostError::Dir)?;
        let server_lifecycle = LocalServerLifecycle::new(
            dir.path().join("servers"),
            Arc::new(|v: &str| crate::install::nats_server(v).map_err(|e| e.to_string())),
        );
        let host = Host {
            running: Mutex::new(BTreeMap::new()),
            elected: Mutex::new(BTreeMap::new()),
            supervisor: server_lifecycle.supervise(),
            collector: collector(api.client(), server_lifecycle.clone()),
            server_lifecycle,
            objects: Objects::new(api.client()),
            api,
            dir,
        };
        let known = controllers();
        for name in run {
            let factory = known
                .get(name)
                .cloned()
                .ok_or_else(|| HostError::UnknownController((*name).into()))?;
            host.spawn(name, factory);
        }
        Ok(host)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawn(&self, name: &str, factory: ControllerFactory) {
        let task = tokio::spawn(factory(self.api.client(), self.server_lifecycle.clone()));
        self.lock().insert(
            name.into(),
            Running {
                factory,
                task,
                restarts: 0,
            },
        );
    }

    /// Runs another controller (e.g. one a test brings itself).
    pub fn add_controller(&self, name: &str, factory: ControllerFactory) {
        self.spawn(name, factory);
    }

    pub fn client(&self) -> Client {
        self.api.client()
    }
    pub fn api(&self) -> &ApiServer {
        &self.api
    }
    pub fn server_lifecycle(&self) -> &LocalServerLifecycle {
        &self.server_lifecycle
    }
    /// The names of the controllers running.
    pub fn controller_names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }
    /// Whether a controller's task is still running (a controller never ends on its own).
    pub fn controller_running(&self, name: &str) -> bool {
        self.lock().get(name).is_some_and(|r| !r.task.is_finished())
    }
    /// How often a controller was restarted.
    pub fn controller_restarts(&self, name: &str) -> Option<u32> {
        self.lock().get(name).map(|r| r.restarts)
    }

    fn elected(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Replicas>> {
        self.elected.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs controller `name` as `count` replicas under leader election instead of one task
    /// (see [`crate::elected`]).
    pub async fn elect(&self, name: &str, count: u32) -> Result<(), HostError> {
        let old = self
            .lock()
            .remove(name)
            .ok_or_else(|| HostError::UnknownController(name.into()))?;
        old.task.abort();
        let _ = old.task.await;
        let replicas = Replicas::start(
            name,
            old.factory,
            self.api.client(),
            self.server_lifecycle.clone(),
            count,
        );
        self.elected().insert(name.into(), replicas);
        Ok(())
    }

    /// The identity of the replica of controller `name` that leads now.
    pub fn leader_of(&self, name: &str) -> Option<String> {
        self.elected().get(name)?.leader().map(String::from)
    }

    /// Kills the leading replica of controller `name` (no release: a SIGKILL) and starts a
    /// fresh standby in its place; returns the killed identity.
    pub fn kill_leader(&self, name: &str) -> Result<String, HostError> {
        let mut elected = self.elected();
        let replicas = elected
            .get_mut(name)
            .ok_or_else(|| HostError::NotElected(name.into()))?;
        replicas
            .kill_leader()
            .ok_or_else(|| HostError::NoLeader(name.into()))
    }

    /// Aborts a controller's task, waits for it to end, and starts it again from nothing.
    pub async fn restart_controller(&self, name: &str) -> Result<(), HostError> {
        let old = self
            .lock()
            .remove(name)
            .ok_or_else(|| HostError::UnknownController(name.into()))?;
        old.task.abort();
        // Cancelled is the expected end; a panic would have ended it earlier and is logged.
        if let Err(e) = old.task.await
            && !e.is_cancelled()
        {
            tracing::warn!(controller = name, error = %e, "controller task had failed");
        }
        let task = tokio::spawn((old.factory)(
            self.api.client(),
            self.server_lifecycle.clone(),
        ));
        self.lock().insert(
            name.into(),
            Running {
                factory: old.factory,
                task,
                restarts: old.restarts + 1,
            },
        );
        Ok(())
    }
}

/// How often the collector lists the NatsClusters.
const COLLECT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The garbage collector of the local backend: every [`COLLECT_EVERY`], the clusters the
/// server lifecycle ran before a LIST of NatsClusters that the LIST lacks have their servers stopped
/// ([`LocalServerLifecycle::collect`]).
fn collector(client: kube::Client, server_lifecycle: LocalServerLifecycle) -> JoinHandle<()> {
    tokio::spawn(async move {
        let api: kube::Api<nats_api::cluster::NatsCluster> = kube::Api::all(client.clone());
        loop {
            tokio::time::sleep(COLLECT_EVERY).await;
            let known = server_lifecycle.clusters();
            if known.is_empty() {
                continue;
            }
            let Ok(list) = api.list(&kube::api::ListParams::default()).await else {
                continue;
            };
            let listed: std::collections::BTreeSet<String> = list
                .items
                .iter()
                .map(|c| {
                    format!(
                        "{}/{}",
                        c.metadata.namespace.as_deref().unwrap_or("default"),
                        c.metadata.name.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            let orphans = crate::local::collect::orphans(&known, &listed);
            if !orphans.is_empty() {
                let took = server_lifecycle.collect(&orphans).await;
                tracing::info!(?orphans, ?took, "servers of deleted NatsClusters stopped");
                let live: std::collections::BTreeSet<String> = list
                    .items
                    .iter()
                    .filter_map(|c| c.metadata.uid.clone())
                    .collect();
                collect_owned(&client, &orphans, &live).await;
            }
        }
    })
}

/// The garbage collector's other half: the Secrets of the namespaces of `orphans` whose
/// controller is a NatsCluster no longer among `live` (its route CA and certificate, its leaf
/// remotes) are deleted, so a NatsCluster of the same name made again issues its own.
async fn collect_owned(
    client: &kube::Client,
    orphans: &[String],
    live: &std::collections::BTreeSet<String>,
) {
    use k8s_openapi::api::core::v1::Secret;
    let namespaces: std::collections::BTreeSet<&str> = orphans
        .iter()
        .filter_map(|k| k.split_once('/').map(|(ns, _)| ns))
        .collect();
    for ns in namespaces {
        let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), ns);
        let Ok(list) = api.list(&kube::api::ListParams::default()).await else {
            continue;
        };
        for s in list.items {
            let orphaned = crate::local::collect::owned_by_gone_cluster(
                s.metadata.owner_references.as_deref().unwrap_or_default(),
                live,
            );
            if orphaned && let Some(name) = &s.metadata.name {
                let _ = api.delete(name, &kube::api::DeleteParams::default()).await;
            }
        }
    }
}
