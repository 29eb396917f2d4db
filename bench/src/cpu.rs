//! The CPU time processes spent over a phase of a figure (user and system, from /proc), so a
//! figure can say which process a gap went to: the controller, the apiserver, etcd, the bench.

/// The CPU seconds process `pid` has used so far (`utime` + `stime` of /proc/<pid>/stat, in the
/// kernel's USER_HZ of 100 ticks a second); None once it is gone.
pub fn seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    of_stat(&stat)
}

/// `utime` + `stime` of one /proc/<pid>/stat line in seconds: fields 14 and 15, counted after
/// the command name's closing parenthesis (the name may hold blanks).
fn of_stat(stat: &str) -> Option<f64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// The CPU seconds of named processes at one moment.
#[derive(Debug, Clone, Default)]
pub struct Sample(Vec<(&'static str, f64)>);

impl Sample {
    /// Reads each of `processes` (name, pid) now; one that is gone counts 0.
    pub fn now(processes: &[(&'static str, u32)]) -> Self {
        Self(
            processes
                .iter()
                .map(|&(name, pid)| (name, seconds(pid).unwrap_or(0.0)))
                .collect(),
        )
    }

    /// What each process spent from `self` to `later`, as a figure's note: "apiserver 12.3 s,
    /// etcd 1.2 s".
    pub fn spent_until(&self, later: &Sample) -> String {
        later
            .0
            .iter()
            .map(|(name, after)| {
                let before = self
                    .0
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(0.0, |(_, v)| *v);
                format!("{name} {:.1} s", after - before)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rstest::rstest]
    #[case::plain(
        "1234 (kube-apiserver) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 100 0 0",
        Some(3.25)
    )]
    #[case::a_name_with_blanks_and_parens(
        "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 100 0 0 0 20 0 1 0 1 0 0",
        Some(1.0)
    )]
    #[case::cut_short("7 (x) R 1 7", None)]
    #[case::no_name("garbage", None)]
    fn cpu_time_is_utime_plus_stime_after_the_name(
        #[case] stat: &str,
        #[case] seconds: Option<f64>,
    ) {
        assert_eq!(of_stat(stat), seconds);
    }

    #[test]
    fn a_phase_is_the_difference_of_two_samples() {
        let before = Sample(vec![("apiserver", 10.0), ("etcd", 1.0)]);
        let after = Sample(vec![("apiserver", 22.5), ("etcd", 1.25)]);
        assert_eq!(before.spent_until(&after), "apiserver 12.5 s, etcd 0.2 s");
    }

    #[test]
    fn this_process_has_a_cpu_time() {
        assert!(seconds(std::process::id()).is_some());
    }
}
