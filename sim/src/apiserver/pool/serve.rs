//! The pool's process: the socket, the run it serves, and each test's lease from the request to
//! the reset ([`super`] says why and how).

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep};

use super::reset::{self, Etcd, Snapshot};
use super::{Answer, ENV_POOL, Granted, Request};
use crate::apiserver::{ApiServer, ApiServerError, Flavor};

/// How long a booted pair's keys must stand still before they are its baseline.
const SETTLE: Duration = Duration::from_millis(500);
/// How long a pair may take to settle before it is taken as it is.
const SETTLE_DEADLINE: Duration = Duration::from_secs(20);
/// Resets tried before a pair is given up.
const RESET_TRIES: usize = 3;
/// How long the pool waits for a borrower to exit after it let go before giving the pair up.
const EXIT_DEADLINE: Duration = Duration::from_secs(600);
/// How long a request waits for a pair let go to be reset before booting one: a borrower lets go
/// as its process exits, so its reset follows at once, unless it let go early and runs on.
const RETURN_WAIT: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(50);
/// The socket's name in the pool's directory.
const SOCKET: &str = "pool.sock";

/// What can stop the pool itself.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("the pool's directory under {}: {source}", parent.display())]
    Dir {
        parent: PathBuf,
        source: std::io::Error,
    },
    #[error("listening on {}: {source}", socket.display())]
    Listen {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("no command to run under the pool")]
    NoCommand,
    #[error("running {command}: {source}")]
    Command {
        command: String,
        source: std::io::Error,
    },
}

/// A pair idle in the pool, with the seed it was booted over and its baseline.
struct Pooled {
    seed: PathBuf,
    server: ApiServer,
    baseline: Snapshot,
}

/// How the run used the pool (printed when it ends).
#[derive(Debug, Default)]
struct Tally {
    booted: usize,
    lent: usize,
    reset: usize,
    retired: usize,
    given_up: usize,
}

/// A test's view of a pool's counts.
#[cfg(test)]
#[derive(Clone)]
pub(crate) struct View(Arc<Shared>);

#[cfg(test)]
impl View {
    pub(crate) fn idle(&self) -> usize {
        self.0.idle.lock().map(|i| i.len()).unwrap_or(0)
    }

    fn tally(&self, f: impl Fn(&Tally) -> usize) -> usize {
        self.0.tally.lock().map(|t| f(&t)).unwrap_or(0)
    }

    pub(crate) fn booted(&self) -> usize {
        self.tally(|t| t.booted)
    }

    pub(crate) fn retired(&self) -> usize {
        self.tally(|t| t.retired)
    }
}

/// What the pool's lease tasks share.
struct Shared {
    root: PathBuf,
    idle: Mutex<Vec<Pooled>>,
    /// The seeds of the pairs being reset now (their borrowers gone), one entry a pair.
    resetting: Mutex<Vec<PathBuf>>,
    /// Told when a reset ends, the pair back or stopped.
    reset_done: Notify,
    tally: Mutex<Tally>,
}

impl Shared {
    fn count(&self, f: impl FnOnce(&mut Tally)) {
        if let Ok(mut t) = self.tally.lock() {
            f(&mut t);
        }
    }

    fn take_idle(&self, seed: &Path) -> Option<Pooled> {
        let mut idle = self.idle.lock().ok()?;
        let i = idle.iter().position(|p| p.seed == seed)?;
        Some(idle.swap_remove(i))
    }

    fn put_back(&self, pooled: Pooled) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(pooled);
        }
    }

    fn is_resetting(&self, seed: &Path) -> bool {
        self.resetting
            .lock()
            .map(|r| r.iter().any(|s| s == seed))
            .unwrap_or(false)
    }

    fn resetting(&self, seed: &Path, now: bool) {
        if let Ok(mut r) = self.resetting.lock() {
            if now {
                r.push(seed.to_path_buf());
            } else if let Some(i) = r.iter().position(|s| s == seed) {
                r.swap_remove(i);
            }
        }
        if !now {
            self.reset_done.notify_waiters();
        }
    }
}

