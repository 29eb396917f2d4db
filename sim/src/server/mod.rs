//! One nats-server of a sim topology: start, stop, signals, restart on the same store, wipe the
//! store, config edit + reload. Its process ([`server_process`], shared with the local server
//! server lifecycle) is killed by PID when this value drops (also on panic).

pub mod events;
pub mod server_process;

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use self::server_process::{CONFIG_FILE, LOG_FILE, NotStarted, Process, SpawnError, log_tail};
use crate::nats_conf::ServerConfig;
use crate::wait;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("I/O on {path} for server {server}: {source}")]
    Io {
        server: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("server {server}: a port is already in use (log: {log_tail})")]
    PortInUse { server: String, log_tail: String },
    #[error("server {server} exited during start with {status}; log tail:\n{log_tail}")]
    ExitedAtStart {
        server: String,
        status: String,
        log_tail: String,
    },
    #[error("server {server} is not running")]
    NotRunning { server: String },
    #[error("sending {signal} to server {server} (pid {pid}): {source}")]
    Signal {
        server: String,
        signal: String,
        pid: u32,
        #[source]
        source: nix::Error,
    },
    #[error("`nats-server --signal {what}` for server {server} failed: {stderr}")]
    SignalCommand {
        server: String,
        what: String,
        stderr: String,
    },
    #[error("server {server}: {source}")]
    Wait {
        server: String,
        #[source]
        source: wait::WaitError,
    },
}

/// How the server's process is doing, as far as the sim knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    Running,
    Paused,
    Stopped,
}

pub struct Server {
    pub config: ServerConfig,
    /// Cluster this server belongs to (for a leaf: the leaf's own name).
    pub cluster: String,
    binary: PathBuf,
    dir: PathBuf,
    child: Option<Process>,
    paused: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.config.name)
            .field("pid", &self.pid())
            .field("state", &self.state())
            .finish()
    }
}

