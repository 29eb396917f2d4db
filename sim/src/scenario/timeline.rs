//! What the report's page draws on its time axis, derived from the run: publish-ack latency per
//! second, where the longest gap between acks fell, and each server's life (started, lame duck,
//! restarted, killed, paused, reloaded) with the revision it ran.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Action, Step, StepOutcome};
use crate::ledger::Event;
use crate::server::events::LocalEvent;

/// What happened to one server, for its lane on the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerChange {
    /// Started (first start, or a start after a delete).
    Started,
    /// Put in lame duck: draining clients, stepping down as leader, then exiting.
    LameDuck,
    /// Started again under a new revision after its lame-duck exit (the controller's restart).
    Restarted,
    /// Started again after it died on its own (the kubelet's restart).
    Revived,
    /// Restarted on its store by a scenario step.
    RestartedByStep,
    /// Killed (`kill -9`) or stopped (SIGTERM) by a scenario step.
    Killed,
    /// Stopped with SIGSTOP by a scenario step.
    Paused,
    /// Continued with SIGCONT.
    Resumed,
    /// Deleted (its process stopped for good).
    Deleted,
    /// Its config rewritten and reloaded in place (no restart).
    Reloaded,
}

/// What a server is doing between two changes, as its lane colours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    Up,
    LameDuck,
    Down,
    Paused,
}

impl ServerChange {
    /// The state a server is in after the change; `None` when the change leaves it as it was
    /// (a reload).
    pub fn state_after(self) -> Option<ServerState> {
        use ServerChange::*;
        Some(match self {
            Started | Restarted | Revived | RestartedByStep | Resumed => ServerState::Up,
            LameDuck => ServerState::LameDuck,
            Killed | Deleted => ServerState::Down,
            Paused => ServerState::Paused,
            Reloaded => return None,
        })
    }

    /// Whether the change is a restart (a tick on the server's lane).
    pub fn is_restart(self) -> bool {
        matches!(
            self,
            ServerChange::Restarted | ServerChange::Revived | ServerChange::RestartedByStep
        )
    }
}

/// One change of one server, in ms since the run began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerEvent {
    pub at_ms: u64,
    pub server: String,
    pub change: ServerChange,
    /// The revision it runs after the change, where known (servers a controller runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

impl ServerEvent {
    pub fn new(at_ms: u64, server: &str, change: ServerChange) -> ServerEvent {
        ServerEvent {
            at_ms,
            server: server.to_string(),
            change,
            revision: None,
        }
    }
}

/// The server change of a server lifecycle event of the local server lifecycle (controller-run).
pub fn server_change(e: LocalEvent) -> ServerChange {
    match e {
        LocalEvent::Started => ServerChange::Started,
        LocalEvent::LameDuck => ServerChange::LameDuck,
        LocalEvent::Restarted => ServerChange::Restarted,
        LocalEvent::Revived => ServerChange::Revived,
        LocalEvent::Deleted => ServerChange::Deleted,
        LocalEvent::ConfigWritten => ServerChange::Reloaded,
    }
}

/// The server changes the scenario's own steps made (kill, SIGTERM, lame duck, pause, resume,
/// restart, reload, a power loss), at the moment each step finished; failed steps change nothing.
pub fn server_events_of_steps(steps: &[Step], outcomes: &[StepOutcome]) -> Vec<ServerEvent> {
    let mut out = Vec::new();
    for (step, o) in steps.iter().zip(outcomes) {
        // A power loss kills every server it names at once (a selector among them is told in
        // the step's row, not drawn: its target reports the loss, not the server).
        if let Action::LoseUnsynced { servers } = &step.action {
            if o.ok {
                for s in servers.iter().filter(|s| !s.contains(':')) {
                    out.push(ServerEvent::new(o.done_at_ms(), s, ServerChange::Killed));
                }
            }
            continue;
        }
        let (named, change) = match &step.action {
            Action::Kill9 { server } | Action::Sigterm { server } => (server, ServerChange::Killed),
            Action::LameDuck { server } => (server, ServerChange::LameDuck),
            Action::Pause { server } => (server, ServerChange::Paused),
            Action::Resume { server } => (server, ServerChange::Resumed),
            Action::Restart { server } => (server, ServerChange::RestartedByStep),
            Action::Reload { server, .. } => (server, ServerChange::Reloaded),
            _ => continue,
        };
        if !o.ok {
            continue;
        }
        // A selector (`stream-leader:S`) is resolved in the outcome's target.
        let server = o.target.as_deref().unwrap_or(named);
        // A lame duck step starts the lame duck and returns once the server has exited.
        if change == ServerChange::LameDuck {
            out.push(ServerEvent::new(o.at_ms, server, ServerChange::LameDuck));
            out.push(ServerEvent::new(
                o.done_at_ms(),
                server,
                ServerChange::Killed,
            ));
            continue;
        }
        out.push(ServerEvent::new(o.done_at_ms(), server, change));
    }
    out
}