/// Runs `command` with [`ENV_POOL`] naming a pool in a directory of its own under `parent`,
/// lends pairs to its tests until it exits, then stops every pair; the command's exit status.
pub async fn run(parent: &Path, command: &[String]) -> Result<ExitStatus, PoolError> {
    let (program, args) = command.split_first().ok_or(PoolError::NoCommand)?;
    let pool = Pool::open(parent)?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env(ENV_POOL, pool.socket())
        .spawn()
        .map_err(|source| PoolError::Command {
            command: command.join(" "),
            source,
        })?;
    let ended = async {
        let mut stop = Stop::listen();
        loop {
            tokio::select! {
                status = child.wait() => return status,
                // Asked to stop: the run first (it exits, and the pool ends with it), never the
                // pairs under a run still using them.
                () = stop.next() => {
                    if let Some(pid) = child.id() {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid as i32),
                            nix::sys::signal::Signal::SIGTERM,
                        );
                    }
                }
            }
        }
    };
    pool.serve_until(ended)
        .await
        .map_err(|source| PoolError::Command {
            command: command.join(" "),
            source,
        })
}

/// A pool listening, not yet serving.
pub(crate) struct Pool {
    dir: tempfile::TempDir,
    listener: UnixListener,
    shared: Arc<Shared>,
}

impl Pool {
    /// A pool in a directory of its own under `parent`, listening on its socket there.
    pub(crate) fn open(parent: &Path) -> Result<Self, PoolError> {
        let dir = tempfile::Builder::new()
            .prefix("nats-operators-apiserver-pool-")
            .tempdir_in(parent)
            .map_err(|source| PoolError::Dir {
                parent: parent.to_path_buf(),
                source,
            })?;
        let socket = dir.path().join(SOCKET);
        let listener = UnixListener::bind(&socket).map_err(|source| PoolError::Listen {
            socket: socket.clone(),
            source,
        })?;
        let shared = Arc::new(Shared {
            // The pairs' directories beside the pool's, not in it: a retired pair's is kept.
            root: parent.to_path_buf(),
            idle: Mutex::new(Vec::new()),
            resetting: Mutex::new(Vec::new()),
            reset_done: Notify::new(),
            tally: Mutex::new(Tally::default()),
        });
        Ok(Pool {
            dir,
            listener,
            shared,
        })
    }

    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.path().join(SOCKET)
    }

    /// The pool's counts, read while it serves.
    #[cfg(test)]
    pub(crate) fn view(&self) -> View {
        View(self.shared.clone())
    }

    /// Lends pairs until `until` ends, then stops every pair (the lent ones with their tasks,
    /// the idle ones here: each `ApiServer` kills its processes by PID when dropped), says how
    /// the run used the pool, and removes its directory; what `until` gave.
    pub(crate) async fn serve_until<T>(self, until: impl std::future::Future<Output = T>) -> T {
        let Pool {
            dir,
            listener,
            shared,
        } = self;
        let mut leases = JoinSet::new();
        tokio::pin!(until);
        let value = loop {
            tokio::select! {
                value = &mut until => break value,
                Ok((conn, _)) = listener.accept() => {
                    leases.spawn(lend(conn, shared.clone()));
                }
                Some(_) = leases.join_next(), if !leases.is_empty() => {}
            }
        };
        leases.shutdown().await;
        let idle = shared
            .idle
            .lock()
            .map(|mut idle| {
                let n = idle.len();
                idle.clear();
                n
            })
            .unwrap_or(0);
        if let Ok(t) = shared.tally.lock() {
            eprintln!(
                "apiserver pool: {} pairs booted, {} leases, {} resets, {} retired by a failing \
                 test, {} given up; {idle} stopped at the end",
                t.booted, t.lent, t.reset, t.retired, t.given_up
            );
        }
        drop(dir);
        value
    }
}

/// SIGINT and SIGTERM, as one stream (none where they cannot be listened to).
struct Stop(Vec<tokio::signal::unix::Signal>);

