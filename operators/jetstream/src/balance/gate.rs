//! What a NatsBalancer's Settled gate judges from (design §6.5: "its Settled gate reads only that
//! NATS cluster (a cluster-filtered PING.JSZ)").
//!
//! An account user cannot ping `$SYS` JSZ: over its own connection a NatsBalancer sees only the
//! servers holding a copy of its own streams. But the JetStream controller is one leader-elected
//! process, and its NatsSystemBalancers (a cluster-filtered JSZ ping) and NatsClusterEvacuations
//! (a JSZ ping of the whole NATS system) read every account over system credentials each pass;
//! each such pass leaves what it saw of a NATS cluster in the controller's memory as a
//! [`Sighting`]. The choice ([`gate_from`]):
//!
//! - a sighting of the balancer's NATS cluster taken less than [`RECENT`] ago, in which a server
//!   of that NATS cluster answered: the gate judges the whole NATS cluster ([`account_gate`]) —
//!   the account's own streams as STREAM.LIST reports them this pass, then, as the sighting
//!   shows them, the meta group (a leader, no server reported offline), every server holding a
//!   copy of a group placed there (answered), and every group placed there of every account (a
//!   leader, its configured copies, every follower current and online as its leader reports).
//!   So a stream of another account left behind by a restart holds the account balancer too.
//! - otherwise: the gate judges from the account's own streams alone, and its Holding message
//!   says so ("judged from the account's own streams: no system view of NATS cluster c1").

use std::time::{Duration, Instant};

use nats_wire::Reply;
use nats_wire::monitor::Jsz;

use super::account::{Listed, account_settled};
use crate::system_view::SystemView;

/// How old a sighting may be and still judge a NATS cluster: two passes of a system balancer at
/// its default minute.
pub const RECENT: Duration = Duration::from_secs(120);

/// A follower its group's leader reports behind or offline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lagging {
    /// The group's account (JSZ's id).
    pub account: String,
    /// The stream.
    pub stream: String,
    /// The NATS cluster the group is placed in.
    pub cluster: String,
    /// The follower's server_name.
    pub peer: String,
    /// Offline (else only not current).
    pub offline: bool,
}

/// What one system-credentials pass saw of the NATS system: who took it and when, the view, and
/// the followers each group's leader reported behind or offline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sighting {
    /// `NatsSystemBalancer ns/name` or `NatsClusterEvacuation ns/name`.
    pub by: String,
    /// When the ping was answered.
    pub at: Instant,
    /// What it showed.
    pub view: SystemView,
    /// Followers behind or offline, as their group's leader reports them.
    pub lagging: Vec<Lagging>,
}

impl Sighting {
    /// The sighting of a JSZ ping (asked with accounts and streams) whose view is `view`.
    pub fn of(by: String, at: Instant, view: SystemView, replies: &[Reply<Jsz>]) -> Self {
        Sighting {
            by,
            at,
            view,
            lagging: lagging(replies),
        }
    }
}

/// Every follower a group's leader reports not current or offline (a follower's own report of
/// its peers is not read: it may lag behind).
pub fn lagging(replies: &[Reply<Jsz>]) -> Vec<Lagging> {
    let mut out = Vec::new();
    for r in replies {
        for a in &r.data.account_details {
            let account = if a.id.is_empty() { &a.name } else { &a.id };
            for s in &a.streams {
                let Some(c) = s.cluster.as_ref().filter(|c| c.leader == r.server.name) else {
                    continue;
                };
                for p in c.replicas.iter().filter(|p| p.offline || !p.current) {
                    out.push(Lagging {
                        account: account.clone(),
                        stream: s.name.clone(),
                        cluster: c.name.clone(),
                        peer: p.name.clone(),
                        offline: p.offline,
                    });
                }
            }
        }
    }
    out
}

/// What the gate judges from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateFrom<'a> {
    /// The whole NATS cluster, as this sighting shows it (and the account's own streams).
    Cluster(&'a Sighting),
    /// The account's own streams alone; why no sighting serves.
    Account(String),
}

/// The choice: the sighting of NATS cluster `cluster` (the last one recorded, if any) when it is
/// less than [`RECENT`] old at `now` and a server of that NATS cluster answered it; else the
/// account's own streams, saying why.
pub fn gate_from<'a>(sighting: Option<&'a Sighting>, cluster: &str, now: Instant) -> GateFrom<'a> {
    match sighting {
        Some(s) if now.saturating_duration_since(s.at) >= RECENT => GateFrom::Account(format!(
            "no system view of NATS cluster {cluster} in the last {}s",
            RECENT.as_secs()
        )),
        Some(s) if s.view.servers_of(cluster).next().is_some() => GateFrom::Cluster(s),
        _ => GateFrom::Account(format!("no system view of NATS cluster {cluster}")),
    }
}

/// The judgement: why the account balancer's gate over `cluster` does not hold, if it does not.
/// The account's own streams first (`listed`, `missing` as STREAM.LIST answered this pass), then
/// the rest of the NATS cluster as the sighting shows it.
pub fn account_gate(
    from: &GateFrom<'_>,
    listed: &[Listed],
    missing: &[String],
    cluster: &str,
) -> Result<(), String> {
    let own = account_settled(listed, missing, cluster);
    let s = match from {
        GateFrom::Account(why) => {
            return own.map_err(|e| format!("{e}; judged from the account's own streams: {why}"));
        }
        GateFrom::Cluster(s) => s,
    };
    own?;
    let seen = |e: String| format!("{e} (as {} last saw NATS cluster {cluster})", s.by);
    super::settled(&s.view, cluster).map_err(seen)?;
    if let Some(l) = s.lagging.iter().find(|l| l.cluster == cluster) {
        let state = if l.offline { "offline" } else { "not current" };
        return Err(seen(format!(
            "the copy of stream {} of account {} on {} is {state}",
            l.stream, l.account, l.peer
        )));
    }
    Ok(())
}

/// Holding=False Settled's message: as the system balancer words it when the gate judged the
/// whole NATS cluster; saying so when it judged from the account's own streams.
pub fn settled_message(from: &GateFrom<'_>, cluster: &str, interval: &str) -> String {
    match from {
        GateFrom::Cluster(_) => {
            format!("NATS cluster {cluster} is Settled; next pass in {interval}")
        }
        GateFrom::Account(why) => format!(
            "NATS cluster {cluster} is Settled, judged from the account's own streams: {why}; \
             next pass in {interval}"
        ),
    }
}

#[cfg(test)]
mod tests;
