//! A test's side of the pool: ask for a pair booted over a seed, hold the connection while the
//! test uses it, and let go by closing it (the process's exit closes it too, however the test
//! ended). A test that panics asks the pool to retire the pair instead: its logs are the
//! evidence, and a pair left as a failing test left it is not lent again.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

use super::{Answer, Granted, Request};
use crate::apiserver::ApiServerError;

/// How long a panicking test waits for the pool to say where it kept the logs.
const RETIRE_WAIT: Duration = Duration::from_secs(30);

/// A pair lent to this process until the lease is dropped.
#[derive(Debug)]
pub(crate) struct Lease {
    socket: PathBuf,
    stream: UnixStream,
    granted: Granted,
}

impl Lease {
    /// Asks the pool at `socket` for a pair booted over the seed `seed` (the pool boots one
    /// where none is free); returns once the pair is ready and this process's.
    pub(crate) async fn take(socket: &Path, seed: &Path) -> Result<Self, ApiServerError> {
        let failed = |what: String| ApiServerError::Pool {
            socket: socket.to_path_buf(),
            what,
        };
        let mut stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|e| failed(format!("connect: {e}")))?;
        let mut line = serde_json::to_string(&Request {
            seed: seed.to_path_buf(),
        })
        .map_err(|e| failed(e.to_string()))?;
        line.push('\n');
        stream
            .write_all(line.as_bytes())
            .await
            .map_err(|e| failed(format!("ask: {e}")))?;
        let mut answer = String::new();
        let mut reader = tokio::io::BufReader::new(&mut stream);
        reader
            .read_line(&mut answer)
            .await
            .map_err(|e| failed(format!("read the answer: {e}")))?;
        let granted = match serde_json::from_str::<Answer>(&answer) {
            Ok(Answer::Granted(g)) => g,
            Ok(Answer::Refused(why)) => return Err(failed(why)),
            Err(e) => return Err(failed(format!("the answer {answer:?}: {e}"))),
        };
        let stream = stream
            .into_std()
            .and_then(|s| s.set_nonblocking(false).map(|()| s))
            .map_err(|e| failed(format!("hold the connection: {e}")))?;
        Ok(Lease {
            socket: socket.to_path_buf(),
            stream,
            granted,
        })
    }

    /// The pair's instance directory (its kubeconfig, PKI and logs).
    pub(crate) fn root(&self) -> &Path {
        &self.granted.root
    }

    pub(crate) fn url(&self) -> &str {
        &self.granted.url
    }

    /// PIDs of (etcd, server).
    pub(crate) fn pids(&self) -> (u32, u32) {
        (self.granted.etcd_pid, self.granted.server_pid)
    }

    /// Where this lease's part of the audit log starts (bytes).
    pub(crate) fn audit_from(&self) -> u64 {
        self.granted.audit_from
    }

    /// Asks the pool to stop the pair and keep its directory; where it kept it.
    fn retire(&mut self) -> std::io::Result<String> {
        self.stream.write_all(b"retire\n")?;
        self.stream.set_read_timeout(Some(RETIRE_WAIT))?;
        let mut kept = String::new();
        BufReader::new(&self.stream).read_line(&mut kept)?;
        Ok(kept.trim().to_owned())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // A failing test's pair: its logs kept, and the pair not lent again.
        if std::thread::panicking() {
            match self.retire() {
                Ok(kept) => eprintln!(
                    "kube-apiserver 1.20 (lent by the pool at {}) logs kept in {kept}; this \
                     test's part of its audit log starts at byte {}",
                    self.socket.display(),
                    self.granted.audit_from
                ),
                Err(e) => eprintln!(
                    "kube-apiserver 1.20 lent by the pool at {}: not retired ({e}); its \
                     directory {}",
                    self.socket.display(),
                    self.granted.root.display()
                ),
            }
        }
    }
}
