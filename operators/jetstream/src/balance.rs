//! The balancers' rules (design §6.5), each a function of what one JSZ ping showed
//! ([`SystemView`]) within one NATS cluster, the balancer's scope and boundary:
//!
//! - [`loads`] and [`skew`] — what each server of the NATS cluster holds (group leaders,
//!   copies; a consumer's group counts as a group), and the difference between the most and the
//!   fewest.
//! - [`settled`] — the Settled gate: every server holding a copy of a group of the NATS cluster
//!   answered, the meta group has a leader (and, where it answered, reports no server offline),
//!   and every group placed there is as its config asks.
//!   No move is made while it does not hold.
//! - [`next_move`] — at most one move per pass: a leader move ([`leader_move`]: the group led
//!   by the server leading the most steps down toward the member leading the fewest) where
//!   leader skew is over one and its account can be reached, stream leaders judged first and
//!   consumer leaders apart after them ([`judged_skew`]), so that stream leaders end within one
//!   of even and not only the sum of both kinds;
//!   else, when opted in, a placement move ([`placement_move`]: a copy of a stream on the server
//!   holding the most moves elsewhere within the NATS cluster, its consumers following) where
//!   replica skew is over one. Never the meta group, never across NATS clusters, never a
//!   stream whose resource sets `placement.cluster` (placement), never a stream, nor a consumer
//!   of one, an evacuation or another balancer is moving.
//!
//! A NatsBalancer's pools are [`pools`]'s; what it judges from over its account's own
//! connection, and whom it yields to, [`account`]'s; both balancers' judge phase [`judge`]'s.

use std::collections::{BTreeMap, BTreeSet};

use nats_api::jetstream::{Capabilities, LeaderCapability, Move, MoveKind, ServerLoad, Skew};

use crate::system_view::{GroupSeen, SystemView};

/// How messages name what a move moves; it lives with the group it names, in `system_view`.
pub use crate::system_view::moved;

pub mod account;
pub mod gate;
pub mod judge;
pub mod pools;
pub mod servers;

/// What each answering server of `cluster` holds, by name.
pub fn loads(view: &SystemView, cluster: &str) -> Vec<ServerLoad> {
    let mut by_name: BTreeMap<&str, ServerLoad> = view
        .servers_of(cluster)
        .map(|s| {
            (
                s.name.as_str(),
                ServerLoad {
                    name: s.name.clone(),
                    ..Default::default()
                },
            )
        })
        .collect();
    for g in view.groups.iter().filter(|g| g.cluster == cluster) {
        if let Some(l) = by_name.get_mut(g.leader.as_str()) {
            l.leaders += 1;
        }
        for m in g.members() {
            if let Some(l) = by_name.get_mut(m) {
                l.replicas += 1;
            }
        }
    }
    by_name.into_values().collect()
}

/// The groups of `view` of one kind: the consumers' groups when `consumers`, else the streams'
/// own.
fn of_kind(view: &SystemView, consumers: bool) -> SystemView {
    SystemView {
        groups: view
            .groups
            .iter()
            .filter(|g| g.consumer.is_some() == consumers)
            .cloned()
            .collect(),
        ..view.clone()
    }
}

/// The skew a balancer evens in `cluster`: leaders among the streams' groups and among the
/// consumers' groups, each kind apart (the larger of the two: stream leaders are even when
/// consumer leaders are, not only their sum), and copies over every group.
pub fn judged_skew(view: &SystemView, cluster: &str) -> Skew {
    let leaders = [false, true]
        .into_iter()
        .map(|consumers| skew(&loads(&of_kind(view, consumers), cluster)).leaders)
        .max()
        .unwrap_or(0);
    Skew {
        leaders,
        replicas: skew(&loads(view, cluster)).replicas,
    }
}

