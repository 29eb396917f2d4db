//! What the reconciler writes about a rollout, as plain data: `status.rollout` (updated,
//! current, pending servers, the gate and since when), `status.removals` entries,
//! `status.config` (how the revision was applied and why), and the Progressing condition.

use controller_kit::conditions::Decided;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nats_api::cluster::{
    ConfigAppliedBy, ConfigStatus, RolloutGate, RolloutStatus, ServerRemoval, condition, reason,
};

use super::gate::{GateServer, closed_gate_reason};
use super::order::{Action, Decision, Hold, StepKind};
use super::removal::{RemovalKind, RemovalStep};
use crate::apply_mode::ApplyMode;

/// The Progressing condition: status True while something runs or waits its turn, False when
/// up to date or blocked until an input changes.
fn progress(status: bool, reason: &'static str, message: impl Into<String>) -> Decided {
    Decided::new(condition::PROGRESSING, status, reason, message)
}

/// The server being stepped: the step taken now, else an updated server whose restart has not
/// yet taken (not Ready, or not reporting the revision).
pub fn current(decision: &Decision, servers: &[GateServer]) -> Option<String> {
    match &decision.action {
        Action::ContinueRemoval(s) | Action::Take(s) | Action::Forced(s) => {
            return Some(s.server.clone());
        }
        _ => {}
    }
    servers
        .iter()
        .find(|s| {
            s.revision.as_deref() == Some(s.target.as_str())
                && !(s.ready && s.reported.as_deref() == Some(s.target.as_str()))
        })
        .map(|s| s.name.clone())
}

/// `status.rollout`; `None` once every server runs its target revision and nothing waits.
/// `target` is the NatsCluster's revision as a whole (`targetRevision`).
pub fn rollout_status(
    target: &str,
    servers: &[GateServer],
    decision: &Decision,
    gate: Option<RolloutGate>,
) -> Option<RolloutStatus> {
    let current = current(decision, servers);
    if decision.action == Action::UpToDate && current.is_none() && gate.is_none() {
        return None;
    }
    let mut updated: Vec<String> = servers
        .iter()
        .filter(|s| s.revision.as_deref() == Some(s.target.as_str()))
        .map(|s| s.name.clone())
        .collect();
    updated.sort();
    let pending = decision
        .pending
        .iter()
        .map(|s| s.server.clone())
        .filter(|s| Some(s) != current.as_ref())
        .collect();
    Some(RolloutStatus {
        target_revision: Some(target.to_string()),
        updated,
        current,
        pending,
        gate,
    })
}

/// The `status.removals` entry after a removal step; `since` is kept while the phase stays.
pub fn removal_entry(
    server: &str,
    step: &RemovalStep,
    kind: RemovalKind,
    previous: Option<&ServerRemoval>,
    now: &Time,
) -> Option<ServerRemoval> {
    let phase = step.phase_after(kind)?;
    let since = match previous {
        Some(p) if p.phase == phase => p.since.clone().or_else(|| Some(now.clone())),
        _ => Some(now.clone()),
    };
    Some(ServerRemoval {
        name: server.to_string(),
        phase,
        since,
    })
}

/// `status.config`: the revision and how it reached the servers. `reload_failed` is the reason a
/// reload fell back to a restart.
pub fn config_status(
    revision: &str,
    mode: &ApplyMode,
    reload_failed: Option<&str>,
    previous: Option<&ConfigStatus>,
) -> ConfigStatus {
    let (applied_by, restart_reason) = match (mode, reload_failed) {
        (ApplyMode::Unchanged, _) => {
            let p = previous.cloned().unwrap_or_default();
            (p.applied_by, p.restart_reason)
        }
        (ApplyMode::Reload { .. }, None) => (Some(ConfigAppliedBy::Reload), None),
        (ApplyMode::Reload { changed }, Some(why)) => (
            Some(ConfigAppliedBy::Restart),
            Some(format!(
                "reload of {} failed, restarted instead: {why}",
                changed.join(", ")
            )),
        ),
        (ApplyMode::Restart { .. }, _) => (Some(ConfigAppliedBy::Restart), mode.restart_reason()),
    };
    ConfigStatus {
        revision: Some(revision.to_string()),
        applied_by,
        restart_reason,
    }
}

/// Ready=False, ReconcileFailed, naming each object a removal left because the controller may
/// not delete it (a PVC without the server's labels, a ConfigMap it does not control).
pub fn leftovers_condition(server: &str, names: &[String]) -> Decided {
    Decided::new(
        condition::READY,
        false,
        reason::RECONCILE_FAILED,
        format!("removing {server} left: {}", names.join(", ")),
    )
}

