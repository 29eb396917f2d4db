//! Steps through the system account, reading the NATS system as one JSZ ping shows it (every
//! stream group of every account, as the JetStream controller reads it): `move_by_hand`, the
//! moves an evacuation makes issued one after the other by hand (ACCOUNT.STREAM.MOVE, each
//! waited for until done) — the floor its time is measured against — and `wait_groups_settled`,
//! every group of every account led in one NATS cluster with exactly its replicas, all in it.

use std::collections::BTreeSet;
use std::time::Duration;

use jetstream_controller::system_view::{GroupSeen, SystemView, system_view};
use nats_wire::jsapi::StreamMove;
use nats_wire::monitor::JszOptions;
use nats_wire::{Collect, Wire};

use super::deployed::Done;
use super::system_access::SystemAccess;

/// How often a move's wait reads the servers: a quarter of a second, so the floor is within
/// that of each move's own time, and the servers are not kept busy answering.
const MOVE_POLL: Duration = Duration::from_millis(250);

impl SystemAccess {
    async fn connect(&self) -> Result<Wire, String> {
        let addrs: Vec<async_nats::ServerAddr> =
            self.urls.iter().filter_map(|u| u.parse().ok()).collect();
        let options = match &self.creds {
            Some(c) => async_nats::ConnectOptions::with_credentials(c)
                .map_err(|e| format!("the system user's creds: {e}"))?,
            None => async_nats::ConnectOptions::new(),
        };
        let client = options
            .connect(addrs)
            .await
            .map_err(|e| format!("connecting as the system user: {e}"))?;
        Ok(Wire::new(client))
    }

    /// The system as one JSZ ping shows it; only `account`'s groups when it names one (what a
    /// move's wait reads: a ping of every account's every stream, several times a second,
    /// loads the servers the traffic runs on).
    async fn view(&self, wire: &Wire, account: &str) -> Result<SystemView, String> {
        let options = JszOptions {
            account: account.to_string(),
            accounts: true,
            streams: true,
            config: true,
            ..Default::default()
        };
        let collect = Collect::expecting(self.servers, Duration::from_secs(2));
        let replies = wire
            .ping_jsz(&options, collect)
            .await
            .map_err(|e| format!("the JSZ ping: {e}"))?;
        Ok(system_view(&replies))
    }
}

/// Whether a group still has a copy on `from` (placed there, or a member on one of its
/// servers), as the evacuation judges it.
fn on_source(g: &GroupSeen, from: &str, source: &BTreeSet<String>) -> bool {
    g.cluster == from || g.members().any(|m| source.contains(m))
}

/// Whether `g` is settled in `cluster` (led there, exactly its replicas, every member one of
/// `servers`); why not, otherwise.
pub(super) fn group_settled_in(
    g: &GroupSeen,
    cluster: &str,
    servers: &BTreeSet<String>,
) -> Result<(), String> {
    let name = &g.stream;
    if g.leader.is_empty() {
        return Err(format!("{name} has no leader"));
    }
    if g.cluster != cluster {
        return Err(format!("{name} is placed in {}", g.cluster));
    }
    let members: Vec<&str> = g.members().collect();
    if members.len() != g.replicas.max(1) {
        return Err(format!(
            "{name} has {} members for {} replicas ({})",
            members.len(),
            g.replicas,
            members.join(", ")
        ));
    }
    let outside: Vec<&str> = members
        .into_iter()
        .filter(|m| !servers.contains(*m))
        .collect();
    if !outside.is_empty() {
        return Err(format!(
            "{name} has {} outside {cluster}",
            outside.join(", ")
        ));
    }
    Ok(())
}

