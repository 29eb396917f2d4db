//! The account balancer's gate scope, row by row against §6.5: "its Settled gate reads only
//! that NATS cluster (a cluster-filtered PING.JSZ)"; "One move per pass, none while unsettled".

use std::collections::BTreeMap;

use nats_wire::ServerInfo;
use nats_wire::jsapi::{MetaGroup, MetaPeer};
use nats_wire::monitor::{AccountDetail, ClusterInfo, PeerInfo, StreamConfigView, StreamDetail};

use super::*;
use crate::system_view::{GroupSeen, ServerSeen};

const SERVERS: [&str; 5] = ["c1-0", "c1-1", "c1-2", "c2-0", "c2-1"];

/// c1-0..2 and c2-0..1 answered; the meta group of all five, c1-0 leading, none offline.
fn view(groups: Vec<GroupSeen>) -> SystemView {
    SystemView {
        servers: SERVERS
            .iter()
            .map(|n| ServerSeen {
                name: n.to_string(),
                cluster: n[..2].to_string(),
                tags: Vec::new(),
            })
            .collect(),
        meta: Some(MetaGroup {
            leader_cluster: "c1".into(),
            leader: "c1-0".into(),
            peers: SERVERS
                .iter()
                .map(|n| MetaPeer {
                    name: n.to_string(),
                    current: true,
                    ..Default::default()
                })
                .collect(),
            cluster_size: 5,
        }),
        meta_leader: Some("c1-0".into()),
        groups,
    }
}

/// A group of `account` in `cluster` led by `members[0]`.
fn group(account: &str, stream: &str, cluster: &str, members: &[&str]) -> GroupSeen {
    GroupSeen {
        account: account.into(),
        stream: stream.into(),
        cluster: cluster.into(),
        leader: members[0].into(),
        peers: members[1..].iter().map(|m| m.to_string()).collect(),
        replicas: members.len(),
        ..Default::default()
    }
}

/// APP's A and OTHER's O in c1, OTHER's W in c2; all as their configs ask.
fn groups() -> Vec<GroupSeen> {
    vec![
        group("APP", "A", "c1", &["c1-0", "c1-1", "c1-2"]),
        group("OTHER", "O", "c1", &["c1-1", "c1-0", "c1-2"]),
        group("OTHER", "W", "c2", &["c2-0", "c2-1"]),
    ]
}

fn sighting(at: Instant, view: SystemView, lagging: Vec<Lagging>) -> Sighting {
    Sighting {
        by: "NatsSystemBalancer nats/system".into(),
        at,
        view,
        lagging,
    }
}

fn lag(account: &str, stream: &str, cluster: &str, peer: &str, offline: bool) -> Lagging {
    Lagging {
        account: account.into(),
        stream: stream.into(),
        cluster: cluster.into(),
        peer: peer.into(),
        offline,
    }
}

