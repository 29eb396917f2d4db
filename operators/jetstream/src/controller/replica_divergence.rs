//! The NatsSystemBalancer's watch over replica divergence (design §8's "no acknowledged message
//! lost", seen from the servers): its pass already asks every server of the NATS cluster for JSZ
//! with streams, and each server answers for its own replica. [`found`] reads this pass's
//! divergences from those answers ([`crate::divergence::diverged_now`] per stream group); the pass
//! carries them over its previous status ([`crate::divergence::carried`]) and judges
//! ReplicasConsistent ([`crate::divergence::consistency`]); [`tell`] says so once, as a Warning
//! Event, and keeps the gauge of lasting divergences.

use kube::ResourceExt;
use nats_api::jetstream::{DivergedReplicas, NatsSystemBalancer, event, metric};
use nats_wire::PingReplies;
use nats_wire::monitor::Jsz;

use super::context::Context;
use crate::divergence::{DIVERGED_AFTER, Found, diverged_now, replica_states};
use crate::system_view::SystemView;

const HELP: &str = "Streams of the NATS cluster whose replicas hold other messages than their \
                    peers at the same last sequence, pass after pass.";

/// What this pass's answers say of the stream groups of `cluster`: each one whose replicas
/// diverge, and each one not every replica of which answered (a server late to the ping under
/// load): those cannot be judged agreeing, so a divergence found before is kept as it was
/// ([`crate::divergence::carried`]).
pub(super) fn found(replies: &PingReplies<Jsz>, view: &SystemView, cluster: &str) -> Found {
    let mut out = Found::default();
    for g in view
        .groups
        .iter()
        .filter(|g| g.cluster == cluster && g.consumer.is_none())
    {
        let states = replica_states(replies, &g.account, &g.stream);
        if let Some(d) = diverged_now(&states) {
            out.diverged.push((g.account.clone(), g.stream.clone(), d));
        } else if states.len() < g.replicas {
            out.unheard.push((g.account.clone(), g.stream.clone()));
        }
    }
    out
}

/// A ReplicasDiverged Warning Event for each divergence that lasted [`DIVERGED_AFTER`] passes in
/// this one, and the gauge of those lasting.
pub(super) async fn tell(ctx: &Context, obj: &NatsSystemBalancer, diverged: &[DivergedReplicas]) {
    for d in diverged.iter().filter(|d| d.passes == DIVERGED_AFTER) {
        let message = format!(
            "stream {} of account {}: the replicas on {} hold other messages than their peers at \
             sequence {}, {} passes in a row",
            d.stream,
            d.account,
            d.servers.join(", "),
            d.last_seq,
            d.passes
        );
        ctx.shared
            .events
            .publish(obj, true, event::REPLICAS_DIVERGED, message)
            .await;
    }
    let lasting = diverged
        .iter()
        .filter(|d| d.passes >= DIVERGED_AFTER)
        .count();
    let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    ctx.shared.metrics.set_gauge(
        metric::STREAMS_DIVERGED,
        HELP,
        &[("namespace", &ns), ("name", &name)],
        lasting as f64,
    );
}

/// The gauge of a deleted system balancer removed.
pub(super) fn forget(ctx: &Context, obj: &NatsSystemBalancer) {
    let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    ctx.shared.metrics.remove_gauge(
        metric::STREAMS_DIVERGED,
        &[("namespace", &ns), ("name", &name)],
    );
}
