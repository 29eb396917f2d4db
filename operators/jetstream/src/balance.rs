//! The balancers' rules (design §6.5), each a function of what one JSZ ping showed
//! ([`SystemView`]) within one NATS cluster, the balancer's scope and boundary:
//!
//! - [`loads`] and [`skew`] — what each server of the NATS cluster holds (group leaders,
//!   copies), and the difference between the most and the fewest.
//! - [`settled`] — the Settled gate: every server holding a copy of a group of the NATS cluster
//!   answered, the meta group has a leader (and, where it answered, reports no server offline),
//!   and every group placed there is as its config asks.
//!   No move is made while it does not hold.
//! - [`next_move`] — at most one move per pass: a leader move (the group led by the server
//!   leading the most steps down toward the member leading the fewest) where leader skew is
//!   over one and its account can be reached; else, when opted in, a placement move (a copy on
//!   the server holding the most moves elsewhere within the NATS cluster) where replica skew is
//!   over one. Never the meta group, never across NATS clusters, never a stream whose resource
//!   sets `placement.cluster` (placement), never a stream an evacuation or another balancer is
//!   moving.
//!
//! A NatsBalancer's pools are [`pools`]'s; what it judges from over its account's own
//! connection, and whom it yields to, [`account`]'s.

use std::collections::{BTreeMap, BTreeSet};

use nats_api::jetstream::{MoveKind, ServerLoad, Skew};

use crate::system_view::{GroupSeen, SystemView};

pub mod account;
pub mod pools;

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
                "{m}, holding a copy of stream {} of account {}, did not answer",
                g.stream, g.account
            ));
        }
        if !g.settled() {
            return Err(format!(
                "stream {} of account {} is not as its config asks (a move or election in progress)",
                g.stream, g.account
            ));
        }
    }
    Ok(())
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
    /// Streams (account, name) not to move at all: under evacuation, or with another
    /// balancer's move pending.
    pub skip: BTreeSet<(String, String)>,
    /// Streams (account, name) whose resource sets `placement.cluster`: never placement-moved.
    pub pinned: BTreeSet<(String, String)>,
    /// Only these streams (account, name), when set: a pool.
    pub only: Option<BTreeSet<(String, String)>>,
}

impl Scope {
    fn admits(&self, g: &GroupSeen) -> bool {
        let key = (g.account.clone(), g.stream.clone());
        !self.skip.contains(&key) && self.only.as_ref().is_none_or(|o| o.contains(&key))
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
    /// The server the leader or copy leaves.
    pub from: String,
    /// The server the leader goes to (a placement move lets nats-server choose within the
    /// NATS cluster).
    pub to: Option<String>,
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
    let loads = loads(&admitted, cluster);
    let leaders: BTreeMap<&str, u32> = loads.iter().map(|l| (l.name.as_str(), l.leaders)).collect();
    let skew = skew(&loads);
    if scope.leader && skew.leaders > 1 {
        let mut by_most: Vec<&ServerLoad> = loads.iter().collect();
        by_most.sort_by(|a, b| b.leaders.cmp(&a.leaders).then(a.name.cmp(&b.name)));
        for source in by_most.iter().take_while(|s| s.leaders > 0) {
            let found = admitted
                .groups
                .iter()
                .filter(|g| g.leader == source.name && scope.leader_accounts.contains(&g.account))
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
                    leaders[ta.as_str()]
                        .cmp(&leaders[tb.as_str()])
                        .then((&ga.account, &ga.stream).cmp(&(&gb.account, &gb.stream)))
                });
            if let Some((g, to)) = found {
                return Some(PlannedMove {
                    kind: MoveKind::Leader,
                    account: g.account.clone(),
                    stream: g.stream.clone(),
                    from: source.name.clone(),
                    to: Some(to.clone()),
                });
            }
        }
    }
    if scope.placement && skew.replicas > 1 {
        let most = loads
            .iter()
            .max_by(|a, b| a.replicas.cmp(&b.replicas).then(b.name.cmp(&a.name)))?;
        let fewest = loads
            .iter()
            .min_by(|a, b| a.replicas.cmp(&b.replicas).then(a.name.cmp(&b.name)))?;
        let g = admitted.groups.iter().find(|g| {
            !scope
                .pinned
                .contains(&(g.account.clone(), g.stream.clone()))
                && g.members().any(|m| m == most.name)
                && g.members().all(|m| m != fewest.name)
        })?;
        return Some(PlannedMove {
            kind: MoveKind::Placement,
            account: g.account.clone(),
            stream: g.stream.clone(),
            from: most.name.clone(),
            to: None,
        });
    }
    None
}

#[cfg(test)]
mod tests;
