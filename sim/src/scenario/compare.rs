//! Two runs of one scenario side by side ([`side_by_side`]): per step its time on each backend,
//! per rollout step (a server the controller restarted) lame duck to up again and the gate's
//! hold before it, then the ledger's figures. What the node backend's report is read next to:
//! the same scenario on the local backend.

use std::fmt::Write as _;

use super::Report;

/// `ms` as seconds with one decimal, or `-` where the run has no such row.
fn secs(ms: Option<u64>) -> String {
    ms.map(|m| format!("{:.1} s", m as f64 / 1000.0))
        .unwrap_or_else(|| "-".into())
}

/// A markdown table of `a`'s and `b`'s steps, rollout steps and figures, `a` first.
pub fn side_by_side(a: &Report, b: &Report) -> String {
    let (na, nb) = (&a.backend, &b.backend);
    let mut out = format!("## {} on {na} and on {nb}\n\n", a.scenario);
    let _ = writeln!(out, "| step | {na} | {nb} |\n|---|---|---|");
    let steps = a.steps.len().max(b.steps.len());
    for i in 0..steps {
        let (sa, sb) = (a.steps.get(i), b.steps.get(i));
        let action = sa.or(sb).map(|s| s.action.as_str()).unwrap_or_default();
        let took = |s: Option<&super::StepOutcome>| match s {
            Some(s) if s.ok => secs(Some(s.took_ms)),
            Some(_) => "FAILED".into(),
            None => "-".into(),
        };
        let _ = writeln!(out, "| {}. {action} | {} | {} |", i + 1, took(sa), took(sb));
    }
    if !(a.rollout_steps.is_empty() && b.rollout_steps.is_empty()) {
        let _ = writeln!(
            out,
            "\n| rollout step | {na}: lame duck → up (gate) | {nb}: lame duck → up (gate) |\n|---|---|---|"
        );
        let rows = a.rollout_steps.len().max(b.rollout_steps.len());
        for i in 0..rows {
            let (ra, rb) = (a.rollout_steps.get(i), b.rollout_steps.get(i));
            let cell = |r: Option<&super::RolloutStep>| match r {
                Some(r) => format!(
                    "{} {} ({})",
                    r.server,
                    secs(Some(r.step_ms)),
                    secs(r.gate_ms)
                ),
                None => "-".into(),
            };
            let _ = writeln!(out, "| {} | {} | {} |", i + 1, cell(ra), cell(rb));
        }
    }
    let (fa, fb) = (&a.figures, &b.figures);
    let _ = writeln!(out, "\n| figure | {na} | {nb} |\n|---|---|---|");
    let rows: [(&str, u64, u64); 6] = [
        ("acknowledged", fa.acknowledged, fb.acknowledged),
        ("lost", fa.lost, fb.lost),
        ("duplicated", fa.duplicated, fb.duplicated),
        ("ack timeouts", fa.ack_timeouts, fb.ack_timeouts),
        ("max ack gap (ms)", fa.max_ack_gap_ms, fb.max_ack_gap_ms),
        (
            "stream leader changes",
            fa.leadership_changes,
            fb.leadership_changes,
        ),
    ];
    for (name, x, y) in rows {
        let _ = writeln!(out, "| {name} | {x} | {y} |");
    }
    let _ = writeln!(
        out,
        "| whole run | {} | {} |\n| passed | {} | {} |",
        secs(Some(a.duration_ms)),
        secs(Some(b.duration_ms)),
        a.passed,
        b.passed
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{RolloutStep, StepOutcome};

    fn step(index: usize, action: &str, took_ms: u64, ok: bool) -> StepOutcome {
        StepOutcome {
            index,
            at_ms: 0,
            action: action.into(),
            target: None,
            ok,
            error: None,
            took_ms,
            id: None,
            observed_at_ms: None,
            value: None,
        }
    }

    fn report(backend: &str, steps: Vec<StepOutcome>, rollout: Vec<RolloutStep>) -> Report {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "scenario": "rolling-restart", "description": "", "backend": backend,
            "started_at": "", "duration_ms": 95_000, "passed": true, "failures": [],
            "figures": crate::ledger::Figures::default(), "expectations": [], "steps": [], "timeline": [], "per_second": [],
        }))
        .expect("a report");
        r.steps = steps;
        r.rollout_steps = rollout;
        r
    }

    #[test]
    fn each_step_and_rollout_step_is_a_row_with_both_backends_times() {
        let local = report(
            "local",
            vec![
                step(1, "apply", 40, true),
                step(2, "wait Progressing=False", 30_500, true),
            ],
            vec![RolloutStep {
                server: "demo-2".into(),
                lame_duck_at_ms: 0,
                restarted_at_ms: 4_000,
                step_ms: 4_000,
                gate_ms: None,
            }],
        );
        let node = report(
            "node",
            vec![
                step(1, "apply", 60, true),
                step(2, "wait Progressing=False", 81_000, false),
            ],
            vec![],
        );
        let table = side_by_side(&local, &node);
        assert!(
            table.starts_with("## rolling-restart on local and on node\n"),
            "{table}"
        );
        assert!(table.contains("| 1. apply | 0.0 s | 0.1 s |"), "{table}");
        assert!(
            table.contains("| 2. wait Progressing=False | 30.5 s | FAILED |"),
            "{table}"
        );
        assert!(table.contains("| 1 | demo-2 4.0 s (-) | - |"), "{table}");
        assert!(table.contains("| whole run | 95.0 s | 95.0 s |"), "{table}");
    }
}