/// APP's stream A as its STREAM.LIST reports it: led by c1-0, followers current.
fn listed_a(current: bool) -> Listed {
    Listed {
        config: StreamConfigView {
            name: "A".into(),
            num_replicas: 3,
            placement: None,
            metadata: BTreeMap::new(),
        },
        cluster: Some(ClusterInfo {
            name: "c1".into(),
            leader: "c1-0".into(),
            replicas: ["c1-1", "c1-2"]
                .iter()
                .map(|p| PeerInfo {
                    name: p.to_string(),
                    current: current || *p == "c1-1",
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
    }
}

#[test]
fn the_gate_reads_the_nats_cluster_from_a_recent_sighting_of_it_else_the_accounts_streams() {
    let now = Instant::now() + Duration::from_secs(3600);
    let ago = |s: u64| now - Duration::from_secs(s);
    let fresh = sighting(ago(5), view(groups()), Vec::new());
    let old = sighting(ago(RECENT.as_secs()), view(groups()), Vec::new());
    let mut of_c2_only = view(groups());
    of_c2_only.servers.retain(|s| s.cluster == "c2");
    let elsewhere = sighting(ago(5), of_c2_only, Vec::new());
    // (what, the sighting recorded for c1, judged from the NATS cluster or why not)
    let rows: [(&str, Option<&Sighting>, Result<(), &str>); 4] = [
        (
            "a system balancer's sighting of c1 five seconds old: the NATS cluster",
            Some(&fresh),
            Ok(()),
        ),
        (
            "none recorded: the account's own streams",
            None,
            Err("no system view of NATS cluster c1"),
        ),
        (
            "two minutes old: the account's own streams",
            Some(&old),
            Err("no system view of NATS cluster c1 in the last 120s"),
        ),
        (
            "a sighting no server of c1 answered: the account's own streams",
            Some(&elsewhere),
            Err("no system view of NATS cluster c1"),
        ),
    ];
    for (what, s, want) in rows {
        let got = match gate_from(s, "c1", now) {
            GateFrom::Cluster(seen) => {
                assert!(std::ptr::eq(seen, s.expect("a sighting")), "{what}");
                Ok(())
            }
            GateFrom::Account(why) => Err(why),
        };
        assert_eq!(got, want.map_err(String::from), "{what}");
    }
}

#[test]
fn judged_from_the_nats_cluster_another_accounts_stream_holds_the_gate() {
    let now = Instant::now();
    let no_leader = {
        let mut g = groups();
        g[1].leader.clear();
        g[1].peers = vec!["c1-0".into(), "c1-2".into()];
        view(g)
    };
    let mut meta_offline = view(groups());
    if let Some(m) = meta_offline.meta.as_mut() {
        m.peers[2].offline = true;
    }
    let mut silent = view(groups());
    silent.servers.retain(|s| s.name != "c1-2");
    let mut no_meta = view(groups());
    no_meta.meta = None;
    no_meta.meta_leader = None;
    let seen = " (as NatsSystemBalancer nats/system last saw NATS cluster c1)";
    // (what, sighting, APP's own streams current, judgement)
    let rows: Vec<(&str, Sighting, bool, Result<(), String>)> = vec![
        (
            "every group of c1 as its config asks: Settled",
            sighting(now, view(groups()), Vec::new()),
            true,
            Ok(()),
        ),
        (
            "OTHER's O has no leader: Unsettled though APP's streams are fine",
            sighting(now, no_leader, Vec::new()),
            true,
            Err(format!(
                "stream O of account OTHER is not as its config asks (a move or election in \
                 progress){seen}"
            )),
        ),
        (
            "OTHER's O has a follower behind: Unsettled",
            sighting(
                now,
                view(groups()),
                vec![lag("OTHER", "O", "c1", "c1-2", false)],
            ),
            true,
            Err(format!(
                "the copy of stream O of account OTHER on c1-2 is not current{seen}"
            )),
        ),
        (
            "OTHER's O has a follower offline: Unsettled",
            sighting(
                now,
                view(groups()),
                vec![lag("OTHER", "O", "c1", "c1-2", true)],
            ),
            true,
            Err(format!(
                "the copy of stream O of account OTHER on c1-2 is offline{seen}"
            )),
        ),
        (
            "a group of another NATS cluster behind: not this gate's",
            sighting(
                now,
                view(groups()),
                vec![lag("OTHER", "W", "c2", "c2-1", false)],
            ),
            true,
            Ok(()),
        ),
        (
            "a server holding a copy did not answer",
            sighting(now, silent, Vec::new()),
            true,
            Err(format!(
                "c1-2, holding a copy of stream A of account APP, did not answer{seen}"
            )),
        ),
        (
            "the meta leader reports a server offline",
            sighting(now, meta_offline, Vec::new()),
            true,
            Err(format!("the meta leader reports c1-2 offline{seen}")),
        ),
        (
            "the meta group has no leader",
            sighting(now, no_meta, Vec::new()),
            true,
            Err(format!("the meta group has no leader{seen}")),
        ),
        (
            "the account's own stream behind this pass, though the sighting saw it current",
            sighting(now, view(groups()), Vec::new()),
            false,
            Err("the copy of stream A on c1-2 is not current".into()),
        ),
    ];
    for (what, s, current, want) in rows {
        let got = account_gate(&GateFrom::Cluster(&s), &[listed_a(current)], &[], "c1");
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn judged_from_the_accounts_own_streams_the_gate_says_so() {
    let why = "no system view of NATS cluster c1".to_string();
    let from = GateFrom::Account(why);
    // Another account's stream behind is not seen: Settled.
    assert_eq!(account_gate(&from, &[listed_a(true)], &[], "c1"), Ok(()));
    assert_eq!(
        account_gate(&from, &[listed_a(false)], &[], "c1"),
        Err(
            "the copy of stream A on c1-2 is not current; judged from the account's own \
             streams: no system view of NATS cluster c1"
                .into()
        )
    );
    assert_eq!(
        settled_message(&from, "c1", "1s"),
        "NATS cluster c1 is Settled, judged from the account's own streams: no system view of \
         NATS cluster c1; next pass in 1s"
    );
    let s = sighting(Instant::now(), view(groups()), Vec::new());
    assert_eq!(
        settled_message(&GateFrom::Cluster(&s), "c1", "1m"),
        "NATS cluster c1 is Settled; next pass in 1m",
        "worded as story 09's status/04-natsbalancer-requests.yaml words it"
    );
}

fn reply(server: &str, streams: Vec<StreamDetail>) -> Reply<Jsz> {
    Reply {
        server: ServerInfo {
            name: server.into(),
            cluster: "c1".into(),
            ..Default::default()
        },
        data: Jsz {
            account_details: vec![AccountDetail {
                name: "OTHER".into(),
                id: String::new(),
                streams,
            }],
            ..Default::default()
        },
    }
}

fn detail(leader: &str, peers: &[(&str, bool, bool)]) -> StreamDetail {
    StreamDetail {
        name: "O".into(),
        cluster: Some(ClusterInfo {
            name: "c1".into(),
            leader: leader.into(),
            replicas: peers
                .iter()
                .map(|(n, current, offline)| PeerInfo {
                    name: n.to_string(),
                    current: *current,
                    offline: *offline,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn followers_behind_are_read_from_their_leaders_report_alone() {
    let replies = vec![
        // c1-1, a follower, thinks c1-2 behind: not read.
        reply(
            "c1-1",
            vec![detail(
                "c1-0",
                &[("c1-1", true, false), ("c1-2", false, false)],
            )],
        ),
        // c1-0 leads and reports c1-2 offline.
        reply(
            "c1-0",
            vec![detail(
                "c1-0",
                &[("c1-1", true, false), ("c1-2", false, true)],
            )],
        ),
    ];
    assert_eq!(
        lagging(&replies),
        vec![lag("OTHER", "O", "c1", "c1-2", true)]
    );
}