impl Server {
    /// A server that is not yet started; `dir` holds its config, log and store.
    pub fn new(binary: PathBuf, dir: PathBuf, cluster: String, config: ServerConfig) -> Self {
        Server {
            config,
            cluster,
            binary,
            dir,
            child: None,
            paused: false,
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn binary(&self) -> &Path {
        &self.binary
    }
    pub fn config_path(&self) -> PathBuf {
        self.dir.join(CONFIG_FILE)
    }
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }
    pub fn store_dir(&self) -> Option<&Path> {
        self.config
            .jetstream
            .as_ref()
            .map(|j| j.store_dir.as_path())
    }
    pub fn client_url(&self) -> String {
        format!("nats://{}:{}", self.config.host, self.config.port)
    }
    pub fn monitor_url(&self) -> String {
        format!("http://{}:{}", self.config.host, self.config.http_port)
    }
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Process::pid)
    }

    pub fn state(&self) -> ProcessState {
        match (&self.child, self.paused) {
            (None, _) => ProcessState::Stopped,
            (Some(_), true) => ProcessState::Paused,
            (Some(_), false) => ProcessState::Running,
        }
    }

    fn io(&self, path: &Path) -> impl FnOnce(std::io::Error) -> ServerError + use<> {
        let server = self.config.name.clone();
        let path = path.to_path_buf();
        move |source| ServerError::Io {
            server,
            path,
            source,
        }
    }

    /// Writes the rendered config to disk (used by start and by config edits).
    pub fn write_config(&self) -> Result<(), ServerError> {
        std::fs::create_dir_all(&self.dir).map_err(self.io(&self.dir))?;
        let path = self.config_path();
        std::fs::write(&path, self.config.render()).map_err(self.io(&path))
    }

    /// Starts the process and waits until it accepts client connections.
    pub async fn start(&mut self) -> Result<(), ServerError> {
        if self.child.is_some() {
            return Ok(());
        }
        self.write_config()?;
        let process = Process::spawn(&self.binary, &self.dir, None).map_err(|e| match e {
            SpawnError::Log { path, source } => self.io(&path)(source),
            SpawnError::Start { binary, source } => self.io(&binary)(source),
        })?;
        let log_len = process.log_start();
        let process = self.child.insert(process);
        self.paused = false;
        let addr = format!("{}:{}", self.config.host, self.config.port);
        let within = Duration::from_secs(30);
        let started = process
            .wait_started(within, Duration::from_millis(20), || async {
                tokio::net::TcpStream::connect(&addr).await.is_ok()
            })
            .await;
        let server = self.config.name.clone();
        match started {
            Ok(()) => Ok(()),
            Err(NotStarted::Exited(status)) => {
                self.child = None;
                let tail = self.log_since(log_len);
                Err(if tail.contains("address already in use") {
                    ServerError::PortInUse {
                        server,
                        log_tail: tail,
                    }
                } else {
                    ServerError::ExitedAtStart {
                        server,
                        status,
                        log_tail: tail,
                    }
                })
            }
            Err(NotStarted::Silent) => Err(ServerError::Wait {
                server,
                source: wait::WaitError {
                    what: format!("client port {addr} to accept"),
                    after: within,
                    last: self.log_since(log_len),
                },
            }),
        }
    }

    /// If the process has exited, forget it and return its exit status.
    fn try_reap(&mut self) -> Option<String> {
        let status = self.child.as_mut()?.exited()?;
        self.child = None;
        self.paused = false;
        Some(status)
    }

    /// Whether the process is alive (reaps it if it exited on its own).
    pub fn is_running(&mut self) -> bool {
        self.try_reap();
        self.child.is_some()
    }

    fn log_since(&self, offset: u64) -> String {
        log_tail(&self.log_path(), offset, 20)
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        self.log_since(0)
    }

    fn signal(&self, sig: Signal) -> Result<(), ServerError> {
        let pid = self.pid().ok_or_else(|| ServerError::NotRunning {
            server: self.config.name.clone(),
        })?;
        kill(Pid::from_raw(pid as i32), sig).map_err(|source| ServerError::Signal {
            server: self.config.name.clone(),
            signal: sig.to_string(),
            pid,
            source,
        })
    }

    /// kill -9: the process dies at once, nothing is flushed.
    pub fn kill9(&mut self) -> Result<(), ServerError> {
        self.signal(Signal::SIGKILL)?;
        self.reap_blocking();
        Ok(())
    }

    fn reap_blocking(&mut self) {
        if let Some(p) = self.child.take() {
            p.kill_and_reap();
        }
        self.paused = false;
    }

    /// Waits (polling, with a deadline) until the process has exited by itself.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Result<(), ServerError> {
        let Some(process) = self.child.as_mut() else {
            return Ok(());
        };
        if process.wait_exit(timeout).await {
            self.child = None;
            self.paused = false;
            return Ok(());
        }
        Err(ServerError::Wait {
            server: self.config.name.clone(),
            source: wait::WaitError {
                what: "process exit".to_string(),
                after: timeout,
                last: format!("pid {:?} still alive", self.pid()),
            },
        })
    }

    /// SIGTERM and wait for a clean exit.
    pub async fn sigterm(&mut self, timeout: Duration) -> Result<(), ServerError> {
        if self.paused {
            self.resume()?;
        }
        self.signal(Signal::SIGTERM)?;
        self.wait_exit(timeout).await
    }

    /// Lame duck through the server's own CLI (`nats-server --signal ldm=<pidfile>`); returns once the
    /// signal is delivered. The server steps its leaders down and exits when its clients are gone.
    pub fn lame_duck(&mut self) -> Result<(), ServerError> {
        self.signal_command("ldm")
    }

    /// Config reload through the CLI (`--signal reload=<pidfile>`).
    pub fn reload(&mut self) -> Result<(), ServerError> {
        self.signal_command("reload")
    }

    /// Config reload with SIGHUP.
    pub fn sighup(&mut self) -> Result<(), ServerError> {
        self.signal(Signal::SIGHUP)
    }

    fn signal_command(&self, what: &str) -> Result<(), ServerError> {
        if self.child.is_none() {
            return Err(ServerError::NotRunning {
                server: self.config.name.clone(),
            });
        }
        let out = server_process::signal_command(&self.binary, what, &self.config.pid_file)
            .output()
            .map_err(self.io(&self.binary))?;
        if !out.status.success() {
            return Err(ServerError::SignalCommand {
                server: self.config.name.clone(),
                what: format!("{what}={}", self.config.pid_file.display()),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }

    /// SIGSTOP: the process freezes (its sockets stay open, it answers nothing). Returns once
    /// every thread of it reads stopped in /proc (up to a second): `kill` returns before the
    /// threads stop, and a request in that moment was answered (seen in a gate run).
    pub fn pause(&mut self) -> Result<(), ServerError> {
        self.signal(Signal::SIGSTOP)?;
        self.paused = true;
        if let Some(pid) = self.pid() {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
            while !all_threads_stopped(pid) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        Ok(())
    }

    /// SIGCONT after [`Server::pause`].
    pub fn resume(&mut self) -> Result<(), ServerError> {
        self.signal(Signal::SIGCONT)?;
        self.paused = false;
        Ok(())
    }

    /// Stops the process (kill -9 if running) and starts it again on the same config and store.
    pub async fn restart(&mut self) -> Result<(), ServerError> {
        if self.child.is_some() {
            self.kill9()?;
        }
        self.start().await
    }

    /// Deletes the JetStream store. The server must be stopped (a live server would recreate files).
    pub fn wipe_store(&mut self) -> Result<(), ServerError> {
        if self.is_running() {
            return Err(ServerError::NotRunning {
                server: format!("{} (must be stopped to wipe its store)", self.config.name),
            });
        }
        if let Some(dir) = self.store_dir().map(Path::to_path_buf)
            && dir.exists()
        {
            std::fs::remove_dir_all(&dir).map_err(self.io(&dir))?;
        }
        Ok(())
    }

    /// Edits the config, rewrites the file and asks the running server to reload it.
    pub fn edit_and_reload(
        &mut self,
        edit: impl FnOnce(&mut ServerConfig),
    ) -> Result<(), ServerError> {
        edit(&mut self.config);
        self.write_config()?;
        self.reload()
    }
}

/// Whether every thread of process `pid` is stopped (state `T` in /proc/PID/task/TID/stat).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
            // The state follows the command name's closing parenthesis.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
                .is_some_and(|state| state == 'T' || state == 't')
        })
    })
}
