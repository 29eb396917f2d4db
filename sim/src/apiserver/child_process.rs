//! A child process that is killed by PID when dropped, with its output in a log file.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

use super::ApiServerError;

/// A running process owned by an [`super::ApiServer`]; dropping it kills and reaps it.
#[derive(Debug)]
pub struct Proc {
    pub name: &'static str,
    pub log: PathBuf,
    child: Child,
}

impl Proc {
    /// Starts `program args…` with stdout and stderr appended to `log`.
    pub fn spawn(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: PathBuf,
    ) -> Result<Self, ApiServerError> {
        let out = File::create(&log).map_err(|source| ApiServerError::Io {
            what: "create a process log",
            path: log.clone(),
            source,
        })?;
        let err = out.try_clone().map_err(|source| ApiServerError::Io {
            what: "duplicate a process log handle",
            path: log.clone(),
            source,
        })?;
        let mut command = Command::new(program);
        // A process group of its own: a Ctrl-C at the terminal reaches the sim alone, which stops
        // the servers in order.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| ApiServerError::Spawn {
                what: name,
                program: program.to_path_buf(),
                source,
            })?;
        Ok(Self { name, log, child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last `lines` lines of the process log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }
}

impl Proc {
    /// SIGKILL by PID, then reap; a no-op once the process is gone.
    pub fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // So no test leaves a server behind, whether it passed, failed or panicked.
        self.kill();
    }
}

pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `n` distinct free TCP ports on 127.0.0.1. All listeners are held until every port is picked so the
/// same port is not handed out twice; another process may still take one before the server binds it,
/// which the caller handles by retrying with fresh ports.
pub fn free_ports<const N: usize>() -> Result<[u16; N], ApiServerError> {
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    for port in &mut ports {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|source| ApiServerError::Io {
            what: "bind a free port",
            path: PathBuf::from("127.0.0.1:0"),
            source,
        })?;
        *port = listener
            .local_addr()
            .map_err(|source| ApiServerError::Io {
                what: "read a bound port",
                path: PathBuf::from("127.0.0.1:0"),
                source,
            })?
            .port();
        listeners.push(listener);
    }
    Ok(ports)
}
