//! Ready: every server's pod Ready, or a quorum of them, unless an object in the way says
//! otherwise.

use controller_kit::conditions::Decided;
use nats_api::cluster::{condition, reason};

use crate::server_lifecycle::ObservedServer;

/// Ready: every server's pod Ready, or a quorum of them, unless an object in the way or a
/// refusal says otherwise.
pub fn ready(replicas: u32, observed: &[ObservedServer], foreign: &[String]) -> Decided {
    if !foreign.is_empty() {
        return Decided::new(
            condition::READY,
            false,
            reason::RECONCILE_FAILED,
            format!(
                "not controlled by this NatsCluster, left untouched: {}",
                foreign.join(", ")
            ),
        );
    }
    let ready = ready_count(replicas, observed);
    if ready == replicas {
        Decided::new(
            condition::READY,
            true,
            reason::ALL_SERVERS_READY,
            format!("{ready} of {replicas} servers ready"),
        )
    } else if ready > replicas / 2 {
        Decided::new(
            condition::READY,
            true,
            reason::QUORUM_AVAILABLE,
            format!("{ready} of {replicas} servers ready; the meta group keeps its quorum"),
        )
    } else {
        Decided::new(
            condition::READY,
            false,
            reason::QUORUM_UNAVAILABLE,
            format!("{ready} of {replicas} servers ready; no quorum"),
        )
    }
}

/// How many of the first `replicas` servers are Ready.
pub fn ready_count(replicas: u32, observed: &[ObservedServer]) -> u32 {
    observed
        .iter()
        .filter(|o| o.ordinal < replicas && o.ready)
        .count() as u32
}
