//! The judge phase of both balancers, pure: from what a pass gathered and what the
//! controller's other passes hold (streams under evacuation, a system balancer's moves pending,
//! the last system sighting of the NATS cluster), whether the pass holds, finds its NATS
//! cluster Settled, or makes one move ([`Verdict`]). The shells observe their own pending moves
//! before and take the lease and request the move after.

use std::collections::{BTreeMap, BTreeSet};

use nats_api::jetstream::{Moves, reason};

use super::account::{self, Listed, ListedConsumers};
use super::gate::{self, GateFrom};
use super::pools::{Assignment, StreamKey};
use super::{PlannedMove, Scope, next_move, servers, settled};
use crate::system_view::SystemView;

/// What a balancer's pass decided, before the lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No move: Holding True with this reason and message.
    Hold {
        /// Holding's reason.
        reason: &'static str,
        /// Holding's message.
        message: String,
    },
    /// Nothing to move: Holding False Settled with this message.
    Settled(String),
    /// This move, once the NATS cluster's lease is taken.
    Move(PlannedMove),
}

fn hold(reason: &'static str, message: String) -> Verdict {
    Verdict::Hold { reason, message }
}

/// What an account balancer's gather phase found.
#[derive(Clone, Copy, Debug)]
pub struct AccountSeen<'a> {
    /// The NATS cluster of the server its connection reached.
    pub cluster: &'a str,
    /// Its account (empty when USER.INFO and the creds did not say).
    pub account: &'a str,
    /// STREAM.LIST's streams, and those whose leader did not answer.
    pub listed: &'a [Listed],
    /// The streams STREAM.LIST names missing.
    pub missing: &'a [String],
    /// The consumers of the streams of `cluster` that have some.
    pub consumers: &'a [ListedConsumers],
    /// The account's view (consumers included).
    pub view: &'a SystemView,
    /// Its pools' streams.
    pub pools: &'a Assignment,
    /// The UIDs of the resources, of any namespace, setting `placement.cluster`.
    pub pinned_uids: &'a BTreeSet<String>,
}

/// What the controller's other passes hold when an account balancer judges.
#[derive(Clone, Debug)]
pub struct Around<'a> {
    /// What the Settled gate reads beside the account's own streams.
    pub from: GateFrom<'a>,
    /// The streams a live system balancer has a move pending on, and its name.
    pub system_pending: BTreeMap<StreamKey, String>,
    /// The streams under evacuation.
    pub evacuating: BTreeSet<StreamKey>,
}

/// An account balancer's verdict: Unsettled while the gate or its consumers do not hold;
/// YieldingToSystemBalancer when the move it wants next is on a stream a system balancer has a
/// move pending on; else the first pool's move, or Settled (`interval` the next pass's; with
/// placement moves on, naming a pool whose replica skew is of consumers' copies alone:
/// [`servers::consumer_note`]). `seen.view` holds the servers placement is judged over
/// ([`servers::widened`]).
pub fn account_verdict(
    seen: &AccountSeen<'_>,
    around: &Around<'_>,
    moves: &Moves,
    interval: &str,
) -> Verdict {
    let gated = gate::account_gate(&around.from, seen.listed, seen.missing, seen.cluster);
    if let Err(why) = gated.and_then(|()| account::consumers_settled(seen.consumers)) {
        return hold(reason::UNSETTLED, why);
    }
    let pinned = account::placement_pinned(seen.view, seen.pinned_uids);
    let plan = |skip: &BTreeSet<StreamKey>| {
        seen.pools.pools.iter().find_map(|(_, streams)| {
            let scope = Scope {
                leader: moves.leader,
                placement: moves.placement,
                leader_accounts: [seen.account.to_string()].into(),
                consumer_accounts: [seen.account.to_string()].into(),
                skip: skip.clone(),
                pinned: pinned.clone(),
                only: Some(streams.clone()),
            };
            next_move(seen.view, seen.cluster, &scope)
        })
    };
    let mut skip = around.evacuating.clone();
    skip.extend(around.system_pending.keys().cloned());
    if let Some(planned) = plan(&skip) {
        return Verdict::Move(planned);
    }
    let wanted = plan(&around.evacuating);
    if let Some(why) = account::yielded(wanted.as_ref(), &around.system_pending) {
        return hold(reason::YIELDING_TO_SYSTEM_BALANCER, why);
    }
    let settled = gate::settled_message(&around.from, seen.cluster, interval);
    let unevened = moves.placement.then(|| {
        seen.pools.pools.iter().find_map(|(pool, streams)| {
            servers::consumer_note(seen.view, seen.cluster, pool, streams)
        })
    });
    match unevened.flatten() {
        Some(note) => Verdict::Settled(format!("{settled}; {note}")),
        None => Verdict::Settled(settled),
    }
}

/// What a system balancer's gather phase found.
#[derive(Clone, Copy, Debug)]
pub struct SystemSeen<'a> {
    /// The NATS cluster its system connection reaches.
    pub cluster: &'a str,
    /// The JSZ view.
    pub view: &'a SystemView,
    /// The accounts whose stepdown export of streams, and of consumers, it reaches.
    pub reached: &'a BTreeSet<String>,
    /// Of consumers.
    pub reached_consumers: &'a BTreeSet<String>,
    /// The streams whose resource sets `placement.cluster`, or why they could not be read.
    pub pinned: Result<&'a BTreeSet<StreamKey>, &'a str>,
}

/// A system balancer's verdict: Unsettled while its NATS cluster is not; PassFailed when the
/// pinned streams could not be read; else the next move over every account reached, streams
/// under evacuation skipped, or Settled (`interval` the next pass's).
pub fn system_verdict(
    seen: &SystemSeen<'_>,
    evacuating: BTreeSet<StreamKey>,
    moves: &Moves,
    interval: &str,
) -> Verdict {
    if let Err(why) = settled(seen.view, seen.cluster) {
        return hold(reason::UNSETTLED, why);
    }
    let pinned = match seen.pinned {
        Ok(p) => p.clone(),
        Err(e) => return hold(reason::PASS_FAILED, format!("{e}; nothing is moved")),
    };
    let scope = Scope {
        leader: moves.leader,
        placement: moves.placement,
        leader_accounts: seen.reached.clone(),
        consumer_accounts: seen.reached_consumers.clone(),
        skip: evacuating,
        pinned,
        only: None,
    };
    match next_move(seen.view, seen.cluster, &scope) {
        Some(planned) => Verdict::Move(planned),
        None => Verdict::Settled(format!(
            "NATS cluster {} is Settled; next pass in {interval}",
            seen.cluster
        )),
    }
}

#[cfg(test)]
mod tests;