/// The difference between the most and the fewest leaders, and copies, a server holds.
pub fn skew(loads: &[ServerLoad]) -> Skew {
    let spread = |f: fn(&ServerLoad) -> u32| {
        let max = loads.iter().map(f).max().unwrap_or(0);
        let min = loads.iter().map(f).min().unwrap_or(0);
        max - min
    };
    Skew {
        leaders: spread(|l| l.leaders),
        replicas: spread(|l| l.replicas),
    }
}

/// The Settled gate over `cluster`: why it does not hold, if it does not.
pub fn settled(view: &SystemView, cluster: &str) -> Result<(), String> {
    if view.meta_leader.is_none() && view.meta.is_none() {
        return Err("the meta group has no leader".into());
    }
    if let Some(p) = view.meta.iter().flat_map(|m| &m.peers).find(|p| p.offline) {
        return Err(format!("the meta leader reports {} offline", p.name));
    }
    let answered: BTreeSet<&str> = view.servers.iter().map(|s| s.name.as_str()).collect();
    for g in view.groups.iter().filter(|g| g.cluster == cluster) {
        if let Some(m) = g.members().find(|m| !answered.contains(m)) {
            return Err(format!(
                "{m}, holding a copy of {} of account {}, did not answer",
                g.describe(),
                g.account
            ));
        }
        if !g.settled() {
            return Err(format!(
                "{} of account {} is not as its config asks (a move or election in progress)",
                g.describe(),
                g.account
            ));
        }
    }
    Ok(())
}

/// A NatsSystemBalancer's `status.capabilities`: placement moves always (the system account may
/// move any stream); leader moves as far as the stepdown exports of the accounts with groups in
/// the NATS cluster are reached — `streams` those whose streams' stepdown is, `consumers` those
/// whose consumers' is. Full when every account has both, None when none has its streams', else
/// Partial, the reason naming who lacks which.
pub fn capabilities(
    accounts: &BTreeSet<String>,
    streams: &BTreeSet<String>,
    consumers: &BTreeSet<String>,
) -> Capabilities {
    let without = |reached: &BTreeSet<String>| -> Vec<&str> {
        accounts
            .iter()
            .filter(|a| !reached.contains(*a))
            .map(String::as_str)
            .collect()
    };
    let (no_stream, no_consumer) = (without(streams), without(consumers));
    // An account without the streams' stepdown is named once, for that.
    let no_consumer: Vec<&str> = no_consumer
        .into_iter()
        .filter(|a| !no_stream.contains(a))
        .collect();
    let mut reasons = Vec::new();
    if !no_stream.is_empty() {
        reasons.push(format!(
            "{} of {} accounts carry no jetstream-stepdown export; their leaders are not moved: {}",
            no_stream.len(),
            accounts.len(),
            no_stream.join(", ")
        ));
    }
    if !no_consumer.is_empty() {
        reasons.push(format!(
            "{} of {} accounts export no consumer stepdown; their consumers' leaders are not \
             moved: {}",
            no_consumer.len(),
            accounts.len(),
            no_consumer.join(", ")
        ));
    }
    let leader = if reasons.is_empty() {
        LeaderCapability::Full
    } else if no_stream.len() == accounts.len() {
        LeaderCapability::None
    } else {
        LeaderCapability::Partial
    };
    Capabilities {
        placement: true,
        leader: Some(leader),
        leader_reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
    }
}

/// What a balancer may move.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// Leader moves are on.
    pub leader: bool,
    /// Placement moves are on.
    pub placement: bool,
    /// Accounts whose stream leaders can be moved (their jetstream-stepdown export reached).
    pub leader_accounts: BTreeSet<String>,
    /// Accounts whose consumer leaders can be moved (their consumer stepdown export reached).
    pub consumer_accounts: BTreeSet<String>,
    /// Streams (account, name) not to move at all, nor their consumers' leaders: under
    /// evacuation, or with another balancer's move pending.
    pub skip: BTreeSet<(String, String)>,
    /// Streams (account, name) whose resource sets `placement.cluster`: never placement-moved.
    pub pinned: BTreeSet<(String, String)>,
    /// Only these streams (account, name) and their consumers, when set: a pool.
    pub only: Option<BTreeSet<(String, String)>>,
}