impl Stop {
    fn listen() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Stop(
            [SignalKind::interrupt(), SignalKind::terminate()]
                .into_iter()
                .filter_map(|kind| signal(kind).ok())
                .collect(),
        )
    }

    async fn next(&mut self) {
        if self.0.is_empty() {
            return std::future::pending().await;
        }
        let waits = self.0.iter_mut().map(|s| Box::pin(s.recv()));
        futures::future::select_all(waits).await;
    }
}

/// One test's lease: its request, the pair lent, and the pair reset (or retired) after it.
async fn lend(conn: UnixStream, pool: Arc<Shared>) {
    let borrower = conn
        .peer_cred()
        .ok()
        .and_then(|c| c.pid())
        .and_then(Borrower::of);
    let (read, mut write) = conn.into_split();
    let mut lines = BufReader::new(read).lines();
    let Ok(Some(line)) = lines.next_line().await else {
        return;
    };
    let lent = match serde_json::from_str::<Request>(&line) {
        Ok(req) => pair_for(&pool, &req.seed).await.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the request {line:?}: {e}")),
    };
    let answer = match &lent {
        Ok(p) => Answer::Granted(granted(&p.server)),
        Err(why) => Answer::Refused(why.clone()),
    };
    let Ok(mut text) = serde_json::to_string(&answer) else {
        return;
    };
    text.push('\n');
    if write.write_all(text.as_bytes()).await.is_err() {
        if let Ok(p) = lent {
            give_back(&pool, p, borrower).await;
        }
        return;
    }
    let Ok(pooled) = lent else { return };
    pool.count(|t| t.lent += 1);
    match lines.next_line().await {
        Ok(Some(word)) if word.trim() == "retire" => {
            pool.count(|t| t.retired += 1);
            let kept = pooled.server.keep();
            let said = kept.map(|k| k.display().to_string()).unwrap_or_default();
            eprintln!("apiserver pool: a failing test's pair retired, logs kept in {said}");
            let _ = write.write_all(format!("{said}\n").as_bytes()).await;
        }
        _ => give_back(&pool, pooled, borrower).await,
    }
}

/// An idle pair booted over `seed`; else one let go and being reset, once it is (for at most
/// [`RETURN_WAIT`]); else one booted now and settled. A reset takes a tenth of a second, a boot
/// seconds, and each pair booted is one more to keep idle.
async fn pair_for(pool: &Shared, seed: &Path) -> Result<Pooled, ApiServerError> {
    let boot_at = Instant::now() + RETURN_WAIT;
    loop {
        let reset_done = pool.reset_done.notified();
        tokio::pin!(reset_done);
        // Registered before looking, so a reset ending between the look and the wait is heard.
        reset_done.as_mut().enable();
        if let Some(p) = pool.take_idle(seed) {
            return Ok(p);
        }
        if !pool.is_resetting(seed) || Instant::now() >= boot_at {
            break;
        }
        let _ = tokio::time::timeout_at(boot_at, reset_done).await;
    }
    let server = ApiServer::launch_in(Flavor::Kube120, &pool.root, Some(seed)).await?;
    let baseline = settled(&server).await?;
    pool.count(|t| t.booted += 1);
    Ok(Pooled {
        seed: seed.to_path_buf(),
        server,
        baseline,
    })
}

fn granted(server: &ApiServer) -> Granted {
    let (etcd_pid, server_pid) = server.pids();
    Granted {
        root: server.root().to_path_buf(),
        url: server.url().to_owned(),
        etcd_pid,
        server_pid,
        audit_from: server.audit_len(),
    }
}

/// etcd's keys once a booted pair has stopped writing on its own (its boot's controllers done):
/// two reads [`SETTLE`] apart that a reset would not tell apart.
async fn settled(server: &ApiServer) -> Result<Snapshot, ApiServerError> {
    let etcd = etcd_of(server)?;
    let deadline = Instant::now() + SETTLE_DEADLINE;
    let mut last = etcd.snapshot().await?;
    loop {
        sleep(SETTLE).await;
        let now = etcd.snapshot().await?;
        if reset::plan(&last, &now).is_empty() || Instant::now() >= deadline {
            return Ok(now);
        }
        last = now;
    }
}

