//! What a NatsBalancer judges from over its account's own connection (design §6.5), which cannot
//! ping JSZ: the account's streams as `$JS.API.STREAM.LIST` reports them ([`Listed`]) read as a
//! [`SystemView`] of one account ([`account_view`]), with the consumers of those that have some
//! as `$JS.API.CONSUMER.LIST.<stream>` reports them ([`consumer_streams`], [`ListedConsumers`],
//! [`with_consumers`]), the account's Settled gate over it ([`account_settled`],
//! [`consumers_settled`]), what it yields to the system balancer ([`system_pending`],
//! [`yielded`]), what it never placement-moves ([`placement_pinned`]) and when its own move is
//! done ([`move_done`]).
//!
//! Consumers are listed, one CONSUMER.LIST per stream of the NATS cluster that has a leader and
//! a consumer (STREAM.LIST's `state.consumer_count`), because an account balancer may be the
//! only balancer of its NATS cluster (no system balancer: team self-service), and a consumer's
//! group leads and holds copies as a stream's does: left out, consumer leaders piled on one
//! server would never be evened, and the pools' skew would not count them. Streams without
//! consumers (most key-value buckets and object stores) cost no request.

use std::collections::{BTreeMap, BTreeSet};

use nats_api::jetstream::Move;
use nats_wire::monitor::{ClusterInfo, ConsumerDetail, StreamConfigView, StreamState};
use serde::Deserialize;
use serde_json::Value;

use super::PlannedMove;
use super::pools::StreamKey;
use crate::ownership::OWNER_METADATA_KEY;
use crate::system_view::{GroupSeen, ServerSeen, SystemView, consumer_seen};

/// One stream of a STREAM.LIST answer: its config and Raft group.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Listed {
    /// The stream's config.
    pub config: StreamConfigView,
    /// Its Raft group; absent on a server that is not clustered.
    pub cluster: Option<ClusterInfo>,
}

/// What [`consumer_streams`] reads of a STREAM.LIST entry: the stream, its group and its state.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Counted {
    config: StreamConfigView,
    state: StreamState,
    cluster: Option<ClusterInfo>,
}

/// The streams of a STREAM.LIST answer whose consumers the shell lists: placed in `cluster` (the
/// only one judged), with a leader (CONSUMER.LIST is answered by it) and at least one consumer
/// (`state.consumer_count`).
pub fn consumer_streams(values: &[Value], cluster: &str) -> Vec<String> {
    values
        .iter()
        .filter_map(|v| Counted::deserialize(v).ok())
        .filter(|c| {
            c.state.consumer_count > 0
                && c.cluster
                    .as_ref()
                    .is_some_and(|g| g.name == cluster && !g.leader.is_empty())
        })
        .map(|c| c.config.name)
        .collect()
}

/// The consumers of one stream as `$JS.API.CONSUMER.LIST.<stream>` answered.
#[derive(Clone, Debug, Default)]
pub struct ListedConsumers {
    /// The stream.
    pub stream: String,
    /// Its consumers' CONSUMER.INFO (name and Raft group).
    pub consumers: Vec<ConsumerDetail>,
    /// The consumers CONSUMER.LIST named as not answering (their leader silent).
    pub missing: Vec<String>,
    /// Why CONSUMER.LIST failed, when it did.
    pub unlisted: Option<String>,
}

/// `view` with the groups of the consumers listed, each after its stream's (one whose stream
/// the view does not hold is left out).
pub fn with_consumers(view: SystemView, listed: &[ListedConsumers]) -> SystemView {
    let mut groups = Vec::with_capacity(view.groups.len());
    for g in view.groups {
        let of: Vec<GroupSeen> = listed
            .iter()
            .filter(|l| l.stream == g.stream && g.consumer.is_none())
            .flat_map(|l| &l.consumers)
            .map(|c| consumer_seen(&g, c))
            .collect();
        groups.push(g);
        groups.extend(of);
    }
    groups.sort_by(|a, b| (&a.stream, &a.consumer).cmp(&(&b.stream, &b.consumer)));
    groups.dedup_by(|a, b| (&a.stream, &a.consumer) == (&b.stream, &b.consumer));
    SystemView { groups, ..view }
}

