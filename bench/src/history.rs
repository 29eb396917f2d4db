//! The figures' history: every full `just bench` run appends one line per figure to
//! docs/bench-history.csv (commit, date, machine, figure, value, unit, floor, ratio), so a
//! regression shows as a diff of that file rather than a memory of an earlier table. The nightly
//! workflow runs the bench and keeps the file and the table as an artifact.
//!
//! CSV, written here rather than with a crate: eight columns, each a number or a short string
//! quoted by [`field`]'s one rule (RFC 4180); nothing is ever read back by this program.

use crate::summary::Figure;

/// The header line of the history file.
pub const HEADER: &str = "commit,date,machine,figure,value,unit,floor,ratio";

/// Where the run was measured: cores, memory and CPU model, from /proc (what is known of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub cores: usize,
    pub memory_gib: u64,
    pub cpu: String,
}

impl Machine {
    /// This machine, from `/proc/cpuinfo` and `/proc/meminfo` (unknown parts left empty).
    pub fn here() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Machine::from_proc(&cpuinfo, &meminfo)
    }

    /// Parsed from the texts of `/proc/cpuinfo` and `/proc/meminfo`.
    pub fn from_proc(cpuinfo: &str, meminfo: &str) -> Machine {
        let cores = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        let kib: u64 = meminfo
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Machine {
            cores,
            memory_gib: (kib + 512 * 1024) / (1024 * 1024),
            cpu,
        }
    }

    /// "2 cores, 24 GiB, <cpu>".
    pub fn describe(&self) -> String {
        let mut s = format!("{} cores, {} GiB", self.cores, self.memory_gib);
        if !self.cpu.is_empty() {
            s.push_str(", ");
            s.push_str(&self.cpu);
        }
        s
    }
}

/// One CSV field: quoted, with quotes doubled, when it holds a comma, a quote or a line break.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The lines a run appends: one per figure.
pub fn lines(figures: &[Figure], commit: &str, date: &str, machine: &str) -> Vec<String> {
    figures
        .iter()
        .map(|f| {
            [
                field(commit),
                field(date),
                field(machine),
                field(&f.name),
                format!("{}", f.value),
                field(&f.unit),
                format!("{}", f.floor),
                format!("{:.4}", f.ratio()),
            ]
            .join(",")
        })
        .collect()
}

/// `existing` (the file's text, empty when there is none) with `new` lines appended, the header
/// first when the file is new.
pub fn appended(existing: &str, new: &[String]) -> String {
    let mut out = if existing.trim().is_empty() {
        format!("{HEADER}\n")
    } else if existing.ends_with('\n') {
        existing.to_string()
    } else {
        format!("{existing}\n")
    };
    for l in new {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The checkout's commit (short), or "unknown" outside a git checkout; "+dirty" when the tree
/// has changes, so a line never claims a commit it did not measure.
pub fn commit(workspace: &std::path::Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(workspace)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".into();
    };
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty { format!("{head}+dirty") } else { head }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn fig(name: &str, value: f64, floor: f64) -> Figure {
        Figure {
            name: name.into(),
            what: "w".into(),
            value,
            unit: "s".into(),
            floor,
            floor_what: "f".into(),
            goal: None,
            notes: Vec::new(),
        }
    }

    #[rstest]
    #[case::plain("streams.ready_1000", "streams.ready_1000")]
    #[case::a_comma("2 cores, 24 GiB", "\"2 cores, 24 GiB\"")]
    #[case::a_quote("a \"b\"", "\"a \"\"b\"\"\"")]
    #[case::a_line_break("a\nb", "\"a\nb\"")]
    fn a_field_is_quoted_only_when_it_must_be(#[case] s: &str, #[case] want: &str) {
        assert_eq!(field(s), want);
    }

    #[test]
    fn a_run_appends_one_line_per_figure_after_the_header() {
        let run = lines(
            &[fig("a", 6.0, 2.0), fig("b", 1.5, 3.0)],
            "abc123",
            "2026-12-05T21:00:00Z",
            "2 cores, 24 GiB",
        );
        assert_eq!(
            run,
            vec![
                "abc123,2026-12-05T21:00:00Z,\"2 cores, 24 GiB\",a,6,s,2,3.0000",
                "abc123,2026-12-05T21:00:00Z,\"2 cores, 24 GiB\",b,1.5,s,3,0.5000",
            ]
        );
        let first = appended("", &run);
        assert_eq!(first.lines().next(), Some(HEADER));
        assert_eq!(first.lines().count(), 3);
        let second = appended(&first, &run[..1]);
        assert_eq!(second.lines().count(), 4, "appended, the header once");
        assert!(second.starts_with(&first));
        let unterminated = appended(first.trim_end(), &run[..1]);
        assert_eq!(unterminated, second, "a missing final newline is added");
    }

    #[test]
    fn the_machine_is_read_from_proc() {
        let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC  7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC  7B13\n";
        let meminfo = "MemTotal:       24568000 kB\nMemFree: 1 kB\n";
        let m = Machine::from_proc(cpuinfo, meminfo);
        assert_eq!(
            m,
            Machine {
                cores: 2,
                memory_gib: 23,
                cpu: "AMD EPYC 7B13".into()
            }
        );
        assert_eq!(m.describe(), "2 cores, 23 GiB, AMD EPYC 7B13");
        assert_eq!(Machine::from_proc("", "").describe(), "0 cores, 0 GiB");
    }
}
