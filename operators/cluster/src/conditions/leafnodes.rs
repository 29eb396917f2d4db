//! LeafnodesConnected and `status.leafRemotes`: each of spec.leafRemotes as the reconciler
//! resolved it, held by every answering server or not.

use std::collections::BTreeMap;

use controller_kit::conditions::Decided;
use nats_api::cluster::{LeafRemoteStatus, condition, reason};

use super::names;
use crate::observation::Observation;

/// One entry of spec.leafRemotes as the reconciler resolved it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafRemoteView {
    pub index: usize,
    pub connection_namespace: String,
    pub connection_name: String,
    /// The local account bound (public key), None for the global account.
    pub account: Option<String>,
    /// Why the remote is rendered out: (reason, message); None when admitted.
    pub refused: Option<(&'static str, String)>,
}

/// The account name a leaf connection of the global account reports.
const GLOBAL_ACCOUNT: &str = "$G";

/// status.leafRemotes and LeafnodesConnected. A server holds a remote when it has a leaf
/// connection for the remote's local account; remotes binding the same account are told apart by
/// count alone (LEAFZ names no remote): the k-th such remote is held where k+1 connect.
pub fn leafnodes(
    remotes: &[LeafRemoteView],
    obs: &Observation,
) -> (Vec<LeafRemoteStatus>, Decided) {
    let per_server: Vec<BTreeMap<&str, usize>> = obs
        .answers
        .values()
        .filter_map(|a| a.leafz.as_ref())
        .map(|l| {
            let mut m = BTreeMap::new();
            for leaf in &l.leafs {
                *m.entry(leaf.account.as_str()).or_insert(0) += 1;
            }
            m
        })
        .collect();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut statuses = vec![];
    let mut down = vec![];
    for r in remotes {
        let account = r.account.clone().unwrap_or_else(|| GLOBAL_ACCOUNT.into());
        let connected = if r.refused.is_some() {
            0
        } else {
            let k = *seen
                .entry(account.clone())
                .and_modify(|k| *k += 1)
                .or_insert(0);
            per_server
                .iter()
                .filter(|m| m.get(account.as_str()).copied().unwrap_or(0) > k)
                .count()
        };
        if r.refused.is_none() && (connected == 0 || connected < per_server.len()) {
            down.push(format!("{}/{}", r.connection_namespace, r.connection_name));
        }
        statuses.push(LeafRemoteStatus {
            connection_namespace: r.connection_namespace.clone(),
            connection_name: r.connection_name.clone(),
            connected: connected as i32,
            account: r.account.clone(),
        });
    }
    let connected = leafnodes_connected(remotes, per_server.len(), &down, obs);
    (statuses, connected)
}

/// LeafnodesConnected: False naming the remotes rendered out, if any; else True when servers
/// answer (`answering` of them) and every one holds every remote (none is `down`).
fn leafnodes_connected(
    remotes: &[LeafRemoteView],
    answering: usize,
    down: &[String],
    obs: &Observation,
) -> Decided {
    let refused: Vec<&LeafRemoteView> = remotes.iter().filter(|r| r.refused.is_some()).collect();
    if let Some(first) = refused.first() {
        let reason = first
            .refused
            .as_ref()
            .map_or(reason::REMOTE_NOT_PERMITTED, |r| r.0);
        let msgs: Vec<String> = refused
            .iter()
            .filter_map(|r| r.refused.as_ref().map(|(_, m)| m.clone()))
            .collect();
        Decided::new(
            condition::LEAFNODES_CONNECTED,
            false,
            reason,
            format!("rendered out: {}", msgs.join("; ")),
        )
    } else if answering == 0 {
        Decided::new(
            condition::LEAFNODES_CONNECTED,
            false,
            reason::REMOTES_DISCONNECTED,
            obs.failure
                .clone()
                .unwrap_or_else(|| "no server answered LEAFZ".into()),
        )
    } else if down.is_empty() {
        Decided::new(
            condition::LEAFNODES_CONNECTED,
            true,
            reason::REMOTES_CONNECTED,
            format!("every server holds each of {} remotes", remotes.len()),
        )
    } else {
        Decided::new(
            condition::LEAFNODES_CONNECTED,
            false,
            reason::REMOTES_DISCONNECTED,
            format!("not every server holds {}", names(down)),
        )
    }
}
