//! The sim's side of the server-lifecycle port: every server of a NatsCluster is a nats-server
//! process on 127.0.0.1 with ports kept per cluster, its files under `root/<namespace>/<name>/<ordinal>/`.
//!
//! A restart is what a pod's preStop does: lame duck through `--signal ldm=<pidfile>`, wait for
//! the process to exit (a deadline past the lame-duck duration, then SIGKILL), start again with
//! the new config. A process that exits on its own is started again at the next look, counted
//! as a restart — what the kubelet does for a container. Every process is killed when the
//! [`LocalLifecycle`] drops.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nats_api::cluster::{Endpoints, NatsCluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use super::{
    Applied, DesiredServer, LifecycleError, ObservedServer, ServerAddress, ServerLifecycle,
};
use crate::local_layout::{LOCAL_HOST, LocalLayout};
use crate::plan::{Layout, Ports};
use crate::render::ServerPlan;

/// Resolves the nats-server binary of a version (the sim passes `sim::install::nats_server`).
pub type BinaryResolver = Arc<dyn Fn(&str) -> Result<PathBuf, String> + Send + Sync>;

/// Hands out a free TCP port on 127.0.0.1 (the sim passes `sim::ports::free_port`).
pub type PortAllocator = Arc<dyn Fn() -> u16 + Send + Sync>;

/// How long a lame-duck server may take to exit before it is killed: the rendered lame-duck
/// duration (2m) plus its grace and some slack.
pub const EXIT_DEADLINE: Duration = Duration::from_secs(150);
/// How long a started process may take before its monitoring port answers at all.
pub const START_DEADLINE: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);
/// How often the supervisor looks for processes that exited on their own.
pub const SUPERVISE_EVERY: Duration = Duration::from_millis(500);
/// How long observing a server waits for a lock another holder has: longer than a config write
/// or a look at the process takes on a loaded machine, far shorter than a restart.
const BRIEF_HOLD: Duration = Duration::from_secs(1);
const HEALTHZ_TIMEOUT: Duration = Duration::from_secs(1);

/// The config file name inside a server's directory.
pub const CONFIG_FILE: &str = "nats.conf";
/// Beside it: the revision and plan it was rendered from (see [`ServerLifecycle::stored_plan`]).
pub const PLAN_FILE: &str = "plan.json";
/// The log file name inside a server's directory (stdout and stderr of every run, appended).
pub const LOG_FILE: &str = "server.log";

/// What happened to a server, for the sim's timeline and its restart order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalEvent {
    /// First start (or a start after a delete).
    Started,
    /// Put in lame duck to restart under a new revision or binary.
    LameDuck,
    /// Started again under the new revision after the lame-duck exit.
    Restarted,
    /// Started again after it died on its own (the kubelet's restart).
    Revived,
    /// Stopped and deleted.
    Deleted,
}

/// One [`LocalEvent`] of server `server` (its server name) at `at`.
#[derive(Clone, Debug)]
pub struct LifecycleEvent {
    pub at: std::time::Instant,
    pub server: String,
    pub event: LocalEvent,
}

type EventLog = Arc<Mutex<Vec<LifecycleEvent>>>;

fn log(events: &EventLog, server: &str, event: LocalEvent) {
    events
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(LifecycleEvent {
            at: std::time::Instant::now(),
            server: server.to_string(),
            event,
        });
}

/// A server process this implementation started.
struct Running {
    child: Child,
    binary: PathBuf,
    revision: String,
}

/// What is known of one server: its process (absent once deleted or between a stop and a
/// start) and how often it was (re)started after the first start.
struct Local {
    server_name: String,
    pid_file: String,
    running: Option<Running>,
    /// The revision last applied; the process comes back under it if it dies.
    revision: String,
    binary: PathBuf,
    /// Where it runs and what answers for it, for a revival without the cluster at hand.
    dir: PathBuf,
    monitor: u16,
}

/// One server: its process behind a lock held for a whole start or restart, and what an
/// observer reads without waiting for that lock.
struct Entry {
    server_name: String,
    /// The claim its store stands for, as of its creation: like a StatefulSet's claim
    /// template, only a replacement (delete, then create) changes it.
    volume: Option<crate::rollout::volume::ClaimShape>,
    local: tokio::sync::Mutex<Local>,
    restarts: AtomicU32,
    pid: AtomicU32,
    events: EventLog,
}

struct ClusterState {
    ports: Vec<Ports>,
    servers: BTreeMap<u32, Arc<Entry>>,
}

