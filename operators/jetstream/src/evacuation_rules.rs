//! The evacuation's rules (design §6.6), each a function of what one JSZ ping showed
//! ([`SystemView`]) and of the resources that own stream groups:
//!
//! - [`refusal`] — it refuses to start while a server of the source carries every target tag
//!   (a move could land on the source again).
//! - [`servers_down`] — no move is made, and none counted done, while a server of the source
//!   does not answer, the meta group has no leader, or its leader reports a server offline.
//! - [`plan`] — every stream group on the source is moved, one `ACCOUNT.STREAM.MOVE` at a time,
//!   save those whose resource sets `placement.cluster` (one naming the source is listed as
//!   pinned); a move requested earlier is done once its group is off the source and as its
//!   config asks (a leader and exactly its replicas); moved groups with no resource whose config
//!   still names the source are listed as stale placements.
//! - [`ready`] — Ready: Moving while anything is on its way or left, PinnedResourcesRemain while
//!   only pinned resources remain, Evacuated once nothing remains.

use std::collections::BTreeSet;

use controller_kit::conditions::Decided;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nats_api::jetstream::{PinnedResource, RequestedMove, StalePlacement, condition, reason};

use crate::system_view::{GroupSeen, SystemView};

/// A resource that owns (or may own) a stream group: a NatsStream, NatsKeyValue or
/// NatsObjectStore, with the NATS cluster its own spec pins it to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// NatsStream, NatsKeyValue or NatsObjectStore.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID (what the ownership marker of its stream names).
    pub uid: String,
    /// `spec.placement.cluster`, when set.
    pub placement_cluster: Option<String>,
}

/// The servers of `from` that carry every one of `tags`, as a refusal's message; `None` when
/// none does and the evacuation may start.
pub fn refusal(view: &SystemView, from: &str, tags: &[String]) -> Option<String> {
    let carrying: Vec<&str> = view
        .servers_of(from)
        .filter(|s| s.carries_all(tags))
        .map(|s| s.name.as_str())
        .collect();
    (!carrying.is_empty()).then(|| {
        format!(
            "server {} of {from} carries the target tags {}: a move could land on the source; \
             to.serverTags must name servers outside it",
            carrying.join(", "),
            tags.join(", ")
        )
    })
}

/// Why no move may be made now, `None` when every server needed answers: the meta group has no
/// leader, its leader reports a server offline, or a server holding a copy of a group of the
/// source (or any meta peer) did not answer.
pub fn servers_down(view: &SystemView, from: &str) -> Option<String> {
    let Some(meta) = &view.meta else {
        return Some("the meta group has no leader".to_string());
    };
    let offline: Vec<&str> = meta
        .peers
        .iter()
        .filter(|p| p.offline)
        .map(|p| p.name.as_str())
        .collect();
    if !offline.is_empty() {
        return Some(format!(
            "the meta leader {} reports {} offline",
            meta.leader,
            offline.join(", ")
        ));
    }
    let answered: BTreeSet<&str> = view.servers.iter().map(|s| s.name.as_str()).collect();
    let expected = view
        .groups
        .iter()
        .filter(|g| g.cluster == from)
        .flat_map(GroupSeen::members)
        .chain(meta.peers.iter().map(|p| p.name.as_str()));
    let silent: BTreeSet<&str> = expected.filter(|s| !answered.contains(s)).collect();
    (!silent.is_empty()).then(|| {
        format!(
            "{} did not answer the JSZ ping",
            silent.into_iter().collect::<Vec<_>>().join(", ")
        )
    })
}

/// Whether `g` has a copy on the source: placed in it, or with a member among its servers.
fn on_source(g: &GroupSeen, from: &str, source: &BTreeSet<&str>) -> bool {
    g.cluster == from || g.members().any(|m| source.contains(m))
}

/// What one pass of the evacuation found, and the move it makes next.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvacuationPlan {
    /// Moves requested before that are done now (counted moved).
    pub done: Vec<RequestedMove>,
    /// Moves requested and not done yet.
    pub in_flight: Vec<RequestedMove>,
    /// The group to move now (account, stream): only when none is in flight.
    pub next: Option<(String, String)>,
    /// Groups on the source, neither pinned nor in flight.
    pub remaining: u32,
    /// Resources whose spec pins them to the source, with a group there.
    pub pinned: Vec<PinnedResource>,
    /// Groups off the source, with no resource, whose config still names it.
    pub stale: Vec<StalePlacement>,
    /// Groups on the source whose move nats-server refused lately (account, stream): passed
    /// over for the next move, counted remaining.
    pub refused: Vec<(String, String)>,
}