fn etcd_of(server: &ApiServer) -> Result<Etcd, ApiServerError> {
    server
        .etcd_url()
        .map(Etcd::new)
        .ok_or_else(|| ApiServerError::Reset {
            url: server.url().to_owned(),
            what: "a lent pair has no etcd of this process's".to_owned(),
        })
}

/// Back in the pool once its borrower has exited and it holds its baseline again; else stopped.
async fn give_back(pool: &Shared, pooled: Pooled, borrower: Option<Borrower>) {
    let seed = pooled.seed.clone();
    pool.resetting(&seed, true);
    if let Some(b) = borrower
        && !b.exited_within(EXIT_DEADLINE).await
    {
        pool.count(|t| t.given_up += 1);
        pool.resetting(&seed, false);
        eprintln!(
            "apiserver pool: a borrower ({}) did not exit; its pair stopped",
            b.pid
        );
        return;
    }
    match reset_pair(&pooled).await {
        Ok(()) => {
            pool.count(|t| t.reset += 1);
            pool.put_back(pooled);
        }
        Err(e) => {
            pool.count(|t| t.given_up += 1);
            eprintln!("apiserver pool: a pair stopped, its reset did not hold: {e}");
        }
    }
    pool.resetting(&seed, false);
}

/// The reset, tried again while etcd does not read back as the baseline.
async fn reset_pair(p: &Pooled) -> Result<(), ApiServerError> {
    let etcd = etcd_of(&p.server)?;
    let mut left = Vec::new();
    for _ in 0..RESET_TRIES {
        let plan = reset::plan(&p.baseline, &etcd.snapshot().await?);
        if plan.is_empty() {
            return Ok(());
        }
        let revision = etcd.write(&plan).await?;
        reset::caught_up(&p.server.client(), revision)
            .await
            .map_err(|e| ApiServerError::Reset {
                url: p.server.url().to_owned(),
                what: format!("the caches at revision {revision}: {e}"),
            })?;
        left = plan
            .delete
            .into_iter()
            .chain(plan.restore.into_iter().map(|r| r.0))
            .collect();
    }
    let plan = reset::plan(&p.baseline, &etcd.snapshot().await?);
    if plan.is_empty() {
        return Ok(());
    }
    left.truncate(10);
    Err(ApiServerError::Reset {
        url: p.server.url().to_owned(),
        what: format!("still written after {RESET_TRIES} resets: {left:?}"),
    })
}

/// The process a pair is lent to: its PID and its start time (a PID used again is another).
#[derive(Clone, Copy, Debug)]
struct Borrower {
    pid: i32,
    started: u64,
}

impl Borrower {
    /// The process `pid`; none for the pool's own process (a test serving a pool to itself),
    /// which is done with a pair when it lets go.
    fn of(pid: i32) -> Option<Self> {
        if u32::try_from(pid).ok() == Some(std::process::id()) {
            return None;
        }
        Some(Borrower {
            pid,
            started: stat(pid)?.1,
        })
    }

    /// Whether the process is gone (or a zombie) within `deadline`.
    async fn exited_within(self, deadline: Duration) -> bool {
        let until = Instant::now() + deadline;
        while Instant::now() < until {
            match stat(self.pid) {
                None => return true,
                Some((state, started))
                    if started != self.started || state == 'Z' || state == 'X' =>
                {
                    return true;
                }
                Some(_) => sleep(POLL).await,
            }
        }
        false
    }
}

/// A process's state letter and start time (clock ticks after boot), from `/proc/<pid>/stat`.
fn stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // Field 22 (starttime) is the 20th after the name.
    let started = fields.get(19)?.parse().ok()?;
    Some((state, started))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_as_running_with_a_start_time() {
        let (state, started) = stat(std::process::id() as i32).expect("our own stat");
        assert!(matches!(state, 'R' | 'S'), "{state}");
        assert!(started > 0);
        assert!(stat(i32::MAX).is_none());
    }
}
