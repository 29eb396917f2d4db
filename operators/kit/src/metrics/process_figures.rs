//! The process's own figures, as the Prometheus client libraries name them: resident and virtual
//! memory, CPU seconds, open and maximum file descriptors, start time. The metrics stack here is
//! the kit's own (no `prometheus` crate, so no process collector to borrow): each scrape reads
//! them from /proc/self. Where /proc is not there (not Linux) nothing is rendered.

use std::fmt::Write as _;

/// Clock ticks per second of /proc's times (`USER_HZ`): 100 on every architecture Linux
/// exposes /proc for that this runs on (x86, arm64), which is why the kernel fixes it for
/// userspace.
const USER_HZ: f64 = 100.0;

/// One reading of the process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size, bytes.
    pub resident_bytes: Option<u64>,
    /// Virtual memory size, bytes.
    pub virtual_bytes: Option<u64>,
    /// File descriptors open.
    pub open_fds: Option<u64>,
    /// The soft limit on open file descriptors.
    pub max_fds: Option<u64>,
    /// When the process started, Unix seconds.
    pub start_time_seconds: Option<f64>,
}

impl Figures {
    /// Reads /proc/self (and /proc/stat for the boot time); a figure that cannot be read is None.
    pub fn read() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let stat = read("/proc/self/stat");
        let status = read("/proc/self/status");
        let mut f = Figures::default();
        if let Some(stat) = stat.as_deref() {
            let (cpu, start_ticks) = from_stat(stat);
            f.cpu_seconds = cpu;
            let boot = read("/proc/stat").as_deref().and_then(boot_time);
            f.start_time_seconds = boot.zip(start_ticks).map(|(b, t)| b as f64 + t / USER_HZ);
        }
        if let Some(status) = status.as_deref() {
            f.resident_bytes = status_kib(status, "VmRSS:").map(|k| k * 1024);
            f.virtual_bytes = status_kib(status, "VmSize:").map(|k| k * 1024);
        }
        f.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64);
        f.max_fds = read("/proc/self/limits")
            .as_deref()
            .and_then(max_open_files);
        f
    }
}

/// (utime + stime in seconds, starttime in ticks since boot) of a /proc/<pid>/stat line. The
/// command name (field 2) may hold spaces and parentheses, so fields are counted after its last
/// `)`.
fn from_stat(stat: &str) -> (Option<f64>, Option<f64>) {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return (None, None);
    };
    // rest starts at field 3 (state): field n is rest's (n - 3)th.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let cpu = field(14).zip(field(15)).map(|(u, s)| (u + s) / USER_HZ);
    (cpu, field(22))
}

fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

fn status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn max_open_files(limits: &str) -> Option<u64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The figures in the text exposition format, each under its standard name; an unread figure
/// has no series.
pub fn render(f: &Figures) -> String {
    let mut out = String::new();
    let mut one = |name: &str, kind: &str, help: &str, v: Option<f64>| {
        if let Some(v) = v {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name} {v}");
        }
    };
    let n = |v: Option<u64>| v.map(|v| v as f64);
    one(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        f.cpu_seconds,
    );
    one(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        n(f.resident_bytes),
    );
    one(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        n(f.virtual_bytes),
    );
    one(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        n(f.open_fds),
    );
    one(
        "process_max_fds",
        "gauge",
        "Maximum number of open file descriptors.",
        n(f.max_fds),
    );
    one(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        f.start_time_seconds,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name_even_with_spaces_in_it() {
        // pid (comm) state ppid … utime(14)=250 stime(15)=50 … starttime(22)=1000
        let stat = "42 (tokio (rt) x) S 1 42 42 0 -1 4194560 10 0 0 0 250 50 0 0 20 0 8 0 1000 1 2";
        assert_eq!(from_stat(stat), (Some(3.0), Some(1000.0)));
        assert_eq!(from_stat("garbage"), (None, None));
    }

    #[test]
    fn status_limits_and_boot_time_are_read_by_their_keys() {
        let status = "Name:\tx\nVmSize:\t  2048 kB\nVmRSS:\t   512 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(512));
        assert_eq!(status_kib(status, "VmSize:"), Some(2048));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 4096                 files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(
            boot_time("cpu 1 2 3\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn this_process_reads_and_renders_every_figure() {
        let f = Figures::read();
        let text = render(&f);
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{name} "))),
                "{name} not in\n{text}"
            );
        }
        assert!(f.resident_bytes.unwrap_or(0) > 0, "{f:?}");
    }
}