/// A Kubernetes Event a controller published during the run (a rollout step, a reload, a
/// certificate reload, a refusal), for the controller's lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerEvent {
    pub at_ms: u64,
    /// The reporting controller.
    pub controller: String,
    /// `Kind/name` of the object it is about.
    pub object: String,
    pub reason: String,
    pub note: String,
    pub warning: bool,
    /// How often it happened (a series counts repeats).
    pub count: u32,
}

/// The controller events of Events (`events.k8s.io/v1`, as JSON) that happened after
/// `run_start`, in ms since it, in time order; an Event without a time is left out.
pub fn controller_events(
    events: &[serde_json::Value],
    run_start: chrono::DateTime<chrono::Utc>,
) -> Vec<ControllerEvent> {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let mut out: Vec<ControllerEvent> = events
        .iter()
        .filter_map(|e| {
            let at = chrono::DateTime::parse_from_rfc3339(e["eventTime"].as_str()?).ok()?;
            let at_ms = u64::try_from((at.to_utc() - run_start).num_milliseconds()).ok()?;
            Some(ControllerEvent {
                at_ms,
                controller: text(&e["reportingController"]),
                object: format!(
                    "{}/{}",
                    text(&e["regarding"]["kind"]),
                    text(&e["regarding"]["name"])
                ),
                reason: text(&e["reason"]),
                note: text(&e["note"]),
                warning: e["type"].as_str() == Some("Warning"),
                count: e["series"]["count"].as_u64().unwrap_or(1) as u32,
            })
        })
        .collect();
    out.sort_by_key(|e| e.at_ms);
    out
}

/// The `q`-quantile (0.0–1.0) of sorted values, nearest rank; none of an empty list.
pub fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Publish-ack latency per second of the run (by the ack's second): p50, p99 and max in ms,
/// each ack measured from the last publish attempt of its message before it.
pub fn ack_latency_per_second(events: &[Event]) -> BTreeMap<u64, (u64, u64, u64)> {
    let mut last_publish: BTreeMap<u64, u64> = BTreeMap::new();
    let mut by_second: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by_key(|e| e.at_ms());
    for e in sorted {
        match e {
            Event::Publish { at_ms, id, .. } => {
                last_publish.insert(*id, *at_ms);
            }
            Event::Ack { at_ms, id, .. } => {
                if let Some(p) = last_publish.get(id) {
                    by_second
                        .entry(at_ms / 1000)
                        .or_default()
                        .push(at_ms.saturating_sub(*p));
                }
            }
            _ => {}
        }
    }
    by_second
        .into_iter()
        .filter_map(|(s, mut v)| {
            v.sort_unstable();
            Some((s, (quantile(&v, 0.5)?, quantile(&v, 0.99)?, *v.last()?)))
        })
        .collect()
}

/// Where the longest gap between two consecutive publish acks fell: (from, to) in ms.
pub fn max_ack_gap(events: &[Event]) -> Option<(u64, u64)> {
    let mut acks: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Ack { at_ms, .. } => Some(*at_ms),
            _ => None,
        })
        .collect();
    acks.sort_unstable();
    acks.windows(2)
        .map(|w| (w[0], w[1]))
        .max_by_key(|(a, b)| (b - a, std::cmp::Reverse(*a)))
}

/// The order servers were restarted in, every event as (at_ms, server, event) and as a server
/// change for the report's page.
pub(super) type ServerTimeline = (
    Vec<String>,
    Vec<(u64, String, LocalEvent)>,
    Vec<ServerEvent>,
);

