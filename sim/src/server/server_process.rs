//! A nats-server process as the sim starts it, whoever drives it: `binary -c <dir>/nats.conf`
//! with stdout and stderr appended to `<dir>/server.log`, waited for until it answers, signalled
//! through its own CLI (`--signal ldm=<pidfile>`), waited for at exit, and killed by PID when
//! the value drops (also on panic). [`Server`](super::Server) is built on it, and so is the
//! local server lifecycle ([`crate::local`]).

use std::fs::OpenOptions;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The config file inside a server's directory.
pub const CONFIG_FILE: &str = "nats.conf";
/// The log inside a server's directory: stdout and stderr of every run, appended.
pub const LOG_FILE: &str = "server.log";
/// How often an exit is looked for.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// Why a process could not be spawned.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("opening log {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting {binary}: {source}")]
    Start {
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Why a spawned process is not up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotStarted {
    /// It exited, with this status.
    Exited(String),
    /// It runs but did not answer before the deadline.
    Silent,
}

/// One running nats-server process.
#[derive(Debug)]
pub struct Process {
    child: Child,
    /// The log's length when this run began: where its own lines start.
    log_start: u64,
}

impl Process {
    /// Spawns `binary -c <dir>/nats.conf`, stdin closed, stdout and stderr appended to
    /// `<dir>/server.log`; in `cwd` when one is given, else in the caller's directory.
    pub fn spawn(binary: &Path, dir: &Path, cwd: Option<&Path>) -> Result<Self, SpawnError> {
        let log_path = dir.join(LOG_FILE);
        let log_error = |source| SpawnError::Log {
            path: log_path.clone(),
            source,
        };
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(log_error)?;
        let log_err = log.try_clone().map_err(log_error)?;
        let log_start = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
        let mut command = Command::new(binary);
        command
            .arg("-c")
            .arg(dir.join(CONFIG_FILE))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        // A process group of its own: a Ctrl-C at the terminal reaches the sim alone, which stops
        // its servers in order (a server that took the SIGINT too would be revived meanwhile).
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        let child = command.spawn().map_err(|source| SpawnError::Start {
            binary: binary.to_path_buf(),
            source,
        })?;
        Ok(Process { child, log_start })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where this run's lines begin in the server's log.
    pub fn log_start(&self) -> u64 {
        self.log_start
    }

    /// The exit status, once the process has exited (reaping it).
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("unknown ({e})")),
        }
    }

    /// Polls `ready` every `every` until it says yes, the process exits, or `within` passes.
    pub async fn wait_started<F, Fut>(
        &mut self,
        within: Duration,
        every: Duration,
        mut ready: F,
    ) -> Result<(), NotStarted>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(status) = self.exited() {
                return Err(NotStarted::Exited(status));
            }
            if ready().await {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(NotStarted::Silent);
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Waits (polling) until the process has exited by itself; false when `within` passed first.
    pub async fn wait_exit(&mut self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.exited().is_some() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(EXIT_POLL).await;
        }
    }

    /// Sends SIGKILL and returns at once; the exit is reaped by a later look or the drop.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// SIGKILL (which also ends a SIGSTOPped process) and wait for the exit.
    pub fn kill_and_reap(mut self) {
        self.reap();
    }

    fn reap(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.reap();
    }
}

/// `binary --signal <what>=<pid_file>`: a signal through the server's own CLI (`ldm` for lame
/// duck, `reload`), stdin and stdout closed, stderr kept for the error. Run it with `output()`,
/// or through `tokio::process::Command::from` where blocking is not wanted.
pub fn signal_command(binary: &Path, what: &str, pid_file: &Path) -> Command {
    let mut command = Command::new(binary);
    command
        .arg("--signal")
        .arg(format!("{what}={}", pid_file.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// The last `lines` lines of the log `path` from byte `from` on.
pub fn log_tail(path: &Path, from: u64, lines: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let start = (from as usize).min(text.len());
    let tail = String::from_utf8_lossy(&text[start..]).to_string();
    let all: Vec<&str> = tail.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