/// The streams of `account` as a view: every group once, and as servers every server holding a
/// copy of one of them (an account sees no other). Groups of every NATS cluster are kept; the
/// rules filter by cluster.
pub fn account_view(account: &str, listed: &[Listed]) -> SystemView {
    let mut groups: Vec<GroupSeen> = listed
        .iter()
        .map(|l| {
            let cluster = l.cluster.clone().unwrap_or_default();
            GroupSeen {
                account: account.to_string(),
                stream: l.config.name.clone(),
                consumer: None,
                cluster: cluster.name,
                leader: cluster.leader,
                peers: cluster.replicas.into_iter().map(|p| p.name).collect(),
                replicas: usize::try_from(l.config.num_replicas).unwrap_or(1),
                placement_cluster: l
                    .config
                    .placement
                    .as_ref()
                    .map(|p| p.cluster.clone())
                    .unwrap_or_default(),
                owner: l
                    .config
                    .metadata
                    .get(OWNER_METADATA_KEY)
                    .filter(|o| !o.is_empty())
                    .cloned(),
            }
        })
        .collect();
    groups.sort_by(|a, b| a.stream.cmp(&b.stream));
    groups.dedup_by(|a, b| a.stream == b.stream);
    let mut servers: Vec<ServerSeen> = groups
        .iter()
        .flat_map(|g| {
            g.members().map(|m| ServerSeen {
                name: m.to_string(),
                cluster: g.cluster.clone(),
                tags: Vec::new(),
            })
        })
        .collect();
    servers.sort_by(|a, b| a.name.cmp(&b.name));
    servers.dedup_by(|a, b| a.name == b.name);
    SystemView {
        servers,
        meta: None,
        meta_leader: None,
        groups,
    }
}

/// The account's Settled gate over `cluster`: why it does not hold, if it does not. Every stream
/// answered (`missing` names those whose leader did not), and every group placed there has a
/// leader, exactly its configured replicas, and every follower current and online (a server
/// restarting in a rollout leaves its copies offline or behind). The consumers' groups are
/// [`consumers_settled`]'s.
pub fn account_settled(listed: &[Listed], missing: &[String], cluster: &str) -> Result<(), String> {
    if let Some(m) = missing.first() {
        return Err(format!("stream {m} did not answer STREAM.LIST"));
    }
    for l in listed {
        let Some(c) = l.cluster.as_ref().filter(|c| c.name == cluster) else {
            continue;
        };
        let name = &l.config.name;
        if c.leader.is_empty() {
            return Err(format!("stream {name} has no leader"));
        }
        if let Some(p) = c.replicas.iter().find(|p| p.offline || !p.current) {
            let state = if p.offline { "offline" } else { "not current" };
            return Err(format!(
                "the copy of stream {name} on {} is {state}",
                p.name
            ));
        }
        let want = usize::try_from(l.config.num_replicas).unwrap_or(1).max(1);
        if c.replicas.len() + 1 != want {
            return Err(format!(
                "stream {name} is not as its config asks (a move or election in progress)"
            ));
        }
    }
    Ok(())
}