/// The servers' lives on the host's server lifecycle (`events`), put into the timeline beside the
/// steps and the traffic.
pub(super) fn server_timeline(
    events: Vec<crate::server::events::ServerLifecycleEvent>,
    ledger: &crate::ledger::Ledger,
) -> ServerTimeline {
    let mut restart_order = Vec::new();
    let mut log = Vec::new();
    let mut changes = Vec::new();
    for e in events {
        let at_ms = ledger
            .now_ms()
            .saturating_sub(e.at.elapsed().as_millis() as u64);
        ledger.record(Event::Step {
            at_ms,
            text: format!("server {} {:?}", e.server, e.event),
        });
        if e.event == LocalEvent::Restarted {
            restart_order.push(e.server.clone());
        }
        changes.push(ServerEvent {
            at_ms,
            server: e.server.clone(),
            change: server_change(e.event),
            revision: e.revision,
        });
        log.push((at_ms, e.server, e.event));
    }
    (restart_order, log, changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(at_ms: u64, id: u64, attempt: u32) -> Event {
        Event::Publish { at_ms, id, attempt }
    }
    fn ack(at_ms: u64, id: u64) -> Event {
        Event::Ack {
            at_ms,
            id,
            stream_seq: id,
            duplicate: false,
        }
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), Some(50));
        assert_eq!(quantile(&v, 0.99), Some(99));
        assert_eq!(quantile(&[7], 0.99), Some(7));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn latency_is_measured_from_the_last_attempt_and_bucketed_by_the_acks_second() {
        let ev = vec![
            publish(100, 1, 1),
            ack(103, 1),
            publish(900, 2, 1),
            // retried after a timeout: measured from the retry
            publish(1500, 2, 2),
            ack(1520, 2),
            publish(1600, 3, 1),
            ack(1610, 3),
        ];
        let l = ack_latency_per_second(&ev);
        assert_eq!(l.get(&0), Some(&(3, 3, 3)));
        assert_eq!(l.get(&1), Some(&(10, 20, 20)));
    }

    #[test]
    fn the_max_gap_is_the_first_longest_interval_between_acks() {
        let ev = vec![
            ack(0, 1),
            ack(10, 2),
            ack(510, 3),
            ack(520, 4),
            ack(1020, 5),
        ];
        assert_eq!(max_ack_gap(&ev), Some((10, 510)));
        assert_eq!(max_ack_gap(&[ack(5, 1)]), None);
    }

    fn outcome(
        index: usize,
        at_ms: u64,
        took_ms: u64,
        target: Option<&str>,
        ok: bool,
    ) -> StepOutcome {
        StepOutcome {
            index,
            at_ms,
            action: String::new(),
            target: target.map(str::to_string),
            ok,
            error: (!ok).then(|| "failed".to_string()),
            took_ms,
            id: None,
            observed_at_ms: None,
            value: None,
        }
    }

    #[test]
    fn the_steps_that_touch_a_server_change_its_lane_and_the_others_do_not() {
        let s = crate::scenario::Scenario::from_yaml(
            std::path::Path::new("x"),
            "name: x\ntopology: { servers: 3 }\nworkload: {}\nsteps:\n\
             - { at: 1s, action: kill9, server: \"stream-leader:S\" }\n\
             - { at: 2s, action: restart, server: last-faulted }\n\
             - { at: 3s, action: lame_duck, server: c1-1 }\n\
             - { at: 4s, action: wait_meta_leader }\n\
             - { at: 5s, action: pause, server: c1-2 }\n\
             - { at: 6s, action: resume, server: c1-2 }\n",
        )
        .unwrap();
        let outcomes = [
            // a selector: the outcome names the server it resolved to
            outcome(1, 1_000, 10, Some("c1-0"), true),
            outcome(2, 2_000, 500, Some("c1-0"), true),
            outcome(3, 3_000, 900, None, true),
            outcome(4, 4_000, 100, None, true),
            // a failed step changes nothing
            outcome(5, 5_000, 10, None, false),
            outcome(6, 6_000, 10, None, true),
        ];
        let got: Vec<(u64, String, ServerChange)> = server_events_of_steps(&s.steps, &outcomes)
            .into_iter()
            .map(|e| (e.at_ms, e.server, e.change))
            .collect();
        let want = [
            (1_010, "c1-0", ServerChange::Killed),
            (2_500, "c1-0", ServerChange::RestartedByStep),
            // the lame duck from its start, the exit when the step returned
            (3_000, "c1-1", ServerChange::LameDuck),
            (3_900, "c1-1", ServerChange::Killed),
            (6_010, "c1-2", ServerChange::Resumed),
        ];
        let want: Vec<(u64, String, ServerChange)> = want
            .iter()
            .map(|(t, s, c)| (*t, s.to_string(), *c))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn controller_events_are_timed_from_the_run_start_and_earlier_ones_left_out() {
        let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:10Z")
            .unwrap()
            .to_utc();
        let ev = |t: &str, reason: &str, kind: &str| {
            serde_json::json!({
                "eventTime": t, "reportingController": "nats-cluster-controller",
                "regarding": { "kind": "NatsCluster", "name": "demo" },
                "reason": reason, "note": "restarting demo-2 for revision r2", "type": kind,
            })
        };
        let mut late = ev("2026-01-01T00:00:12.500000Z", "RolloutStep", "Normal");
        late["series"] = serde_json::json!({ "count": 3 });
        let got = controller_events(
            &[
                late,
                ev(
                    "2026-01-01T00:00:11.000000Z",
                    "ReplaceServerUnknown",
                    "Warning",
                ),
                // before the run: another run's, or the setup's
                ev("2026-01-01T00:00:09.000000Z", "RolloutStep", "Normal"),
                serde_json::json!({ "reason": "NoTime" }),
            ],
            start,
        );
        let rows: Vec<(u64, &str, bool, u32)> = got
            .iter()
            .map(|e| (e.at_ms, e.reason.as_str(), e.warning, e.count))
            .collect();
        assert_eq!(
            rows,
            [
                (1_000, "ReplaceServerUnknown", true, 1),
                (2_500, "RolloutStep", false, 3)
            ]
        );
        assert_eq!(got[0].object, "NatsCluster/demo");
    }

    #[test]
    fn every_change_has_the_state_its_lane_shows() {
        let rows = [
            (ServerChange::Started, Some(ServerState::Up)),
            (ServerChange::LameDuck, Some(ServerState::LameDuck)),
            (ServerChange::Killed, Some(ServerState::Down)),
            (ServerChange::Paused, Some(ServerState::Paused)),
            (ServerChange::Resumed, Some(ServerState::Up)),
            // a reload leaves the server up as it was
            (ServerChange::Reloaded, None),
        ];
        for (c, s) in rows {
            assert_eq!(c.state_after(), s, "{c:?}");
        }
    }
}
