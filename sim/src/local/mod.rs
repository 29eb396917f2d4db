//! The sim's side of the server-lifecycle port: every server of a NatsCluster is a nats-server
//! process on 127.0.0.1 with ports kept per cluster, its files under `root/<namespace>/<name>/<ordinal>/`.
//!
//! A restart is what a pod's preStop does: lame duck through `--signal ldm=<pidfile>`, wait for
//! the process to exit (a deadline past the lame-duck duration, then SIGKILL), start again with
//! the new config. A process that exits on its own is started again at the next look, counted
//! as a restart — what the kubelet does for a container. Every process is killed when the
//! [`LocalServerLifecycle`] drops.
//!
//! Here: the server lifecycle and what it keeps per cluster; [`layout`] where a local server listens
//! and keeps its files; [`pod_process`] one server's process (on [`crate::server::server_process`]);
//! [`files`] what it reads from its directory; [`events`] the log of what happened to each;
//! [`adapter`] the [`ServerLifecycle`](cluster_controller::server_lifecycle::ServerLifecycle) methods;
//! [`collect`] the servers of a NatsCluster that is gone, stopped as the kubelet stops pods.

mod adapter;
pub mod collect;
mod events;
mod files;
pub mod layout;
pub mod names;
mod pod_process;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster_controller::plan::Ports;
use cluster_controller::render::ServerPlan;
use cluster_controller::server_lifecycle::ServerLifecycleError;
use nats_api::cluster::NatsCluster;

pub use self::files::PLAN_FILE;
pub use self::layout::{LOCAL_HOST, LocalLayout};
pub use self::pod_process::{EXIT_DEADLINE, START_DEADLINE};
pub use crate::server::events::{LocalEvent, ServerLifecycleEvent};
pub use crate::server::server_process::{CONFIG_FILE, LOG_FILE};

use self::events::EventLog;
use self::pod_process::{Entry, Local, Monitor};

/// Resolves the nats-server binary of a version (the sim passes `sim::install::nats_server`).
pub type BinaryResolver = Arc<dyn Fn(&str) -> Result<PathBuf, String> + Send + Sync>;

/// Hands out a free TCP port on 127.0.0.1 (the sim passes `sim::ports::free_port`).
pub type PortAllocator = Arc<dyn Fn() -> u16 + Send + Sync>;

/// How often the supervisor looks for processes that exited on their own.
pub const SUPERVISE_EVERY: Duration = Duration::from_millis(500);

struct ClusterState {
    ports: Vec<Ports>,
    servers: BTreeMap<u32, Arc<Entry>>,
    /// Whether a server of the cluster was ever made: only then did the cluster's NatsCluster
    /// exist for the controller, so a LIST lacking it means it was deleted. Ports reserved for a
    /// manifest not yet applied ([`LocalServerLifecycle::reserve_ports`]) are not a cluster the
    /// collector may take.
    ran: bool,
}

impl ClusterState {
    fn empty() -> Self {
        ClusterState {
            ports: Vec::new(),
            servers: BTreeMap::new(),
            ran: false,
        }
    }
}

/// nats-server processes on loopback, one directory per server. Clones share the servers (the
/// controller holds one, the sim another to observe and fault them); the processes are killed
/// when the last clone drops.
#[derive(Clone)]
pub struct LocalServerLifecycle {
    root: PathBuf,
    binary: BinaryResolver,
    allocate: PortAllocator,
    clusters: Arc<Mutex<HashMap<String, ClusterState>>>,
    events: EventLog,
    http: Monitor,
}

impl std::fmt::Debug for LocalServerLifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalServerLifecycle")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

fn key(cluster: &NatsCluster) -> String {
    format!(
        "{}/{}",
        cluster.metadata.namespace.as_deref().unwrap_or("default"),
        cluster.metadata.name.as_deref().unwrap_or_default()
    )
}