/// The account's Settled gate over its consumers' groups (those of the streams of the NATS
/// cluster judged, [`consumer_streams`]): each stream's were listed and each answered, and each
/// group has a leader and every follower current and online. A consumer's replicas follow its
/// stream's, so a group mid-move shows on the stream's own group.
pub fn consumers_settled(listed: &[ListedConsumers]) -> Result<(), String> {
    for l in listed {
        let name = &l.stream;
        if let Some(why) = &l.unlisted {
            return Err(format!(
                "the consumers of stream {name} were not listed: {why}"
            ));
        }
        if let Some(c) = l.missing.first() {
            return Err(format!(
                "consumer {c} of stream {name} did not answer CONSUMER.LIST"
            ));
        }
        for consumer in &l.consumers {
            let c = consumer.cluster.clone().unwrap_or_default();
            let what = super::moved(name, Some(&consumer.name));
            if c.leader.is_empty() {
                return Err(format!("{what} has no leader"));
            }
            if let Some(p) = c.replicas.iter().find(|p| p.offline || !p.current) {
                let state = if p.offline { "offline" } else { "not current" };
                return Err(format!("the copy of {what} on {} is {state}", p.name));
            }
        }
    }
    Ok(())
}

/// A NatsSystemBalancer's claim as a NatsBalancer reads it: the NATS cluster it balances, the
/// accounts whose leaders it moves (none with leader moves off), whether it makes placement
/// moves, and the streams it has a move pending on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SystemCover {
    /// `NatsSystemBalancer ns/name`.
    pub name: String,
    /// Its NATS cluster.
    pub cluster: String,
    /// Accounts whose leaders it moves.
    pub leader_accounts: BTreeSet<String>,
    /// Whether it makes placement moves.
    pub placement: bool,
    /// (account, stream) with a move pending.
    pub pending: BTreeSet<StreamKey>,
}

/// The streams the system balancers have a move pending on, each with the balancer that asked
/// for it (`NatsSystemBalancer ns/name`): an account balancer skips them (§6.5, "yields to the
/// system balancer, including any stream the system balancer has a move pending on").
///
/// An account balancer does not stop because a system balancer covers its NATS cluster: both
/// balance (story 09: the requests balancer Balancing and Settled beside a NatsSystemBalancer
/// with full capabilities), one move at a time through the move lease, and while the system
/// balancer holds it the account balancer holds with MoveLeaseHeld (story 07).
pub fn system_pending(covers: &[SystemCover]) -> BTreeMap<StreamKey, String> {
    covers
        .iter()
        .flat_map(|c| c.pending.iter().map(|k| (k.clone(), c.name.clone())))
        .collect()
}

/// Holding YieldingToSystemBalancer: the move this balancer would make next, had it not skipped
/// the streams of `pending`, is on one of them; `None` when it is not (or there is none).
pub fn yielded(
    wanted: Option<&PlannedMove>,
    pending: &BTreeMap<StreamKey, String>,
) -> Option<String> {
    let m = wanted?;
    let by = pending.get(&(m.account.clone(), m.stream.clone()))?;
    Some(format!(
        "{by} has a move pending on stream {}: this balancer yields to it",
        m.stream
    ))
}

/// The streams of `view` an account balancer never placement-moves: those whose resource (by
/// the UIDs of `placed`, the resources setting `placement.cluster`) or config pins a NATS
/// cluster — a declared placement is never widened or overridden — and R1 streams, whose only
/// copy a peer removal would drop. Judged on the streams' own groups (an R1 consumer does not
/// pin its stream).
pub fn placement_pinned(view: &SystemView, placed: &BTreeSet<String>) -> BTreeSet<StreamKey> {
    view.groups
        .iter()
        .filter(|g| g.consumer.is_none())
        .filter(|g| {
            g.replicas < 2
                || !g.placement_cluster.is_empty()
                || g.owner.as_ref().is_some_and(|o| placed.contains(o))
        })
        .map(|g| (g.account.clone(), g.stream.clone()))
        .collect()
}

/// Whether the balancer's own move is done in `view` ([`super::move_done`]): the leader left
/// `from` (leader move, of the stream's group or, with `consumer` set, the consumer's); the copy
/// left `from` and the group is as its config asks (placement move). A stream or consumer gone
/// is done.
pub fn move_done(view: &SystemView, m: &Move) -> bool {
    super::move_done(view, m)
}

#[cfg(test)]
mod tests;
