//! The servers a NatsBalancer judges copies over, and the replica skew it cannot even (design
//! §6.5: "with `moves.placement`, a copy moves to a server holding fewer").
//!
//! Over its own connection an account sees only the servers holding a copy of one of its
//! streams: STREAM.LIST and STREAM.INFO name a group's leader and replicas, `$JS.API.INFO` the
//! account's usage and limits, `$SYS.REQ.USER.INFO` the user — none names a server holding
//! nothing of the account, and the client URLs a server gossips (`connect_urls`) are
//! addresses, not server names. So a server holding none of the account's copies is known only
//! from what the JetStream controller itself saw of the NATS cluster over system credentials: a
//! NatsSystemBalancer's or NatsClusterEvacuation's JSZ ping ([`super::gate::Sighting`]). While
//! such a sighting serves the Settled gate ([`super::gate::gate_from`]), its servers of the
//! NATS cluster join the account's view holding nothing ([`widened`]), so the placement rule
//! moves a copy off the busiest server when another holds none; without one the balancer says
//! so in its Ready message ([`unseen_note`]) instead of never moving in silence.
//!
//! A replica skew of consumers alone ([`consumer_note`]) cannot be evened by placing a
//! consumer: nats-server gives a consumer its stream's peers, or a subset of them chosen at
//! random when it asks fewer replicas (jetstream_cluster.go `createGroupForConsumer`), and no
//! request places a consumer's copies apart; they move only with their stream
//! (`removePeerFromStreamLocked` remaps them). A consumer's leader moves by the leader rule
//! ([`super::leader_move`]) where consumer leaders are skewed, but a leader move changes no copy.

use std::collections::BTreeSet;

use super::gate::GateFrom;
use super::pools::StreamKey;
use super::{loads, skew};
use crate::system_view::SystemView;

/// `view` with, when `placement` moves are on and the gate judges from a sighting of `cluster`,
/// every server of `cluster` the sighting saw that the view does not hold yet (holding none of
/// the account's copies: it counts 0).
pub fn widened(
    mut view: SystemView,
    from: &GateFrom<'_>,
    cluster: &str,
    placement: bool,
) -> SystemView {
    let GateFrom::Cluster(s) = from else {
        return view;
    };
    if !placement {
        return view;
    }
    for seen in s.view.servers_of(cluster) {
        if view.servers.iter().all(|v| v.name != seen.name) {
            view.servers.push(seen.clone());
        }
    }
    view.servers.sort_by(|a, b| a.name.cmp(&b.name));
    view
}

/// Why placement is judged only among the servers holding the account's streams, for the Ready
/// message: `None` when placement moves are off or a sighting shows every server of `cluster`.
pub fn unseen_note(
    from: &GateFrom<'_>,
    view: &SystemView,
    cluster: &str,
    placement: bool,
) -> Option<String> {
    let GateFrom::Account(why) = from else {
        return None;
    };
    if !placement {
        return None;
    }
    let n = view.servers_of(cluster).count();
    Some(format!(
        "placement judged only among the {n} servers holding the account's streams: {why} \
         (an account cannot ask which servers hold none of its copies; a NatsSystemBalancer or \
         NatsClusterEvacuation over NATS cluster {cluster} shows them)"
    ))
}

/// Why pool `pool` (its `streams`) keeps a replica skew over one in `cluster` that no move
/// evens: its streams' own copies are within one of even and the skew is of their consumers'
/// copies, which nats-server places only with their stream (see the module doc). `None` when
/// the skew is within one, or comes from the streams' own copies.
pub fn consumer_note(
    view: &SystemView,
    cluster: &str,
    pool: &str,
    streams: &BTreeSet<StreamKey>,
) -> Option<String> {
    let of_pool = |consumers: bool| SystemView {
        groups: view
            .groups
            .iter()
            .filter(|g| streams.contains(&g.stream_key()))
            .filter(|g| consumers || g.consumer.is_none())
            .cloned()
            .collect(),
        ..view.clone()
    };
    let all = skew(&loads(&of_pool(true), cluster)).replicas;
    let own = skew(&loads(&of_pool(false), cluster)).replicas;
    (all > 1 && own <= 1).then(|| {
        format!(
            "replica skew {all} in pool {pool} is of consumers' copies alone (streams' own within \
             {own}): a consumer's copies are its stream's peers, which nats-server places for no \
             consumer apart, and no stream carries few enough to even it; a leader move moves no \
             copy"
        )
    })
}

#[cfg(test)]
mod tests;