/// nats-server processes on loopback, one directory per server. Clones share the servers (the
/// controller holds one, the sim another to observe and fault them); the processes are killed
/// when the last clone drops.
#[derive(Clone)]
pub struct LocalLifecycle {
    root: PathBuf,
    binary: BinaryResolver,
    allocate: PortAllocator,
    clusters: Arc<Mutex<HashMap<String, ClusterState>>>,
    events: EventLog,
}

impl std::fmt::Debug for LocalLifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLifecycle")
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
) -> LifecycleError {
    LifecycleError::Failed {
        action,
        object: object.into(),
        reason: reason.to_string(),
    }
}

/// A port the OS hands out for 127.0.0.1:0: free a moment ago.
pub fn os_port() -> u16 {
    std::net::TcpListener::bind((LOCAL_HOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

impl LocalLifecycle {
    /// Servers under `root`, binaries from `binary`, ports from the OS.
    pub fn new(root: impl Into<PathBuf>, binary: BinaryResolver) -> Self {
        Self::with_ports(root, binary, Arc::new(os_port))
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
            let st = m.entry(k).or_insert_with(|| ClusterState {
                ports: Vec::new(),
                servers: BTreeMap::new(),
            });
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
        LocalLayout::new(self.cluster_root(ns, name), ports)
    }

    /// The pid of server `ordinal`'s process, while one runs: for the sim's faults.
    pub fn pid(&self, namespace: &str, name: &str, ordinal: u32) -> Option<u32> {
        let server = self.state(|m| {
            m.get(&format!("{namespace}/{name}"))
                .and_then(|s| s.servers.get(&ordinal).cloned())
        })?;
        Some(server.pid.load(Ordering::SeqCst)).filter(|p| *p != 0)
    }

    /// Starts again every server whose process exited on its own, as a kubelet restarts a
    /// container whatever the controller is doing; servers in the middle of an operation are
    /// left to it. The sim runs this every [`SUPERVISE_EVERY`] (see [`LocalLifecycle::supervise`]).
    pub async fn revive_exited(&self) {
        let entries: Vec<Arc<Entry>> = self.state(|m| {
            m.values()
                .flat_map(|s| s.servers.values().cloned())
                .collect()
        });
        for e in entries {
            if let Ok(mut guard) = e.local.try_lock() {
                let local = &mut *guard;
                let (dir, monitor) = (local.dir.clone(), local.monitor);
                if let Err(err) = e.revive(local, &dir, monitor).await {
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
    /// a controller task may still hold this lifecycle. A server in the middle of a restart is
    /// left to its own drop.
    pub fn kill_all(&self) {
        let entries: Vec<Arc<Entry>> = self.state(|m| {
            m.values()
                .flat_map(|s| s.servers.values().cloned())
                .collect()
        });
        for e in entries {
            if let Ok(mut local) = e.local.try_lock()
                && let Some(r) = local.running.as_mut()
            {
                let _ = r.child.start_kill();
            }
        }
    }

    /// Every start, lame duck, restart, revival and delete so far, in order.
    pub fn events(&self) -> Vec<LifecycleEvent> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
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
            let st = m.entry(key(cluster)).or_insert_with(|| ClusterState {
                ports: Vec::new(),
                servers: BTreeMap::new(),
            });
            st.servers
                .entry(ordinal)
                .or_insert_with(|| {
                    Arc::new(Entry {
                        server_name: plan.server_name.clone(),
                        volume: crate::rollout::volume::desired_shape(&cluster.spec),
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

    fn resolve(&self, cluster: &NatsCluster) -> Result<PathBuf, LifecycleError> {
        (self.binary)(&cluster.spec.version).map_err(|e| {
            failed(
                "resolve nats-server",
                format!("version {}", cluster.spec.version),
                e,
            )
        })
    }
}

fn write_file(path: &Path, contents: &[u8], object: &str) -> Result<(), LifecycleError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            failed(
                "create directory",
                object,
                format!("{}: {e}", parent.display()),
            )
        })?;
    }
    std::fs::write(path, contents)
        .map_err(|e| failed("write file", object, format!("{}: {e}", path.display())))
}

fn write_server_files(dir: &Path, server: &DesiredServer) -> Result<(), LifecycleError> {
    let object = format!("server {}", server.plan.server_name);
    for f in &server.files {
        write_file(Path::new(&f.path), &f.contents, &object)?;
    }
    let plan = serde_json::json!({"revision": server.revision, "plan": server.plan});
    write_file(&dir.join(PLAN_FILE), plan.to_string().as_bytes(), &object)?;
    write_file(&dir.join(CONFIG_FILE), server.config.as_bytes(), &object)
}

/// The plan stored in `dir` when it is of `revision`.
fn read_plan(dir: &Path, revision: &str) -> Option<ServerPlan> {
    let text = std::fs::read_to_string(dir.join(PLAN_FILE)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    if v.get("revision")?.as_str()? != revision {
        return None;
    }
    serde_json::from_value(v.get("plan")?.clone()).ok()
}

/// Whether an HTTP server answers on `port`, and with which status code.
async fn http_status(port: u16, path: &str) -> Option<u16> {
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect((LOCAL_HOST, port))
            .await
            .ok()?;
        let req = format!("GET {path} HTTP/1.0\r\nHost: {LOCAL_HOST}\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = [0u8; 64];
        let mut n = 0;
        // The status line ends before the 64th byte.
        while n < buf.len() {
            let got = s.read(&mut buf[n..]).await.ok()?;
            if got == 0 {
                break;
            }
            n += got;
            if buf[..n].contains(&b'\n') {
                break;
            }
        }
        let line = String::from_utf8_lossy(&buf[..n]).to_string();
        line.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(HEALTHZ_TIMEOUT, attempt)
        .await
        .ok()
        .flatten()
}

/// The tail of a server's log, for errors.
fn log_tail(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join(LOG_FILE)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

async fn start(
    dir: &Path,
    binary: &Path,
    revision: &str,
    monitor: u16,
    object: &str,
) -> Result<Running, LifecycleError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        failed(
            "create directory",
            object,
            format!("{}: {e}", dir.display()),
        )
    })?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(LOG_FILE))
        .map_err(|e| failed("open log", object, e))?;
    let log2 = log.try_clone().map_err(|e| failed("open log", object, e))?;
    let mut child = Command::new(binary)
        .arg("-c")
        .arg(dir.join(CONFIG_FILE))
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed("start", object, format!("{}: {e}", binary.display())))?;
    // Started once the monitoring port answers anything (healthz may say 503 until the
    // JetStream meta group forms, which needs the peers).
    let deadline = tokio::time::Instant::now() + START_DEADLINE;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(failed(
                "start",
                object,
                format!("exited with {status}; log:\n{}", log_tail(dir)),
            ));
        }
        if http_status(monitor, "/healthz").await.is_some() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let _ = child.start_kill();
            return Err(failed(
                "start",
                object,
                format!(
                    "monitoring port {monitor} silent after {START_DEADLINE:?}; log:\n{}",
                    log_tail(dir)
                ),
            ));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(Running {
        child,
        binary: binary.to_path_buf(),
        revision: revision.to_string(),
    })
}

/// Lame duck through the pid file, wait for exit, SIGKILL at the deadline.
async fn stop(mut running: Running, pid_file: &str, object: &str) -> Result<(), LifecycleError> {
    if let Ok(Some(_)) = running.child.try_wait() {
        return Ok(());
    }
    let signalled = Command::new(&running.binary)
        .arg("--signal")
        .arg(format!("ldm={pid_file}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .await;
    let ok = matches!(&signalled, Ok(o) if o.status.success());
    if !ok {
        // Without lame duck the server still has to go: kill it and say nothing worse.
        tracing::warn!(
            server = object,
            ?signalled,
            "lame-duck signal failed, killing"
        );
        let _ = running.child.start_kill();
    }
    match tokio::time::timeout(EXIT_DEADLINE, running.child.wait()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(failed("wait for exit", object, e)),
        Err(_) => {
            let _ = running.child.start_kill();
            let _ = running.child.wait().await;
            tracing::warn!(server = object, "not gone within {EXIT_DEADLINE:?}, killed");
            Ok(())
        }
    }
}

impl Entry {
    fn started(&self, local: &mut Local, running: Running) {
        self.pid
            .store(running.child.id().unwrap_or(0), Ordering::SeqCst);
        local.running = Some(running);
    }

    fn restarted(&self) {
        self.restarts.fetch_add(1, Ordering::SeqCst);
    }

    /// Starts the process again if it exited on its own (the kubelet's restart), or if it was
    /// placed but is not running: a start its caller abandoned — a controller stopped mid-step
    /// or mid-revive drops the process it was starting — which a kubelet would still carry out.
    async fn revive(
        &self,
        local: &mut Local,
        dir: &Path,
        monitor: u16,
    ) -> Result<(), LifecycleError> {
        let exited = match local.running.as_mut() {
            Some(r) => matches!(r.child.try_wait(), Ok(Some(_))),
            None => !local.dir.as_os_str().is_empty() && !dir.as_os_str().is_empty(),
        };
        if exited {
            local.running = None;
            self.pid.store(0, Ordering::SeqCst);
            let object = format!("server {}", local.server_name);
            tracing::info!(server = %local.server_name, "exited on its own, starting again");
            let r = start(dir, &local.binary, &local.revision, monitor, &object).await?;
            self.started(local, r);
            self.restarted();
            log(&self.events, &self.server_name, LocalEvent::Revived);
        }
        Ok(())
    }
}

impl ServerLifecycle for LocalLifecycle {
    fn layout(&self, cluster: &NatsCluster) -> Box<dyn Layout + Send + Sync> {
        Box::new(self.local_layout(cluster))
    }

    async fn apply_shared(
        &self,
        cluster: &NatsCluster,
        _plans: &[ServerPlan],
    ) -> Result<Applied, LifecycleError> {
        // Nothing is shared between local processes but the root directory.
        let dir = self.local_layout(cluster).root;
        std::fs::create_dir_all(&dir).map_err(|e| {
            failed(
                "create directory",
                key(cluster),
                format!("{}: {e}", dir.display()),
            )
        })?;
        Ok(Applied::default())
    }

    async fn write_config(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> Result<Applied, LifecycleError> {
        let dir = self.local_layout(cluster).server_dir(server.ordinal);
        write_server_files(&dir, server)?;
        Ok(Applied::default())
    }

    async fn apply_server(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> Result<Applied, LifecycleError> {
        let layout = self.local_layout(cluster);
        let dir = layout.server_dir(server.ordinal);
        let monitor = layout.ports(server.ordinal).monitor;
        let binary = self.resolve(cluster)?;
        let object = format!("server {}", server.plan.server_name);
        let entry = self.server_entry(
            cluster,
            &server.plan,
            server.ordinal,
            &binary,
            &server.revision,
        );
        let mut guard = entry.local.lock().await;
        let local = &mut *guard;
        entry.revive(local, &dir, monitor).await?;
        let current = local
            .running
            .as_ref()
            .is_some_and(|r| r.revision == server.revision && r.binary == binary);
        write_server_files(&dir, server)?;
        local.revision = server.revision.clone();
        local.binary = binary.clone();
        local.dir = dir.clone();
        local.monitor = monitor;
        local.pid_file = server.plan.pid_file.clone();
        if current {
            return Ok(Applied::default());
        }
        let restart = match local.running.take() {
            Some(r) => {
                entry.pid.store(0, Ordering::SeqCst);
                log(&self.events, &entry.server_name, LocalEvent::LameDuck);
                stop(r, &local.pid_file, &object).await?;
                true
            }
            None => false,
        };
        let r = start(&dir, &binary, &server.revision, monitor, &object).await?;
        entry.started(local, r);
        if restart {
            entry.restarted();
            log(&self.events, &entry.server_name, LocalEvent::Restarted);
        } else {
            log(&self.events, &entry.server_name, LocalEvent::Started);
        }
        Ok(Applied::default())
    }

    async fn delete_server(
        &self,
        cluster: &NatsCluster,
        ordinal: u32,
        remove_storage: bool,
    ) -> Result<Applied, LifecycleError> {
        let dir = self.local_layout(cluster).server_dir(ordinal);
        let entry = self.state(|m| {
            m.get_mut(&key(cluster))
                .and_then(|s| s.servers.remove(&ordinal))
        });
        let object = format!("{} server {ordinal}", key(cluster));
        if let Some(entry) = entry {
            let mut local = entry.local.lock().await;
            // Deleted: nothing revives it, even through an entry read before its removal.
            local.dir = PathBuf::new();
            entry.pid.store(0, Ordering::SeqCst);
            if let Some(r) = local.running.take() {
                stop(r, &local.pid_file, &object).await?;
            }
            log(&self.events, &entry.server_name, LocalEvent::Deleted);
        }
        let gone = if remove_storage {
            std::fs::remove_dir_all(&dir)
        } else {
            // The config goes with the workload; the store stays, as a PVC would.
            std::fs::remove_file(dir.join(CONFIG_FILE))
        };
        match gone {
            Ok(()) => Ok(Applied::default()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Applied::default()),
            Err(e) => Err(failed("remove", object, format!("{}: {e}", dir.display()))),
        }
    }

    async fn observe(&self, cluster: &NatsCluster) -> Result<Vec<ObservedServer>, LifecycleError> {
        let layout = self.local_layout(cluster);
        let servers: Vec<(u32, Arc<Entry>)> = self.state(|m| {
            m.get(&key(cluster))
                .map(|s| s.servers.iter().map(|(o, l)| (*o, l.clone())).collect())
                .unwrap_or_default()
        });
        let mut out = Vec::with_capacity(servers.len());
        for (ordinal, entry) in servers {
            let monitor = layout.ports(ordinal).monitor;
            // A server being restarted is observed as it stands, without waiting for the restart;
            // a lock held only for a moment (another observer, the supervisor, a config write)
            // is waited for, or that moment would read as a server down.
            let (running, revision) =
                match tokio::time::timeout(BRIEF_HOLD, entry.local.lock()).await {
                    Ok(mut guard) => {
                        let local = &mut *guard;
                        if let Err(e) = entry
                            .revive(local, &layout.server_dir(ordinal), monitor)
                            .await
                        {
                            tracing::warn!(error = %e, "a server that exited did not start again");
                        }
                        (
                            local.running.is_some(),
                            local.running.as_ref().map(|r| r.revision.clone()),
                        )
                    }
                    Err(_) => (false, None),
                };
            let ready = running && http_status(monitor, "/healthz").await == Some(200);
            out.push(ObservedServer {
                ordinal,
                server_name: entry.server_name.clone(),
                present: true,
                ready,
                revision,
                restarts: entry.restarts.load(Ordering::SeqCst),
                volume: entry.volume.clone(),
            });
        }
        Ok(out)
    }

    async fn stored_plan(
        &self,
        cluster: &NatsCluster,
        ordinal: u32,
        revision: &str,
    ) -> Option<ServerPlan> {
        read_plan(&self.local_layout(cluster).server_dir(ordinal), revision)
    }

    fn address(&self, cluster: &NatsCluster, ordinal: u32) -> ServerAddress {
        let ports = self.local_layout(cluster).ports(ordinal);
        ServerAddress {
            client_url: format!("nats://{LOCAL_HOST}:{}", ports.client),
            monitor_url: format!("http://{LOCAL_HOST}:{}", ports.monitor),
        }
    }

    fn endpoints(&self, _cluster: &NatsCluster, plan: &ServerPlan) -> Endpoints {
        local_endpoints(plan)
    }
}

/// The endpoints of a NATS cluster run as local processes: its first server's listeners on
/// the loopback address (there are no Services, so no DNS names to give).
fn local_endpoints(plan: &ServerPlan) -> Endpoints {
    let scheme = if plan.client_tls.is_some() {
        "tls"
    } else {
        "nats"
    };
    Endpoints {
        client: Some(format!("{scheme}://{LOCAL_HOST}:{}", plan.client.port)),
        monitor: Some(format!("http://{LOCAL_HOST}:{}", plan.monitor.port)),
        gateway: plan.gateway.as_ref().map(|gw| {
            gw.advertise
                .clone()
                .unwrap_or_else(|| format!("nats://{LOCAL_HOST}:{}", gw.listen.port))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::spec;
    use crate::plan::{ClusterInputs, KubernetesLayout, plan_servers};

    #[test]
    fn local_endpoints_are_the_first_servers_loopback_listeners() {
        let s = spec("version: 2.15.1\nreplicas: 3\n");
        let mut p = plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: &s,
                trust: None,
                account_preloads: vec![],
                leaf_remotes: vec![],
            },
            &KubernetesLayout {
                name: "demo".into(),
                namespace: "nats".into(),
                cluster_domain: "cluster.local".into(),
            },
        )
        .expect("plans")
        .remove(0);
        p.client.port = 40001;
        p.monitor.port = 40002;
        let e = local_endpoints(&p);
        assert_eq!(e.client.as_deref(), Some("nats://127.0.0.1:40001"));
        assert_eq!(e.monitor.as_deref(), Some("http://127.0.0.1:40002"));
        assert_eq!(e.gateway, None, "no gateway planned");
        assert!(
            !format!("{e:?}").contains(".svc"),
            "no Kubernetes DNS name: {e:?}"
        );
    }
}
