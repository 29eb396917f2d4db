//! `sim up`: the controllers to try without a cluster. A real kube-apiserver with the CRDs, the
//! three controllers running against it (the cluster controller on the local server lifecycle, so
//! a NatsCluster becomes nats-server processes on loopback), a kubeconfig for kubectl, and a live
//! log of what happens, until Ctrl-C (or `sim down` from another shell) stops it all.
//!
//! A NatsConnection names a NatsCluster by its Service (`nats://demo.nats.svc:4222`), as it does in
//! Kubernetes; here no DNS knows that name, so the process resolves the Service names of its
//! local NatsClusters itself ([`crate::local::names`]).
//!
//! Everything lives under one directory (default `target/sim-up` of the checkout): the pid file,
//! the kubeconfig, the apiserver's etcd data and certificates, every server's config, data and
//! log. It is removed when `sim up` stops.
//!
//! The pass: [`prepare`] the directory (refusing one a live `sim up` holds), [`start`] the host,
//! [`announce`] the kubeconfig and the next commands, [`watch`] until a signal, [`stop`].

mod down;
pub mod log;
pub mod platform_pki;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams};

use crate::control_plane::{Host, HostError, auth_controller_with_system_connection};
use crate::local::ServerLifecycleEvent;

pub use down::{Down, down, left_behind, running, sweep};

/// The pid file of a running `sim up`, in its directory.
pub const PID_FILE: &str = "sim-up.pid";
/// The admin kubeconfig, in its directory.
pub const KUBECONFIG: &str = "kubeconfig";
/// How often the log looks again.
const LOOK_EVERY: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum UpError {
    #[error(
        "a sim up is already running in {dir} (pid {pid}); stop it with `sim down --dir {dir}`"
    )]
    AlreadyRunning { dir: PathBuf, pid: u32 },
    #[error("{path}: {source}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Host(#[from] HostError),
    #[error(transparent)]
    Names(#[from] nats_wire::names::NamesAlreadySet),
    #[error("listening for Ctrl-C and SIGTERM: {0}")]
    Signal(#[source] std::io::Error),
    #[error(transparent)]
    Pki(#[from] platform_pki::PkiError),
    #[error("--system-connection {0:?} is not namespace/name")]
    BadSystemConnection(String),
}

/// What `sim up` runs.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Where everything lives.
    pub dir: PathBuf,
    /// The auth controller's system connection (`--system-connection` of the binary), as
    /// `namespace/name`; story 02's is `nats-system/auth`.
    pub system_connection: String,
}

/// The default directory: `target/sim-up` of the checkout this binary was built from.
pub fn default_dir() -> PathBuf {
    crate::checkout::path("target/sim-up")
}

/// Runs `sim up` until Ctrl-C or SIGTERM; `out` takes every line it prints.
pub async fn run(opts: &UpOptions, out: &mut dyn FnMut(&str)) -> Result<(), UpError> {
    // First: a Ctrl-C from here on stops what started, never leaves it running.
    let mut signals = Signals::listen()?;
    let dir = prepare(&opts.dir)?;
    let result = async {
        out("starting kube-apiserver 1.20 + etcd, the CRDs and the three controllers");
        let host = tokio::select! {
            host = start(&dir, opts) => host?,
            _ = signals.recv() => return Ok(()),
        };
        announce(&host, &dir, opts, out)?;
        let pki = platform_pki::Pki::new()?;
        watch(&host, pki, &mut signals, out).await;
        stop(host, out);
        Ok(())
    }
    .await;
    // Whatever happened, nothing of this run stays behind.
    let _ = std::fs::remove_file(dir.join(PID_FILE));
    let _ = std::fs::remove_file(dir.join(KUBECONFIG));
    sweep(&dir);
    let _ = std::fs::remove_dir(&dir);
    result
}

/// The directory, made absolute and empty but for this process's pid file; a live `sim up` there
/// is refused, the leftovers of a dead one are cleared.
pub fn prepare(dir: &Path) -> Result<PathBuf, UpError> {
    let dir = down::absolute(dir)?;
    if let Some(pid) = running(&dir) {
        return Err(UpError::AlreadyRunning { dir, pid });
    }
    sweep(&dir);
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |source| UpError::Dir { path, source }
    };
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(UpError::Dir { path: dir, source }),
    }
    std::fs::create_dir_all(&dir).map_err(failed(&dir))?;
    let pid = dir.join(PID_FILE);
    std::fs::write(&pid, format!("{}\n", std::process::id())).map_err(failed(&pid))?;
    Ok(dir)
}