impl Scope {
    fn admits(&self, g: &GroupSeen) -> bool {
        let key = g.stream_key();
        !self.skip.contains(&key) && self.only.as_ref().is_none_or(|o| o.contains(&key))
    }

    /// Whether the group's leader can be moved: its account's stepdown of streams, or of
    /// consumers for a consumer's group, is reached.
    pub fn steps_down(&self, g: &GroupSeen) -> bool {
        let accounts = if g.consumer.is_some() {
            &self.consumer_accounts
        } else {
            &self.leader_accounts
        };
        accounts.contains(&g.account)
    }
}

/// Whether a move requested is done in `view`: the leader of its group (the stream's, or with
/// `consumer` set the consumer's) left `from` (leader move); the copy left `from` and the group is
/// as its config asks (placement move). A group gone is done. The account is matched when the
/// move names one.
pub fn move_done(view: &SystemView, m: &Move) -> bool {
    let Some(g) = view.groups.iter().find(|g| {
        m.account.as_deref().is_none_or(|a| a == g.account)
            && g.stream == m.stream
            && g.consumer == m.consumer
    }) else {
        return true;
    };
    let from = m.from.as_deref().unwrap_or_default();
    match m.kind {
        MoveKind::Leader => !g.leader.is_empty() && g.leader != from,
        MoveKind::Placement => g.settled() && g.members().all(|s| s != from),
    }
}

/// One move a pass makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedMove {
    /// Leader or Placement.
    pub kind: MoveKind,
    /// The stream's account.
    pub account: String,
    /// The stream.
    pub stream: String,
    /// The consumer whose leader moves (a leader move of a consumer's group); `None` for the
    /// stream's own group.
    pub consumer: Option<String>,
    /// The server the leader or copy leaves.
    pub from: String,
    /// The server the leader goes to (a placement move lets nats-server choose within the
    /// NATS cluster).
    pub to: Option<String>,
}

impl PlannedMove {
    /// ` to <server>` for a leader move toward a chosen member; empty when nats-server
    /// chooses.
    pub fn toward(&self) -> String {
        self.to
            .as_deref()
            .map(|t| format!(" to {t}"))
            .unwrap_or_default()
    }
}

/// The groups of `cluster` a scope admits, in account then name order.
fn groups_in<'a>(
    view: &'a SystemView,
    cluster: &'a str,
    scope: &'a Scope,
) -> impl Iterator<Item = &'a GroupSeen> {
    view.groups
        .iter()
        .filter(move |g| g.cluster == cluster && scope.admits(g))
}

/// The move this pass makes within `cluster`, if any (see the module doc). Loads are counted
/// over the groups the scope admits, so a pool is balanced within itself.
pub fn next_move(view: &SystemView, cluster: &str, scope: &Scope) -> Option<PlannedMove> {
    let admitted = SystemView {
        groups: groups_in(view, cluster, scope).cloned().collect(),
        ..view.clone()
    };
    // Stream leaders first, then consumer leaders, each kind evened apart.
    for consumers in [false, true].into_iter().filter(|_| scope.leader) {
        let kind = of_kind(&admitted, consumers);
        let loads = loads(&kind, cluster);
        if skew(&loads).leaders > 1
            && let Some(m) = leader_move(&kind.groups, &loads, scope)
        {
            return Some(m);
        }
    }
    let loads = loads(&admitted, cluster);
    if scope.placement && skew(&loads).replicas > 1 {
        return placement_move(&admitted.groups, &loads, &scope.pinned);
    }
    None
}

