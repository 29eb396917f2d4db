//! When a NatsCluster is looked at again after a pass that did not fail: the design rule
//! [`look_again`], pure.
//!
//! A NatsCluster not yet as it should be is looked at again at the recheck pace (5 s): what its
//! servers say over NATS (Settled, the meta group, a reload taken) reaches the controller through
//! no watch, only by asking again. With no server Ready there is no one to ask; where the port
//! watches readiness (Kubernetes: a pod's Ready is a pod watch event, which calls for a pass at
//! once), the first server to come Ready wakes the pass without a recheck, and the recheck would
//! only repeat the pass's reads. So such a NatsCluster is looked at again at the idle pace (60 s),
//! kept for what no watch shows (a claim gone, a gate held ten minutes). Without it, 100
//! NatsClusters whose pods never run (the API tier) cost 20 passes a second for nothing, which
//! on a 2-core apiserver held new NatsClusters back for minutes (docs/performance.md).
//!
//! A rollout holding at its gate with servers still to step is looked at again at the gate pace
//! (250 ms): the restarted server catching up (its readiness, the meta group, its streams' replicas
//! current) opens the gate within seconds, which no watch shows, so at the recheck pace every step
//! waited up to a recheck more than it had to (bench `rollout.rolling_restart_3`: 2.7 s per gate
//! over the same restarts made by hand, with a 2 s recheck; at a 1 s gate pace still about 1 s a
//! step over the hand's, which polls every 100 ms). A gate held longer than
//! [`GATE_PACE_WINDOW`] is waiting for something else (a server that does not come back, a group
//! that stays behind) and is looked at again at the recheck pace. The cost: a pass every 250 ms per
//! NatsCluster whose gate is held, for at most a minute of each step; with many NatsClusters
//! rolling at once (an upgrade that restarts their servers) the passes in flight are bounded by
//! `--concurrency`, not by the pace.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nats_api::cluster::RolloutStatus;

/// How long a rollout may hold at its gate and still be looked at again at the gate pace.
pub const GATE_PACE_WINDOW: Duration = Duration::from_secs(60);

/// The four paces a NatsCluster is looked at again at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paces {
    /// Not yet as it should be, with servers to ask.
    pub recheck: Duration,
    /// Not yet as it should be, with no server Ready, whose readiness a watch delivers.
    pub idle: Duration,
    /// As it should be.
    pub resync: Duration,
    /// A rollout with servers still to step, holding at its gate for less than
    /// [`GATE_PACE_WINDOW`].
    pub gate: Duration,
}

/// What a pass left to look at again for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    /// Something is not yet as it should be.
    pub busy: bool,
    /// A server is Ready to be asked.
    pub any_ready: bool,
    /// The server-lifecycle port delivers readiness by a watch (Kubernetes pods).
    pub readiness_watched: bool,
    /// How long a rollout with servers still to step has held at its closed gate.
    pub gate_held: Option<Duration>,
}

/// When to look again: at `resync` once nothing is `busy`; while a rollout holds at its gate
/// within [`GATE_PACE_WINDOW`], at `gate` (never slower than `recheck`); else, while busy, at
/// `recheck` when a server is Ready to be asked or readiness is not watched (local servers),
/// else at `idle`.
pub fn look_again(paces: Paces, left: Left) -> Duration {
    if !left.busy {
        return paces.resync;
    }
    if left.gate_held.is_some_and(|held| held < GATE_PACE_WINDOW) {
        return paces.gate.min(paces.recheck);
    }
    if left.any_ready || !left.readiness_watched {
        paces.recheck
    } else {
        paces.idle.max(paces.recheck)
    }
}