fn failed(
    action: &'static str,
    object: impl Into<String>,
    reason: impl ToString,
) -> ServerLifecycleError {
    ServerLifecycleError::Failed {
        action,
        object: object.into(),
        reason: reason.to_string(),
    }
}

impl LocalServerLifecycle {
    /// Servers under `root`, binaries from `binary`, ports from [`crate::ports::free_port`].
    pub fn new(root: impl Into<PathBuf>, binary: BinaryResolver) -> Self {
        Self::with_ports(root, binary, Arc::new(crate::ports::free_port))
    }

    /// Servers under `root`, binaries from `binary`, ports from `allocate`.
    pub fn with_ports(
        root: impl Into<PathBuf>,
        binary: BinaryResolver,
        allocate: PortAllocator,
    ) -> Self {
        Self {
            root: root.into(),
            binary,
            allocate,
            clusters: Arc::new(Mutex::new(HashMap::new())),
            events: Arc::default(),
            http: Monitor::new(),
        }
    }

    /// The directory the servers of `namespace/name` live under.
    pub fn cluster_root(&self, namespace: &str, name: &str) -> PathBuf {
        self.root.join(namespace).join(name)
    }

    fn state<R>(&self, f: impl FnOnce(&mut HashMap<String, ClusterState>) -> R) -> R {
        // A poisoned lock only means another caller panicked mid-update of plain data.
        let mut g = self.clusters.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    /// The ports of servers `0..replicas` of `namespace/name`, allocated on first ask and kept:
    /// what a scenario reads to point another cluster's gateway or leaf remote at this one
    /// before it exists.
    pub fn reserve_ports(&self, namespace: &str, name: &str, replicas: u32) -> Vec<Ports> {
        let k = format!("{namespace}/{name}");
        let allocate = self.allocate.clone();
        self.state(|m| {
            let st = m.entry(k).or_insert_with(ClusterState::empty);
            while st.ports.len() < replicas as usize {
                st.ports.push(Ports {
                    client: allocate(),
                    monitor: allocate(),
                    route: allocate(),
                    gateway: allocate(),
                    leafnode: allocate(),
                });
            }
            st.ports.clone()
        })
    }

    fn local_layout(&self, cluster: &NatsCluster) -> LocalLayout {
        let ns = cluster.metadata.namespace.as_deref().unwrap_or("default");
        let name = cluster.metadata.name.as_deref().unwrap_or_default();
        let replicas = cluster.spec.replicas.max(0) as u32;
        // Servers beyond replicas still present keep their ports.
        let known = self.state(|m| {
            m.get(&key(cluster))
                .and_then(|s| s.servers.keys().next_back().map(|o| o + 1))
                .unwrap_or(0)
        });
        let ports = self.reserve_ports(ns, name, replicas.max(known));
        LocalLayout::new(self.cluster_root(ns, name), ports).with_remotes(self.service_names())
    }

    /// The Service names of every local NatsCluster, resolved to the loopback listeners they
    /// lead to ([`names`]), for [`nats_wire::names::resolve_names_with`] and the servers' own
    /// gateway and leaf remotes. The map holds the server lifecycle weakly: it keeps no server alive.
    pub fn service_names(&self) -> nats_wire::names::ServiceNames {
        let clusters = Arc::downgrade(&self.clusters);
        Arc::new(move |host: &str, port: u16| {
            let target = names::service_target(host)?;
            let clusters = clusters.upgrade()?;
            let g = clusters.lock().unwrap_or_else(|p| p.into_inner());
            let (cluster, listener) = names::resolve(&target, port, |ns, c| {
                g.get(&format!("{ns}/{c}"))
                    .is_some_and(|st| !st.ports.is_empty())
            })?;
            let st = g.get(&format!("{}/{cluster}", target.namespace))?;
            let ports: Vec<(String, u16)> = st
                .ports
                .iter()
                .enumerate()
                .filter(|(i, _)| target.ordinal.is_none_or(|o| o as usize == *i))
                .map(|(_, p)| match listener {
                    names::Listener::Client => p.client,
                    names::Listener::Gateway => p.gateway,
                    names::Listener::Leafnodes => p.leafnode,
                })
                .map(|p| (LOCAL_HOST.to_string(), p))
                .collect();
            (!ports.is_empty()).then_some(ports)
        })
    }

    /// The pid of server `ordinal`'s process, while one runs: for the sim's faults.
    pub fn pid(&self, namespace: &str, name: &str, ordinal: u32) -> Option<u32> {
        let server = self.state(|m| {
            m.get(&format!("{namespace}/{name}"))
                .and_then(|s| s.servers.get(&ordinal).cloned())
        })?;
        Some(server.pid.load(Ordering::SeqCst)).filter(|p| *p != 0)
    }

    fn entries(&self) -> Vec<Arc<Entry>> {
        self.state(|m| {
            m.values()
                .flat_map(|s| s.servers.values().cloned())
                .collect()
        })
    }

    /// Starts again every server whose process exited on its own, as a kubelet restarts a
    /// container whatever the controller is doing; servers in the middle of an operation are
    /// left to it. The sim runs this every [`SUPERVISE_EVERY`] (see [`LocalServerLifecycle::supervise`]).
    pub async fn revive_exited(&self) {
        for e in self.entries() {
            if let Ok(mut guard) = e.local.try_lock() {
                let local = &mut *guard;
                let (dir, monitor) = (local.dir.clone(), local.monitor);
                if let Err(err) = e.revive(local, &dir, monitor, &self.http).await {
                    tracing::warn!(error = %err, "a server that exited did not start again");
                }
            }
        }
    }

    /// Runs [`Self::revive_exited`] every [`SUPERVISE_EVERY`] until the returned task is aborted.
    pub fn supervise(&self) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SUPERVISE_EVERY).await;
                me.revive_exited().await;
            }
        })
    }

    /// Kills every process at once (SIGKILL), without lame duck: for a host going away while
    /// a controller task may still hold this server lifecycle. A server in the middle of a restart is
    /// left to its own drop.
    pub fn kill_all(&self) {
        for e in self.entries() {
            if let Ok(mut local) = e.local.try_lock()
                && let Some(r) = local.running.as_mut()
            {
                r.kill();
            }
        }
    }

    /// Every start, lame duck, restart, revival and delete so far, in order.
    pub fn events(&self) -> Vec<ServerLifecycleEvent> {
        events::all(&self.events)
    }

    fn server_entry(
        &self,
        cluster: &NatsCluster,
        plan: &ServerPlan,
        ordinal: u32,
        binary: &Path,
        revision: &str,
    ) -> Arc<Entry> {
        self.state(|m| {
            let st = m.entry(key(cluster)).or_insert_with(ClusterState::empty);
            st.ran = true;
            st.servers
                .entry(ordinal)
                .or_insert_with(|| {
                    Arc::new(Entry {
                        server_name: plan.server_name.clone(),
                        volume: cluster_controller::rollout::volume::desired_shape(&cluster.spec),
                        local: tokio::sync::Mutex::new(Local {
                            server_name: plan.server_name.clone(),
                            pid_file: plan.pid_file.clone(),
                            running: None,
                            revision: revision.to_string(),
                            binary: binary.to_path_buf(),
                            dir: PathBuf::new(),
                            monitor: 0,
                        }),
                        restarts: AtomicU32::new(0),
                        pid: AtomicU32::new(0),
                        events: self.events.clone(),
                    })
                })
                .clone()
        })
    }

    fn resolve(&self, cluster: &NatsCluster) -> Result<PathBuf, ServerLifecycleError> {
        (self.binary)(&cluster.spec.version).map_err(|e| {
            failed(
                "resolve nats-server",
                format!("version {}", cluster.spec.version),
                e,
            )
        })
    }
}
