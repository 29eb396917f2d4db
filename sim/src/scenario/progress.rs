//! A run's progress lines: where they go ([`Progress`]) and how each reads ([`line`]). The run
//! and its workload both write them.

/// Where progress lines go (stdout for the CLI, captured in tests).
pub type Progress<'a> = &'a mut (dyn FnMut(&str) + Send);

/// A progress line: the time since the run began, then the text.
pub(super) fn line(t: u64, text: &str) -> String {
    format!("[{:>6.1}s] {text}", t as f64 / 1000.0)
}