/// Progressing=True, ReloadPending, while servers still serve certificates their Secrets no
/// longer hold (`pending`: server and stale listeners), with the last reason a reload was not
/// confirmed.
pub fn certificates_pending(pending: &[(String, Vec<String>)], why: &str) -> Decided {
    let servers: Vec<String> = pending
        .iter()
        .map(|(s, l)| format!("{s} ({})", l.join(", ")))
        .collect();
    progress(
        true,
        reason::RELOAD_PENDING,
        format!(
            "reloading rotated certificates: {}{}",
            servers.join(", "),
            if why.is_empty() {
                String::new()
            } else {
                format!("; {why}")
            }
        ),
    )
}

/// The Progressing condition for the decision, the removal step being run (if the action is a
/// removal) and the gate's since.
pub fn progressing(
    target: &str,
    decision: &Decision,
    removal: Option<&RemovalStep>,
    gate: Option<&RolloutGate>,
    now: &Time,
) -> Decided {
    match &decision.action {
        Action::UpToDate if !decision.create.is_empty() => progress(
            true,
            reason::CREATING,
            format!("creating servers {:?}", decision.create),
        ),
        Action::UpToDate => progress(
            false,
            reason::UP_TO_DATE,
            format!("every server runs revision {target}"),
        ),
        Action::ContinueRemoval(s) => removal_progress(s.kind, &s.server, removal),
        Action::Take(s) | Action::Forced(s) => match s.kind {
            StepKind::Restart => progress(
                true,
                reason::ROLLING_RESTART,
                format!(
                    "restarting {}{}",
                    s.server,
                    if matches!(decision.action, Action::Forced(_)) {
                        " (force-step)"
                    } else {
                        ""
                    }
                ),
            ),
            kind => removal_progress(kind, &s.server, removal),
        },
        Action::RestartAll(steps) => progress(
            true,
            reason::ROLLING_RESTART,
            format!(
                "restarting {} at once (restart-all)",
                steps
                    .iter()
                    .map(|s| s.server.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        Action::Held(Hold::AuthChange(r)) => r.progressing(),
        Action::Held(Hold::Paused) => progress(
            true,
            reason::ROLLOUT_PAUSED,
            format!(
                "spec.rollout.paused: {} waiting",
                decision
                    .pending
                    .iter()
                    .map(|s| s.server.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        Action::Held(Hold::Gate) => gate_progress(decision, gate, now),
    }
}

/// Progressing while a removal (scale-down or replacement) of `server` runs: the step being
/// taken, or Blocked.
fn removal_progress(kind: StepKind, server: &str, removal: Option<&RemovalStep>) -> Decided {
    let rk = kind.removal().unwrap_or(RemovalKind::ScaleDown);
    match removal {
        Some(RemovalStep::Blocked { reason, message }) => progress(false, reason, message),
        Some(step) => {
            let what = match step {
                RemovalStep::WaitEvacuation { waiting_for }
                | RemovalStep::WaitRejoin { waiting_for } => waiting_for.clone(),
                RemovalStep::Leftovers { names } => {
                    format!("{server}: objects left: {}", names.join(", "))
                }
                other => format!("{server}: {other:?}"),
            };
            progress(true, step.progressing_reason(rk), what)
        }
        None => progress(
            true,
            match rk {
                RemovalKind::ScaleDown => reason::SCALING_DOWN,
                RemovalKind::Replace => reason::REPLACING_SERVER,
            },
            server.to_string(),
        ),
    }
}

/// Progressing while the gate holds the next step: RollingRestart (ScaleDownPending before a
/// scale-down), GateBlocked once it has been closed too long.
fn gate_progress(decision: &Decision, gate: Option<&RolloutGate>, now: &Time) -> Decided {
    let waiting = gate.and_then(|g| g.waiting_for.clone()).unwrap_or_default();
    let why = match gate.and_then(|g| g.since.as_ref()) {
        Some(since) => closed_gate_reason(since, now),
        None => reason::ROLLING_RESTART,
    };
    let why = match decision.pending.first() {
        Some(s) if why == reason::ROLLING_RESTART && s.kind == StepKind::ScaleDown => {
            reason::SCALE_DOWN_PENDING
        }
        _ => why,
    };
    progress(true, why, format!("gate closed, waiting for: {waiting}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refusals::{Hold as RefusalHold, Refusal};
    use crate::rollout::gate::{Gate, gate_status};
    use crate::rollout::order::Step;
    use nats_api::cluster::RemovalPhase;
    use rstest::rstest;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    fn step(o: u32, kind: StepKind) -> Step {
        Step {
            server: format!("demo-{o}"),
            ordinal: o,
            kind,
        }
    }

    fn decision(action: Action, pending: Vec<Step>) -> Decision {
        Decision {
            create: vec![],
            pending,
            action,
            clear_force_step: false,
            clear_restart_all: false,
        }
    }

    fn closed_since(secs: i64) -> RolloutGate {
        gate_status(
            &Gate::Closed {
                waiting_for: vec!["groups not current: ORDERS".into()],
            },
            None,
            &at(secs),
        )
        .unwrap()
    }

    #[rstest]
    #[case::up_to_date(decision(Action::UpToDate, vec![]), None, None, false, reason::UP_TO_DATE)]
    #[case::creating(Decision { create: vec![0, 1, 2], ..decision(Action::UpToDate, vec![]) }, None, None, true, reason::CREATING)]
    #[case::rolling(decision(Action::Take(step(2, StepKind::Restart)), vec![step(2, StepKind::Restart)]), None, None, true, reason::ROLLING_RESTART)]
    #[case::forced(decision(Action::Forced(step(0, StepKind::Restart)), vec![step(0, StepKind::Restart)]), None, None, true, reason::ROLLING_RESTART)]
    #[case::gate_fresh(decision(Action::Held(Hold::Gate), vec![step(1, StepKind::Restart)]), None, Some(closed_since(1000)), true, reason::ROLLING_RESTART)]
    #[case::gate_blocked(decision(Action::Held(Hold::Gate), vec![step(1, StepKind::Restart)]), None, Some(closed_since(1000 - 600)), true, reason::GATE_BLOCKED)]
    #[case::scale_down_pending(decision(Action::Held(Hold::Gate), vec![step(3, StepKind::ScaleDown)]), None, Some(closed_since(1000)), true, reason::SCALE_DOWN_PENDING)]
    #[case::paused(decision(Action::Held(Hold::Paused), vec![step(1, StepKind::Restart)]), None, None, true, reason::ROLLOUT_PAUSED)]
    #[case::auth(decision(Action::Held(Hold::AuthChange(Refusal::new(reason::AUTH_CHANGE_BLOCKED, RefusalHold::Waiting, "adding spec.auth"))), vec![]), None, None, true, reason::AUTH_CHANGE_BLOCKED)]
    #[case::restart_all(decision(Action::RestartAll(vec![step(2, StepKind::Restart), step(0, StepKind::Restart)]), vec![step(2, StepKind::Restart), step(0, StepKind::Restart)]), None, None, true, reason::ROLLING_RESTART)]
    #[case::scaling_down(decision(Action::ContinueRemoval(step(3, StepKind::ScaleDown)), vec![]), Some(RemovalStep::RemovePeer), None, true, reason::SCALING_DOWN)]
    #[case::replacing(decision(Action::ContinueRemoval(step(2, StepKind::Replace)), vec![]), Some(RemovalStep::WaitRejoin { waiting_for: "demo-2 rejoining".into() }), None, true, reason::REPLACING_SERVER)]
    #[case::scale_down_blocked(decision(Action::Take(step(3, StepKind::ScaleDown)), vec![step(3, StepKind::ScaleDown)]), Some(RemovalStep::Blocked { reason: reason::SCALE_DOWN_BLOCKED, message: "streams".into() }), None, false, reason::SCALE_DOWN_BLOCKED)]
    #[case::replacement_blocked(decision(Action::Take(step(2, StepKind::Replace)), vec![step(2, StepKind::Replace)]), Some(RemovalStep::Blocked { reason: reason::REPLACEMENT_BLOCKED, message: "no system credentials".into() }), None, false, reason::REPLACEMENT_BLOCKED)]
    fn progressing_reasons(
        #[case] d: Decision,
        #[case] removal: Option<RemovalStep>,
        #[case] gate: Option<RolloutGate>,
        #[case] status: bool,
        #[case] want: &str,
    ) {
        let p = progressing("r2", &d, removal.as_ref(), gate.as_ref(), &at(1000));
        assert_eq!((p.status, p.reason), (status, want), "{p:?}");
    }

    #[test]
    fn leftovers_and_reloads_have_their_reasons() {
        let l = leftovers_condition("demo-3", &["PersistentVolumeClaim/data-demo-3-0".into()]);
        assert_eq!((l.status, l.reason), (false, reason::RECONCILE_FAILED));
        assert_eq!(
            l.message,
            "removing demo-3 left: PersistentVolumeClaim/data-demo-3-0"
        );
        let c = certificates_pending(
            &[("demo-0".into(), vec!["routes".into(), "client".into()])],
            "not confirmed",
        );
        assert_eq!((c.status, c.reason), (true, reason::RELOAD_PENDING));
        assert_eq!(
            c.message,
            "reloading rotated certificates: demo-0 (routes, client); not confirmed"
        );
    }

    #[test]
    fn the_gate_message_names_what_is_not_current() {
        let d = decision(Action::Held(Hold::Gate), vec![step(1, StepKind::Restart)]);
        let g = closed_since(0);
        let p = progressing("r2", &d, None, Some(&g), &at(3600));
        assert_eq!(p.reason, reason::GATE_BLOCKED);
        assert_eq!(
            p.message,
            "gate closed, waiting for: groups not current: ORDERS"
        );
    }

    fn gs(name: &str, ready: bool, revision: &str, reported: &str) -> GateServer {
        GateServer {
            name: name.into(),
            ready,
            revision: Some(revision.into()),
            target: "r2".into(),
            reported: Some(reported.into()),
            answered: true,
        }
    }

    #[test]
    fn rollout_status_lists_updated_current_and_pending() {
        let servers = vec![
            gs("demo-0", true, "r1", "r1"),
            gs("demo-1", true, "r1", "r1"),
            gs("demo-2", false, "r2", "r1"),
        ];
        let d = decision(
            Action::Held(Hold::Gate),
            vec![step(0, StepKind::Restart), step(1, StepKind::Restart)],
        );
        let gate = closed_since(5);
        let s = rollout_status("r2", &servers, &d, Some(gate.clone())).unwrap();
        assert_eq!(s.target_revision.as_deref(), Some("r2"));
        assert_eq!(s.updated, vec!["demo-2".to_string()]);
        assert_eq!(
            s.current.as_deref(),
            Some("demo-2"),
            "its restart has not taken yet"
        );
        assert_eq!(s.pending, vec!["demo-0".to_string(), "demo-1".to_string()]);
        assert_eq!(s.gate, Some(gate));
    }

    #[test]
    fn no_rollout_block_once_up_to_date() {
        let servers = vec![gs("demo-0", true, "r2", "r2")];
        assert_eq!(
            rollout_status("r2", &servers, &decision(Action::UpToDate, vec![]), None),
            None
        );
    }

    #[test]
    fn removal_entries_keep_since_within_a_phase() {
        let first = removal_entry(
            "demo-3",
            &RemovalStep::Evacuate,
            RemovalKind::ScaleDown,
            None,
            &at(10),
        )
        .unwrap();
        assert_eq!(
            (first.phase, first.since.clone()),
            (RemovalPhase::Evacuating, Some(at(10)))
        );
        let waiting = RemovalStep::WaitEvacuation {
            waiting_for: "x".into(),
        };
        let again = removal_entry(
            "demo-3",
            &waiting,
            RemovalKind::ScaleDown,
            Some(&first),
            &at(20),
        )
        .unwrap();
        assert_eq!(again.since, Some(at(10)));
        let removed = removal_entry(
            "demo-3",
            &RemovalStep::RemovePeer,
            RemovalKind::ScaleDown,
            Some(&again),
            &at(30),
        )
        .unwrap();
        assert_eq!(
            (removed.phase, removed.since),
            (RemovalPhase::Removed, Some(at(30)))
        );
        assert_eq!(
            removal_entry(
                "demo-3",
                &RemovalStep::Done,
                RemovalKind::ScaleDown,
                Some(&first),
                &at(40)
            ),
            None
        );
    }

    #[rstest]
    #[case::reload(ApplyMode::Reload { changed: vec!["server_tags"] }, None, Some(ConfigAppliedBy::Reload), None)]
    #[case::reload_failed(ApplyMode::Reload { changed: vec!["max_payload"] }, Some("refused"), Some(ConfigAppliedBy::Restart), Some("reload of max_payload failed, restarted instead: refused"))]
    #[case::restart(ApplyMode::Restart { changed: vec!["gateway", "server_tags"], restart_only: vec!["gateway"] }, None, Some(ConfigAppliedBy::Restart), Some("restart-only fields changed: gateway"))]
    #[case::unchanged_keeps_previous(
        ApplyMode::Unchanged,
        None,
        Some(ConfigAppliedBy::Reload),
        None
    )]
    fn config_applied_record(
        #[case] mode: ApplyMode,
        #[case] failed: Option<&str>,
        #[case] by: Option<ConfigAppliedBy>,
        #[case] why: Option<&str>,
    ) {
        let previous = ConfigStatus {
            revision: Some("r1".into()),
            applied_by: Some(ConfigAppliedBy::Reload),
            restart_reason: None,
        };
        let s = config_status("r2", &mode, failed, Some(&previous));
        assert_eq!(s.revision.as_deref(), Some("r2"));
        assert_eq!(s.applied_by, by);
        assert_eq!(s.restart_reason.as_deref(), why);
    }
}
