//! What a NatsCluster being deleted still holds, asked of its servers over the controller's
//! system connection (design §4.6): a JSZ ping with stream details, bounded, judged by the
//! deletion guard's rules ([`crate::deletion_guard`]).

use std::time::Duration;

use nats_wire::monitor::JszOptions;
use nats_wire::{Collect, ServerFilter, Wire};

use crate::deletion_guard::{DataObservation, stream_groups};

/// Observes the NATS cluster `cluster` through the controller's system connection: a JSZ ping
/// to its servers with stream details. `expected` is how many servers should answer; fewer
/// answers, or JetStream answering on none, is judged as observed. The whole ping is bounded by
/// `deadline` and a second: over a connection that is down the client would wait for it to come
/// back, and a NATS cluster that cannot be reached is ObservationFailed, not a stuck reconcile.
pub async fn observe(
    wire: &Wire,
    cluster: &str,
    expected: usize,
    deadline: Duration,
) -> DataObservation {
    let options = JszOptions {
        filter: ServerFilter::cluster(cluster),
        accounts: true,
        streams: true,
        raft_groups: true,
        ..Default::default()
    };
    let ping = wire.ping_jsz(&options, Collect::expecting(expected.max(1), deadline));
    match tokio::time::timeout(deadline + Duration::from_secs(1), ping).await {
        Err(_) => DataObservation::Failed(format!(
            "JSZ of {cluster} not answered within {deadline:?}: the system connection is down"
        )),
        Ok(Err(e)) => DataObservation::Failed(e.to_string()),
        Ok(Ok(replies)) if replies.replies.is_empty() => DataObservation::Failed(format!(
            "no server of {cluster} answered JSZ ({} failures)",
            replies.failures.len()
        )),
        Ok(Ok(replies)) if replies.replies.iter().all(|r| r.data.disabled) => {
            DataObservation::NoJetStream
        }
        Ok(Ok(replies)) => DataObservation::StreamGroups(stream_groups(&replies.replies, cluster)),
    }
}