/// `move_by_hand`: every group on `from`, in account then name order (the evacuation's order),
/// moved into the servers tagged `to` and waited for until off `from` and settled.
pub(super) async fn move_by_hand(
    access: &SystemAccess,
    from: &str,
    to: &[String],
    timeout: Duration,
) -> Result<Done, String> {
    let wire = access.connect().await?;
    let view = access.view(&wire, "").await?;
    let source: BTreeSet<String> = view.servers_of(from).map(|s| s.name.clone()).collect();
    if source.is_empty() {
        return Err(format!("no server of {from} answered the JSZ ping"));
    }
    let groups: Vec<(String, String)> = view
        .groups
        .iter()
        .filter(|g| on_source(g, from, &source))
        .map(|g| (g.account.clone(), g.stream.clone()))
        .collect();
    if groups.is_empty() {
        return Err(format!("no stream group is on {from}"));
    }
    let request = StreamMove::to_tags(to.iter().cloned());
    for (account, stream) in &groups {
        wire.account_stream_move(account, stream, &request)
            .await
            .map_err(|e| format!("ACCOUNT.STREAM.MOVE of {stream} ({account}): {e}"))?;
        let what = format!("{stream} moved off {from}");
        crate::wait::poll_every(&what, timeout, MOVE_POLL, || async {
            let view = access.view(&wire, account).await?;
            let Some(g) = view
                .groups
                .iter()
                .find(|g| g.account == *account && g.stream == *stream)
            else {
                return Err(format!("no server reports {stream}"));
            };
            if on_source(g, from, &source) || !g.settled() {
                let members: Vec<&str> = g.members().collect();
                return Err(format!(
                    "{stream} in {} with {}",
                    g.cluster,
                    members.join(", ")
                ));
            }
            Ok(Some(()))
        })
        .await
        .map_err(|e| e.to_string())?;
    }
    Ok(Done {
        target: Some(format!(
            "{} groups moved off {from} one by one",
            groups.len()
        )),
        value: Some(groups.len() as u64),
        ..Done::default()
    })
}

/// `wait_groups_settled`: until every group of every account is settled in `cluster`
/// ([`group_settled_in`]); the last text says which is not and why.
pub(super) async fn wait_groups_settled(
    access: &SystemAccess,
    cluster: &str,
    timeout: Duration,
) -> Result<Done, String> {
    let wire = access.connect().await?;
    let count = crate::wait::poll_every(
        &format!("every group settled in {cluster}"),
        timeout,
        MOVE_POLL,
        || async {
            let view = access.view(&wire, "").await?;
            let servers: BTreeSet<String> =
                view.servers_of(cluster).map(|s| s.name.clone()).collect();
            if view.groups.is_empty() {
                return Err("no stream group seen".to_string());
            }
            let unsettled: Vec<String> = view
                .groups
                .iter()
                .filter_map(|g| group_settled_in(g, cluster, &servers).err())
                .collect();
            match unsettled.as_slice() {
                [] => Ok(Some(view.groups.len())),
                [one] => Err(one.clone()),
                [first, ..] => Err(format!("{first}; and {} more", unsettled.len() - 1)),
            }
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(Done {
        target: Some(format!("{count} groups settled in {cluster}")),
        value: Some(count as u64),
        ..Done::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_settled_led_in_the_cluster_with_exactly_its_replicas_all_in_it() {
        let g = |cluster: &str, leader: &str, peers: &[&str]| GroupSeen {
            account: "A".into(),
            stream: "S".into(),
            cluster: cluster.into(),
            leader: leader.into(),
            peers: peers.iter().map(|p| p.to_string()).collect(),
            replicas: 3,
            ..GroupSeen::default()
        };
        let c2: BTreeSet<String> = ["c2-0", "c2-1", "c2-2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let cases: &[(GroupSeen, Option<&str>)] = &[
            (g("c2", "c2-0", &["c2-1", "c2-2"]), None),
            (g("c1", "c1-0", &["c1-1", "c1-2"]), Some("placed in c1")),
            (g("c2", "", &["c2-1", "c2-2"]), Some("no leader")),
            (
                g("c2", "c2-0", &["c2-1", "c2-2", "c1-0", "c1-1", "c1-2"]),
                Some("6 members for 3 replicas"),
            ),
            (g("c2", "c2-0", &["c2-1", "c1-2"]), Some("c1-2 outside c2")),
        ];
        for (group, why) in cases {
            match (group_settled_in(group, "c2", &c2), why) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.contains(w), "{e} should say {w}"),
                (got, want) => panic!("{group:?}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_group_is_on_the_source_while_placed_there_or_a_member_is_on_its_servers() {
        let source: BTreeSet<String> = ["c1-0", "c1-1", "c1-2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let g = |cluster: &str, leader: &str, peers: &[&str]| GroupSeen {
            cluster: cluster.into(),
            leader: leader.into(),
            peers: peers.iter().map(|p| p.to_string()).collect(),
            replicas: 3,
            ..GroupSeen::default()
        };
        assert!(on_source(
            &g("c1", "c1-0", &["c1-1", "c1-2"]),
            "c1",
            &source
        ));
        assert!(on_source(
            &g("c2", "c2-0", &["c2-1", "c1-2"]),
            "c1",
            &source
        ));
        assert!(!on_source(
            &g("c2", "c2-0", &["c2-1", "c2-2"]),
            "c1",
            &source
        ));
    }
}