/// How long the rollout `status` has held at its closed gate `since`, as of `now`, when it has
/// servers still to step; `None` with the gate open or nothing left to step. A `since` in the
/// future (another clock's) reads as just closed.
pub fn gate_held(status: &RolloutStatus, now: &Time) -> Option<Duration> {
    let gate = status.gate.as_ref()?;
    if status.current.is_none() && status.pending.is_empty() {
        return None;
    }
    let Some(since) = gate.since.as_ref() else {
        return Some(Duration::ZERO);
    };
    let held = now.0.duration_since(since.0);
    Some(Duration::try_from(held).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::cluster::RolloutGate;
    use rstest::rstest;

    const PACES: Paces = Paces {
        recheck: Duration::from_secs(5),
        idle: Duration::from_secs(60),
        resync: Duration::from_secs(300),
        gate: Duration::from_secs(1),
    };

    fn left(busy: bool, any_ready: bool, watched: bool, gate_held: Option<u64>) -> Left {
        Left {
            busy,
            any_ready,
            readiness_watched: watched,
            gate_held: gate_held.map(Duration::from_secs),
        }
    }

    #[rstest]
    #[case::settled_resyncs(false, true, true, None, 300)]
    #[case::settled_without_servers_resyncs(false, false, true, None, 300)]
    #[case::busy_with_a_server_to_ask_rechecks(true, true, true, None, 5)]
    #[case::busy_with_none_ready_waits_for_the_pod_watch(true, false, true, None, 60)]
    #[case::busy_local_servers_are_not_watched(true, false, false, None, 5)]
    #[case::busy_local_with_a_server_rechecks(true, true, false, None, 5)]
    #[case::a_gate_just_closed_is_looked_at_at_the_gate_pace(true, true, true, Some(0), 1)]
    #[case::a_gate_held_within_the_window_too(true, true, false, Some(59), 1)]
    #[case::a_gate_with_no_server_ready_too(true, false, true, Some(3), 1)]
    #[case::a_gate_held_past_the_window_rechecks(true, true, true, Some(60), 5)]
    #[case::a_gate_held_past_the_window_with_none_ready_idles(true, false, true, Some(600), 60)]
    #[case::settled_resyncs_whatever_the_gate(false, true, true, Some(0), 300)]
    fn a_pass_looks_again_at_its_pace(
        #[case] busy: bool,
        #[case] any_ready: bool,
        #[case] watched: bool,
        #[case] gate_held: Option<u64>,
        #[case] secs: u64,
    ) {
        assert_eq!(
            look_again(PACES, left(busy, any_ready, watched, gate_held)),
            Duration::from_secs(secs)
        );
    }

    #[test]
    fn the_idle_pace_is_never_quicker_than_the_recheck() {
        let quick = Paces {
            idle: Duration::from_millis(10),
            ..PACES
        };
        assert_eq!(
            look_again(quick, left(true, false, true, None)),
            PACES.recheck
        );
    }

    #[test]
    fn the_gate_pace_is_never_slower_than_the_recheck() {
        let slow = Paces {
            gate: Duration::from_secs(30),
            ..PACES
        };
        assert_eq!(
            look_again(slow, left(true, true, true, Some(1))),
            PACES.recheck
        );
    }

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    fn rollout(
        gate_since: Option<Option<i64>>,
        current: Option<&str>,
        pending: &[&str],
    ) -> RolloutStatus {
        RolloutStatus {
            current: current.map(String::from),
            pending: pending.iter().map(|p| p.to_string()).collect(),
            gate: gate_since.map(|since| RolloutGate {
                waiting_for: Some("c1-2: pod not Ready".into()),
                since: since.map(at),
            }),
            ..Default::default()
        }
    }

    #[rstest]
    #[case::held_with_servers_pending(Some(Some(100)), None, &["c1-0"], Some(7))]
    #[case::held_stepping_the_last(Some(Some(100)), Some("c1-0"), &[], Some(7))]
    #[case::held_with_no_since_just_closed(Some(None), None, &["c1-0"], Some(0))]
    #[case::a_since_ahead_of_this_clock_just_closed(Some(Some(200)), None, &["c1-0"], Some(0))]
    #[case::open_gate(None, None, &["c1-0"], None)]
    #[case::nothing_left_to_step(Some(Some(100)), None, &[], None)]
    fn a_rollout_holds_at_its_gate(
        #[case] gate_since: Option<Option<i64>>,
        #[case] current: Option<&str>,
        #[case] pending: &[&str],
        #[case] held: Option<u64>,
    ) {
        assert_eq!(
            gate_held(&rollout(gate_since, current, pending), &at(107)),
            held.map(Duration::from_secs)
        );
    }
}
