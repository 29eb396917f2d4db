//! Stopping a `sim up` from outside (`sim down`), and finding what one left behind.
//!
//! A running `sim up` writes its pid into its directory; `sim down` sends it SIGTERM, which stops
//! it as Ctrl-C does, and waits. One that was killed outright (SIGKILL, a closed terminal) could not
//! stop its servers: every process whose command line names the directory (nats-server's config,
//! etcd's data, kube-apiserver's certificates all live there) is then killed by PID.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::{PID_FILE, UpError};

/// How long a `sim up` told to stop may take before it is killed.
const STOP_DEADLINE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

/// What [`down`] did.
#[derive(Debug, Default)]
pub struct Down {
    /// The `sim up` that was running, told to stop.
    pub stopped: Option<u32>,
    /// It did not stop in time and was killed.
    pub killed: bool,
    /// Processes left behind (by a `sim up` killed outright), killed.
    pub swept: Vec<u32>,
}

fn alive(pid: u32) -> bool {
    // Signal 0 checks for existence; a zombie counts as gone.
    kill(Pid::from_raw(pid as i32), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
}

/// The pid a `sim up` in `dir` wrote, if the process still runs.
pub fn running(dir: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(dir.join(PID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (pid != std::process::id() && alive(pid)).then_some(pid)
}

/// Whether the command line `cmdline` (NUL-separated arguments) names a path inside `dir`:
/// `dir/` and more of the path after it. What `sim up` started names its files there (a server's
/// config, etcd's data, the apiserver's certificates); a command naming `dir` itself, such as the
/// `sim down --dir DIR` (or the `cargo run` around it) that asked this run to stop, is not one.
fn names_inside(cmdline: &[u8], dir: &[u8]) -> bool {
    let prefix: Vec<u8> = dir.iter().copied().chain([b'/']).collect();
    cmdline
        .windows(prefix.len() + 1)
        .any(|w| w.starts_with(&prefix) && w[prefix.len()] != 0)
}

/// Every other process whose command line names a path inside `dir`.
pub fn left_behind(dir: &Path) -> Vec<u32> {
    let needle = dir.as_os_str().as_encoded_bytes().to_vec();
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmd| names_inside(&cmd, &needle))
        })
        .filter(|pid| alive(*pid))
        .collect();
    pids.sort_unstable();
    pids
}

fn wait_gone(pid: u32, deadline: Duration) -> bool {
    let until = Instant::now() + deadline;
    while Instant::now() < until {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(POLL);
    }
    !alive(pid)
}

/// Stops the `sim up` of `dir` and whatever it left, then removes the directory.
pub fn down(dir: &Path) -> Result<Down, UpError> {
    let dir = absolute(dir)?;
    let mut done = Down::default();
    if let Some(pid) = running(&dir) {
        done.stopped = Some(pid);
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        if !wait_gone(pid, STOP_DEADLINE) {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            done.killed = true;
            wait_gone(pid, Duration::from_secs(5));
        }
    }
    done.swept = sweep(&dir);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(UpError::Dir { path: dir, source }),
    }
    Ok(done)
}

/// Kills (SIGKILL, by PID) every process [`left_behind`] names and waits for each to go.
pub fn sweep(dir: &Path) -> Vec<u32> {
    let pids = left_behind(dir);
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
    }
    for pid in &pids {
        wait_gone(*pid, Duration::from_secs(5));
    }
    pids
}

/// `dir` as an absolute path (what the processes' command lines carry).
pub fn absolute(dir: &Path) -> Result<PathBuf, UpError> {
    std::path::absolute(dir).map_err(|source| UpError::Dir {
        path: dir.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::names_inside;
    use rstest::rstest;

    #[rstest]
    #[case::a_server_config(b"nats-server\0-c\0/t/up/servers/demo-0/nats.conf\0", true)]
    #[case::a_flag_with_the_path(b"etcd\0--data-dir=/t/up/etcd\0", true)]
    #[case::sim_down_naming_the_dir(b"sim\0down\0--dir\0/t/up\0", false)]
    #[case::the_dir_with_a_trailing_slash(b"sim\0down\0--dir\0/t/up/\0", false)]
    #[case::cargo_run_naming_the_dir(b"cargo\0run\0--\0down\0--dir\0/t/up", false)]
    #[case::a_sibling_dir(b"nats-server\0-c\0/t/upper/nats.conf\0", false)]
    #[case::elsewhere(b"bash\0-c\0true\0", false)]
    fn a_process_is_left_behind_when_it_names_a_path_inside_the_dir(
        #[case] cmdline: &[u8],
        #[case] inside: bool,
    ) {
        assert_eq!(names_inside(cmdline, b"/t/up"), inside);
    }
}