/// The apiserver with the CRDs and the three controllers, and the Service names resolved.
pub async fn start(dir: &Path, opts: &UpOptions) -> Result<Host, UpError> {
    let (ns, name) = opts
        .system_connection
        .split_once('/')
        .filter(|(n, m)| !n.is_empty() && !m.is_empty())
        .ok_or_else(|| UpError::BadSystemConnection(opts.system_connection.clone()))?;
    let host = Host::start_in(dir, &[], &["cluster", "jetstream"]).await?;
    host.add_controller("auth", auth_controller_with_system_connection(ns, name));
    nats_wire::names::resolve_names_with(host.server_lifecycle().service_names())?;
    Ok(host)
}

/// Writes the kubeconfig and says how to use it.
fn announce(
    host: &Host,
    dir: &Path,
    opts: &UpOptions,
    out: &mut dyn FnMut(&str),
) -> Result<(), UpError> {
    let kubeconfig = dir.join(KUBECONFIG);
    std::fs::copy(host.api().kubeconfig(), &kubeconfig).map_err(|source| UpError::Dir {
        path: kubeconfig.clone(),
        source,
    })?;
    let checkout = default_dir()
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    out(&format!(
        "sim up: kube-apiserver 1.20 at {} with the CRDs; controllers: cluster (servers as local \
         nats-server processes), auth (system connection {}), jetstream",
        host.api().url(),
        opts.system_connection
    ));
    out(&format!(
        "state: {} (Ctrl-C stops everything; or `sim down` from another shell)",
        dir.display()
    ));
    out("");
    out(&format!("  export KUBECONFIG={}", kubeconfig.display()));
    if let Some(kubectl) = crate::apiserver::kubectl()
        && which("kubectl").is_none()
        && let Some(bin) = kubectl.parent()
    {
        out(&format!("  export PATH={}:$PATH", bin.display()));
    }
    out(&format!(
        "  kubectl apply -f {}",
        checkout
            .join("docs/stories/01-quickstart/01-natscluster.yaml")
            .display()
    ));
    out("  kubectl get natsclusters -A -w");
    out("");
    out(
        "image, resources and volume claims of a NatsCluster are not used here: its servers are processes",
    );
    Ok(())
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}

/// Ctrl-C (SIGINT) and SIGTERM, caught.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> Result<Self, UpError> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt()).map_err(UpError::Signal)?,
            terminate: signal(SignalKind::terminate()).map_err(UpError::Signal)?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// Prints what happens, one line each, until Ctrl-C or SIGTERM.
async fn watch(
    host: &Host,
    pki: platform_pki::Pki,
    signals: &mut Signals,
    out: &mut dyn FnMut(&str),
) {
    let mut seen = Seen::new(pki);
    loop {
        for (at, line) in seen.look(host).await {
            out(&format!("{} {line}", at.format("%H:%M:%S")));
        }
        tokio::select! {
            _ = signals.recv() => return,
            _ = tokio::time::sleep(LOOK_EVERY) => {}
        }
    }
}

/// Stops the controllers, then the servers, then the apiserver.
fn stop(host: Host, out: &mut dyn FnMut(&str)) {
    out("stopping: controllers, servers, apiserver");
    drop(host);
    out("stopped");
}

/// What the log has said so far, and the PKI stand-in it runs at each look.
struct Seen {
    pki: platform_pki::Pki,
    objects: log::Objects,
    /// Events by uid, at the count last said.
    events: std::collections::BTreeMap<String, i32>,
    servers: usize,
}

/// A line of the log and when it happened.
type Line = (chrono::DateTime<chrono::Local>, String);

impl Seen {
    fn new(pki: platform_pki::Pki) -> Self {
        Self {
            pki,
            objects: log::Objects::new(),
            events: std::collections::BTreeMap::new(),
            servers: 0,
        }
    }

