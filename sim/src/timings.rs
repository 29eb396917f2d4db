//! Whether timings are judged in this run. A figure measured in wall-clock time on this machine
//! (publish acks missing their deadline, the longest gap between acks, a push-to-usable latency)
//! moves with the machine's load without the software doing anything wrong: the test gate and a
//! contributor's `cargo test` on a busy laptop report such figures and judge nothing by them; the
//! nightly tier, the `sim scenario` CLI and the benchmarks judge them.
//!
//! `SIM_TIMINGS=judge` or `SIM_TIMINGS=report` decides; without it, what the process chose with
//! [`set_judge_timings`] (the `sim` CLI judges), else report.

use std::sync::OnceLock;

/// The environment variable: `judge` or `report`.
pub const TIMINGS_ENV: &str = "SIM_TIMINGS";

/// The process's own choice, set once (by the CLI).
static JUDGE_TIMINGS: OnceLock<bool> = OnceLock::new();

/// Makes this process judge its timing expectations (`true`) or only report them, unless
/// SIM_TIMINGS says otherwise.
pub fn set_judge_timings(judge: bool) {
    let _ = JUDGE_TIMINGS.set(judge);
}

/// Whether this run judges timings.
pub fn judges_timings() -> bool {
    decide(
        std::env::var(TIMINGS_ENV).ok().as_deref(),
        JUDGE_TIMINGS.get().copied(),
    )
}

fn decide(env: Option<&str>, chosen: Option<bool>) -> bool {
    match env {
        Some("judge") => true,
        Some("report") => false,
        _ => chosen.unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::decide;
    use rstest::rstest;

    #[rstest]
    #[case::nothing_said_reports(None, None, false)]
    #[case::the_cli_judges(None, Some(true), true)]
    #[case::env_judge_wins(Some("judge"), Some(false), true)]
    #[case::env_report_wins(Some("report"), Some(true), false)]
    #[case::unknown_value_is_not_said(Some("yes"), None, false)]
    fn who_decides_whether_timings_are_judged(
        #[case] env: Option<&str>,
        #[case] chosen: Option<bool>,
        #[case] want: bool,
    ) {
        assert_eq!(decide(env, chosen), want);
    }
}
