//! One local server's process, on [`crate::server::server_process`]: started until its monitoring port
//! answers, stopped the way a pod's preStop does it (lame duck, wait for exit, SIGKILL at the
//! deadline), started again when it exited on its own (the kubelet's restart).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cluster_controller::rollout::volume::ClaimShape;
use cluster_controller::server_lifecycle::ServerLifecycleError;

use super::events::{EventLog, log};
use super::failed;
use super::layout::LOCAL_HOST;
use crate::server::events::LocalEvent;
use crate::server::server_process::{
    LOG_FILE, NotStarted, Process, SpawnError, log_tail, signal_command,
};

/// How long a lame-duck server may take to exit before it is killed: the rendered lame-duck
/// duration (2m) plus its grace and some slack.
pub const EXIT_DEADLINE: Duration = Duration::from_secs(150);
/// How long a started process may take before its monitoring port answers at all.
pub const START_DEADLINE: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);
const HEALTHZ_TIMEOUT: Duration = Duration::from_secs(1);
/// How many lines of a server's log an error carries.
const TAIL_LINES: usize = 15;

/// A server process this implementation started.
pub(super) struct Running {
    pub(super) process: Process,
    pub(super) binary: PathBuf,
    pub(super) revision: String,
}

impl Running {
    pub(super) fn kill(&mut self) {
        self.process.kill();
    }
}

/// What is known of one server: its process (absent once deleted or between a stop and a
/// start) and how often it was (re)started after the first start.
pub(super) struct Local {
    pub(super) server_name: String,
    pub(super) pid_file: String,
    pub(super) running: Option<Running>,
    /// The revision last applied; the process comes back under it if it dies.
    pub(super) revision: String,
    pub(super) binary: PathBuf,
    /// Where it runs and what answers for it, for a revival without the cluster at hand.
    pub(super) dir: PathBuf,
    pub(super) monitor: u16,
}

/// One server: its process behind a lock held for a whole start or restart, and what an
/// observer reads without waiting for that lock.
pub(super) struct Entry {
    pub(super) server_name: String,
    /// The claim its store stands for, as of its creation: like a StatefulSet's claim
    /// template, only a replacement (delete, then create) changes it.
    pub(super) volume: Option<ClaimShape>,
    pub(super) local: tokio::sync::Mutex<Local>,
    pub(super) restarts: AtomicU32,
    pub(super) pid: AtomicU32,
    pub(super) events: EventLog,
}

/// Asks a local server's monitoring port how it is, one request per connection.
#[derive(Clone, Debug)]
pub(super) struct Monitor(reqwest::Client);

impl Monitor {
    pub(super) fn new() -> Self {
        Monitor(
            reqwest::Client::builder()
                .timeout(HEALTHZ_TIMEOUT)
                .no_proxy()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap_or_default(),
        )
    }

    /// The status code `/healthz` on `port` answers with, if anything answers.
    pub(super) async fn healthz(&self, port: u16) -> Option<u16> {
        let url = format!("http://{LOCAL_HOST}:{port}/healthz");
        let response = self.0.get(url).send().await.ok()?;
        Some(response.status().as_u16())
    }
}

/// The tail of a server's log, for errors.
fn tail(dir: &Path) -> String {
    log_tail(&dir.join(LOG_FILE), 0, TAIL_LINES)
}

/// Starts the server in `dir` and waits until its monitoring port answers anything (healthz may
/// say 503 until the JetStream meta group forms, which needs the peers).
pub(super) async fn start(
    dir: &Path,
    binary: &Path,
    revision: &str,
    monitor: u16,
    http: &Monitor,
    object: &str,
) -> Result<Running, ServerLifecycleError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        failed(
            "create directory",
            object,
            format!("{}: {e}", dir.display()),
        )
    })?;
    let mut process = Process::spawn(binary, dir, Some(dir)).map_err(|e| match e {
        SpawnError::Log { source, .. } => failed("open log", object, source),
        SpawnError::Start { binary, source } => {
            failed("start", object, format!("{}: {source}", binary.display()))
        }
    })?;
    let answers = || async { http.healthz(monitor).await.is_some() };
    match process.wait_started(START_DEADLINE, POLL, answers).await {
        Ok(()) => Ok(Running {
            process,
            binary: binary.to_path_buf(),
            revision: revision.to_string(),
        }),
        Err(NotStarted::Exited(status)) => Err(failed(
            "start",
            object,
            format!("exited with {status}; log:\n{}", tail(dir)),
        )),
        Err(NotStarted::Silent) => {
            process.kill();
            Err(failed(
                "start",
                object,
                format!(
                    "monitoring port {monitor} silent after {START_DEADLINE:?}; log:\n{}",
                    tail(dir)
                ),
            ))
        }
    }
}

/// Lame duck through the pid file, wait for exit, SIGKILL at the deadline.
pub(super) async fn stop(mut running: Running, pid_file: &str, object: &str) {
    if running.process.exited().is_some() {
        return;
    }
    let lame_duck = signal_command(&running.binary, "ldm", Path::new(pid_file));
    let signalled = tokio::process::Command::from(lame_duck).output().await;
    let ok = matches!(&signalled, Ok(o) if o.status.success());
    if !ok {
        // Without lame duck the server still has to go: kill it and say nothing worse.
        tracing::warn!(
            server = object,
            ?signalled,
            "lame-duck signal failed, killing"
        );
        running.process.kill();
    }
    if !running.process.wait_exit(EXIT_DEADLINE).await {
        running.process.kill_and_reap();
        tracing::warn!(server = object, "not gone within {EXIT_DEADLINE:?}, killed");
    }
}

impl Entry {
    pub(super) fn started(&self, local: &mut Local, running: Running) {
        self.pid.store(running.process.pid(), Ordering::SeqCst);
        local.running = Some(running);
    }

    pub(super) fn restarted(&self) {
        self.restarts.fetch_add(1, Ordering::SeqCst);
    }

    /// Starts the process again if it exited on its own (the kubelet's restart), or if it was
    /// placed but is not running: a start its caller abandoned — a controller stopped mid-step
    /// or mid-revive drops the process it was starting — which a kubelet would still carry out.
    pub(super) async fn revive(
        &self,
        local: &mut Local,
        dir: &Path,
        monitor: u16,
        http: &Monitor,
    ) -> Result<(), ServerLifecycleError> {
        let exited = match local.running.as_mut() {
            Some(r) => r.process.exited().is_some(),
            None => !local.dir.as_os_str().is_empty() && !dir.as_os_str().is_empty(),
        };
        if exited {
            local.running = None;
            self.pid.store(0, Ordering::SeqCst);
            let object = format!("server {}", local.server_name);
            tracing::info!(server = %local.server_name, "exited on its own, starting again");
            let r = start(dir, &local.binary, &local.revision, monitor, http, &object).await?;
            self.started(local, r);
            self.restarted();
            log(
                &self.events,
                &self.server_name,
                LocalEvent::Revived,
                Some(&local.revision),
            );
        }
        Ok(())
    }
}