    /// What happened since the last look, in the order it happened: a server's start or restart
    /// and an Event at their own times, a condition seen changed now.
    async fn look(&mut self, host: &Host) -> Vec<Line> {
        let now = chrono::Local::now();
        let mut lines: Vec<Line> = Vec::new();
        let events: Vec<ServerLifecycleEvent> = host.server_lifecycle().events();
        let instant = std::time::Instant::now();
        lines.extend(events.iter().skip(self.servers).map(|e| {
            let ago = chrono::Duration::from_std(instant.saturating_duration_since(e.at))
                .unwrap_or_default();
            (now - ago, log::server_line(e))
        }));
        self.servers = events.len();
        if let Some((objects, clusters)) = custom_objects(host).await {
            lines.extend(
                log::changes(&self.objects, &objects)
                    .into_iter()
                    .map(|l| (now, l)),
            );
            self.objects = objects;
            let issued = self.pki.issue_missing(&host.client(), &clusters).await;
            lines.extend(issued.into_iter().map(|l| (now, l)));
        }
        lines.extend(self.new_events(host, now).await);
        lines.sort_by_key(|(at, _)| *at);
        lines
    }

    async fn new_events(&mut self, host: &Host, now: chrono::DateTime<chrono::Local>) -> Vec<Line> {
        use k8s_openapi::api::core::v1::Event;
        let Ok(list) = Api::<Event>::all(host.client())
            .list(&ListParams::default())
            .await
        else {
            return Vec::new();
        };
        let mut lines = Vec::new();
        for e in list.items {
            let uid = e.metadata.uid.clone().unwrap_or_default();
            let count = e.count.unwrap_or(1);
            if self.events.get(&uid) == Some(&count) {
                continue;
            }
            self.events.insert(uid, count);
            let o = &e.involved_object;
            let object = format!(
                "{} {}/{}",
                o.kind.as_deref().unwrap_or("?"),
                o.namespace.as_deref().unwrap_or("-"),
                o.name.as_deref().unwrap_or("?")
            );
            let at = e
                .event_time
                .as_ref()
                .map(|t| t.0)
                .or_else(|| e.last_timestamp.as_ref().map(|t| t.0))
                .and_then(|t| {
                    chrono::DateTime::from_timestamp(
                        t.as_second(),
                        t.subsec_nanosecond().max(0) as u32,
                    )
                })
                .map(|t| t.with_timezone(&chrono::Local))
                .filter(|t| *t <= now)
                .unwrap_or(now);
            lines.push((
                at,
                log::event_line(
                    &object,
                    e.type_.as_deref().unwrap_or("Normal"),
                    e.reason.as_deref().unwrap_or(""),
                    e.message.as_deref().unwrap_or(""),
                ),
            ));
        }
        lines
    }
}

/// Every object of the project's kinds with its conditions, and the NatsClusters among them (for
/// the PKI stand-in); `None` when a list failed (the next look tries again rather than
/// reporting everything deleted).
async fn custom_objects(host: &Host) -> Option<(log::Objects, Vec<DynamicObject>)> {
    let mut objects = log::Objects::new();
    let mut clusters = Vec::new();
    for crd in nats_api::crds::all() {
        let ar = crate::apiserver::crd_api_resource(&crd);
        let list = Api::<DynamicObject>::all_with(host.client(), &ar)
            .list(&ListParams::default())
            .await
            .ok()?;
        for o in list.items {
            let key = format!(
                "{} {}/{}",
                crd.spec.names.kind,
                o.metadata.namespace.as_deref().unwrap_or("-"),
                o.metadata.name.as_deref().unwrap_or("?")
            );
            objects.insert(key, conditions(&o.data));
            if crd.spec.names.kind == "NatsCluster" {
                clusters.push(o);
            }
        }
    }
    Some((objects, clusters))
}

fn conditions(data: &serde_json::Value) -> std::collections::BTreeMap<String, log::Condition> {
    let s = |c: &serde_json::Value, k: &str| c[k].as_str().unwrap_or_default().to_string();
    data.pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .map(|all| {
            all.iter()
                .map(|c| {
                    (
                        s(c, "type"),
                        log::Condition {
                            status: s(c, "status"),
                            reason: s(c, "reason"),
                            message: s(c, "message"),
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}