/// A leader move: from the server leading the most (the next busiest when none of its groups
/// can go), a group it leads, of a stream or of a consumer, whose account's stepdown is reached
/// ([`Scope::steps_down`]) and which has a member leading at least two fewer, toward the member
/// leading the fewest.
/// Ties go to the least-led target, then account, stream and consumer order (a stream's own
/// group before its consumers').
pub fn leader_move(
    groups: &[GroupSeen],
    loads: &[ServerLoad],
    scope: &Scope,
) -> Option<PlannedMove> {
    let leaders: BTreeMap<&str, u32> = loads.iter().map(|l| (l.name.as_str(), l.leaders)).collect();
    let mut by_most: Vec<&ServerLoad> = loads.iter().collect();
    by_most.sort_by(|a, b| b.leaders.cmp(&a.leaders).then(a.name.cmp(&b.name)));
    by_most
        .iter()
        .take_while(|s| s.leaders > 0)
        .find_map(|source| {
            let (g, to) = groups
                .iter()
                .filter(|g| g.leader == source.name && scope.steps_down(g))
                .filter_map(|g| {
                    let to = g
                        .peers
                        .iter()
                        .filter(|p| {
                            leaders
                                .get(p.as_str())
                                .is_some_and(|n| n + 1 < source.leaders)
                        })
                        .min_by(|a, b| {
                            leaders[a.as_str()].cmp(&leaders[b.as_str()]).then(a.cmp(b))
                        })?;
                    Some((g, to))
                })
                .min_by(|(ga, ta), (gb, tb)| {
                    leaders[ta.as_str()].cmp(&leaders[tb.as_str()]).then(
                        (&ga.account, &ga.stream, &ga.consumer).cmp(&(
                            &gb.account,
                            &gb.stream,
                            &gb.consumer,
                        )),
                    )
                })?;
            Some(PlannedMove {
                kind: MoveKind::Leader,
                account: g.account.clone(),
                stream: g.stream.clone(),
                consumer: g.consumer.clone(),
                from: source.name.clone(),
                to: Some(to.clone()),
            })
        })
}

/// A placement move: the first stream (never a consumer's group alone: consumers follow their
/// stream) with a copy on the server holding the most copies and none on the server holding the
/// fewest, not `pinned` and with no `placement.cluster` in its config (declared placement is
/// never overridden, whether or not a resource declares it), moved off the former; nats-server
/// picks the new server within the NATS cluster. Its consumers' copies on the former go with it
/// ([`carried`]), so a stream is chosen only when what it carries is less than the difference
/// between the two servers: the move evens them rather than turning the pile around.
pub fn placement_move(
    groups: &[GroupSeen],
    loads: &[ServerLoad],
    pinned: &BTreeSet<(String, String)>,
) -> Option<PlannedMove> {
    let most = loads
        .iter()
        .max_by(|a, b| a.replicas.cmp(&b.replicas).then(b.name.cmp(&a.name)))?;
    let fewest = loads
        .iter()
        .min_by(|a, b| a.replicas.cmp(&b.replicas).then(a.name.cmp(&b.name)))?;
    let gap = most.replicas.saturating_sub(fewest.replicas);
    let g = groups.iter().find(|g| {
        g.consumer.is_none()
            && !pinned.contains(&g.stream_key())
            && g.placement_cluster.is_empty()
            && g.members().any(|m| m == most.name)
            && g.members().all(|m| m != fewest.name)
            && carried(groups, g, &most.name) < gap
    })?;
    Some(PlannedMove {
        kind: MoveKind::Placement,
        account: g.account.clone(),
        stream: g.stream.clone(),
        consumer: None,
        from: most.name.clone(),
        to: None,
    })
}

#[cfg(test)]
mod tests;

/// The copies on `server` a placement move of stream `g` off it takes along: the stream's own
/// and each of its consumers' there (nats-server remaps a consumer's peers with its stream's:
/// jetstream_cluster.go `removePeerFromStreamLocked`).
pub fn carried(groups: &[GroupSeen], g: &GroupSeen, server: &str) -> u32 {
    let n = groups
        .iter()
        .filter(|c| c.account == g.account && c.stream == g.stream && c.cluster == g.cluster)
        .filter(|c| c.members().any(|m| m == server))
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}
