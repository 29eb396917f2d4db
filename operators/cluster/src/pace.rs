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

use std::time::Duration;

/// The three paces a NatsCluster is looked at again at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paces {
    /// Not yet as it should be, with servers to ask.
    pub recheck: Duration,
    /// Not yet as it should be, with no server Ready, whose readiness a watch delivers.
    pub idle: Duration,
    /// As it should be.
    pub resync: Duration,
}

/// When to look again: at `resync` once nothing is `busy`; while busy, at `recheck` when a
/// server is Ready to be asked or readiness is not watched (local servers), else at `idle`.
pub fn look_again(paces: Paces, busy: bool, any_ready: bool, readiness_watched: bool) -> Duration {
    match (busy, any_ready || !readiness_watched) {
        (false, _) => paces.resync,
        (true, true) => paces.recheck,
        (true, false) => paces.idle.max(paces.recheck),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const PACES: Paces = Paces {
        recheck: Duration::from_secs(5),
        idle: Duration::from_secs(60),
        resync: Duration::from_secs(300),
    };

    #[rstest]
    #[case::settled_resyncs(false, true, true, 300)]
    #[case::settled_without_servers_resyncs(false, false, true, 300)]
    #[case::busy_with_a_server_to_ask_rechecks(true, true, true, 5)]
    #[case::busy_with_none_ready_waits_for_the_pod_watch(true, false, true, 60)]
    #[case::busy_local_servers_are_not_watched(true, false, false, 5)]
    #[case::busy_local_with_a_server_rechecks(true, true, false, 5)]
    fn a_pass_looks_again_at_its_pace(
        #[case] busy: bool,
        #[case] any_ready: bool,
        #[case] watched: bool,
        #[case] secs: u64,
    ) {
        assert_eq!(
            look_again(PACES, busy, any_ready, watched),
            Duration::from_secs(secs)
        );
    }

    #[test]
    fn the_idle_pace_is_never_quicker_than_the_recheck() {
        let quick = Paces {
            idle: Duration::from_millis(10),
            ..PACES
        };
        assert_eq!(look_again(quick, true, false, true), PACES.recheck);
    }
}