impl EvacuationPlan {
    /// The plan once its next move was requested at `time`: in flight, no longer remaining.
    pub fn requested(mut self, time: Time) -> Self {
        if let Some((account, stream)) = self.next.take() {
            self.in_flight.push(RequestedMove {
                account,
                stream,
                time: Some(time),
            });
            self.remaining = self.remaining.saturating_sub(1);
        }
        self
    }
}

/// The evacuation's pass over `view`: moves requested earlier (`requested`) judged, the groups
/// left on `from` counted, the next move chosen (groups in account, then name order; one in
/// flight at a time; none of those whose move nats-server refused lately, `refused`, so that
/// one stream nats-server cannot place, e.g. one whose configured placement tags no target
/// server carries, does not hold back the rest), pinned resources and stale placements listed.
pub fn plan(
    view: &SystemView,
    from: &str,
    owners: &[Owner],
    requested: &[RequestedMove],
    refused: &BTreeSet<(String, String)>,
) -> EvacuationPlan {
    let source: BTreeSet<&str> = view.servers_of(from).map(|s| s.name.as_str()).collect();
    let group = |account: &str, stream: &str| {
        view.groups
            .iter()
            .find(|g| g.account == account && g.stream == stream)
    };
    let owner_of = |g: &GroupSeen| {
        g.owner
            .as_deref()
            .and_then(|uid| owners.iter().find(|o| o.uid == uid))
    };
    let mut out = EvacuationPlan::default();
    for r in requested {
        match group(&r.account, &r.stream) {
            // Deleted meanwhile: neither moved nor in flight.
            None => {}
            Some(g) if !on_source(g, from, &source) && g.settled() => out.done.push(r.clone()),
            Some(_) => out.in_flight.push(r.clone()),
        }
    }
    let in_flight: BTreeSet<(&str, &str)> = out
        .in_flight
        .iter()
        .map(|r| (r.account.as_str(), r.stream.as_str()))
        .collect();
    let mut pinned = BTreeSet::new();
    for g in &view.groups {
        let owner = owner_of(g);
        if !on_source(g, from, &source) {
            if owner.is_none() && g.placement_cluster == from {
                out.stale.push(StalePlacement {
                    account: g.account.clone(),
                    name: g.stream.clone(),
                });
            }
            continue;
        }
        match owner {
            Some(o) if o.placement_cluster.is_some() => {
                if o.placement_cluster.as_deref() == Some(from) {
                    pinned.insert((o.kind.clone(), o.namespace.clone(), o.name.clone()));
                }
            }
            _ if in_flight.contains(&(g.account.as_str(), g.stream.as_str())) => {}
            _ => {
                out.remaining += 1;
                let key = (g.account.clone(), g.stream.clone());
                if refused.contains(&key) {
                    // nats-server refused its move lately: the others go first, it is asked
                    // again later, and it still counts as remaining.
                    out.refused.push(key);
                } else if out.next.is_none() && out.in_flight.is_empty() {
                    out.next = Some(key);
                }
            }
        }
    }
    out.pinned = pinned
        .into_iter()
        .map(|(kind, namespace, name)| PinnedResource {
            kind,
            namespace,
            name,
        })
        .collect();
    out
}

/// Ready, from the plan after its move (if any) was requested and the total moved so far.
pub fn ready(plan: &EvacuationPlan, moved: u32, from: &str) -> Decided {
    let pinned = || {
        plan.pinned
            .iter()
            .map(|p| format!("{} {}/{}", p.kind, p.namespace, p.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let in_flight = plan.in_flight.len() as u32;
    if in_flight > 0 || plan.remaining > 0 {
        let total = moved + in_flight + plan.remaining;
        let mut message =
            format!("{moved} of {total} streams moved off {from}; {in_flight} in flight");
        if !plan.refused.is_empty() {
            let refused: Vec<String> = plan
                .refused
                .iter()
                .map(|(a, s)| format!("{s} of account {a}"))
                .collect();
            message.push_str(&format!(
                "; nats-server refused moving {} (asked again later; Events MoveRefused say why)",
                refused.join(", ")
            ));
        }
        if !plan.pinned.is_empty() {
            message.push_str(&format!("; {} pinned to {from}", pinned()));
        }
        return Decided::new(condition::READY, false, reason::MOVING, message);
    }
    if !plan.pinned.is_empty() {
        return Decided::new(
            condition::READY,
            false,
            reason::PINNED_RESOURCES_REMAIN,
            format!(
                "{moved} streams moved off {from}; {} set placement.cluster {from} and are left \
                 to their owners",
                pinned()
            ),
        );
    }
    Decided::new(
        condition::READY,
        true,
        reason::EVACUATED,
        format!("{moved} streams moved off {from}; none remains"),
    )
}

#[cfg(test)]
mod tests;
