//! The conditions' table tests.

use std::collections::BTreeMap;

use controller_kit::conditions::Decided;
use nats_api::cluster::{GatewayStatus, condition, reason};
use nats_wire::monitor::{
    AccountDetail, ClusterInfo, ConnInfo, ConsumerDetail, Gatewayz, Jsz, LeafInfo, Leafz,
    MetaClusterInfo, PeerInfo, RemoteGatewayz, StreamDetail,
};
use rstest::rstest;

use super::gateways::gateways;
use super::leafnodes::{LeafRemoteView, leafnodes};
use super::ready::{ready, ready_count};
use super::settled::{settled, settled_after_restarts};
use crate::observation::{Observation, ServerAnswer, meta_leader, oldest_version};
use crate::server_lifecycle::ObservedServer;

#[rstest]
#[case::nothing_restarted(true, &[], (true, reason::ALL_GROUPS_CURRENT, "judged"))]
#[case::one_restarted(
    true,
    &["demo-0"],
    (false, reason::SERVERS_SILENT, "demo-0 restarted by this pass, not yet back")
)]
#[case::restart_all(
    true,
    &["demo-0", "demo-1", "demo-2"],
    (false, reason::SERVERS_SILENT, "demo-0, demo-1, demo-2 restarted by this pass, not yet back")
)]
#[case::already_unsettled_keeps_its_reason(
    false,
    &["demo-0"],
    (false, reason::GROUPS_CATCHING_UP, "judged")
)]
fn a_pass_that_restarts_a_server_does_not_write_settled(
    #[case] judged_settled: bool,
    #[case] restarted: &[&str],
    #[case] want: (bool, &str, &str),
) {
    let judged = if judged_settled {
        Decided::new(
            condition::SETTLED,
            true,
            reason::ALL_GROUPS_CURRENT,
            "judged",
        )
    } else {
        Decided::new(
            condition::SETTLED,
            false,
            reason::GROUPS_CATCHING_UP,
            "judged",
        )
    };
    let restarted: Vec<String> = restarted.iter().map(|s| s.to_string()).collect();
    let v = settled_after_restarts(judged, &restarted);
    assert_eq!((v.status, v.reason, v.message.as_str()), want);
}

fn obs(n: u32, ready: u32) -> Vec<ObservedServer> {
    (0..n)
        .map(|i| ObservedServer {
            ordinal: i,
            server_name: format!("demo-{i}"),
            present: true,
            ready: i < ready,
            ..Default::default()
        })
        .collect()
}

#[rstest]
#[case(3, 3, &[], true, reason::ALL_SERVERS_READY)]
#[case(3, 2, &[], true, reason::QUORUM_AVAILABLE)]
#[case(3, 1, &[], false, reason::QUORUM_UNAVAILABLE)]
#[case(1, 0, &[], false, reason::QUORUM_UNAVAILABLE)]
#[case(3, 3, &["ConfigMap/demo-1-config"], false, reason::RECONCILE_FAILED)]
fn ready_follows_pods_and_objects_in_the_way(
    #[case] replicas: u32,
    #[case] ready_pods: u32,
    #[case] foreign: &[&str],
    #[case] status: bool,
    #[case] want: &str,
) {
    let foreign: Vec<String> = foreign.iter().map(|s| s.to_string()).collect();
    let v = ready(replicas, &obs(replicas, ready_pods), &foreign);
    assert_eq!((v.status, v.reason), (status, want));
    for f in &foreign {
        assert!(v.message.contains(f), "{}", v.message);
    }
}

#[test]
fn servers_beyond_replicas_do_not_count_as_ready() {
    assert_eq!(ready_count(2, &obs(3, 3)), 2);
}

fn peer(name: &str, current: bool, offline: bool) -> PeerInfo {
    PeerInfo {
        name: name.into(),
        current,
        offline,
        ..Default::default()
    }
}

fn answer(
    name: &str,
    meta_leader: &str,
    peers: Vec<PeerInfo>,
    streams: Vec<StreamDetail>,
) -> ServerAnswer {
    ServerAnswer {
        name: name.into(),
        version: Some("2.15.0".into()),
        jsz: Some(Jsz {
            meta_cluster: Some(MetaClusterInfo {
                leader: meta_leader.into(),
                replicas: peers,
                ..Default::default()
            }),
            account_details: vec![AccountDetail {
                name: "APP".into(),
                streams,
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn stream(leader: &str, replicas: Vec<PeerInfo>, consumer_leader: Option<&str>) -> StreamDetail {
    StreamDetail {
        name: "orders".into(),
        cluster: Some(ClusterInfo {
            leader: leader.into(),
            replicas,
            ..Default::default()
        }),
        consumers: consumer_leader
            .map(|l| ConsumerDetail {
                name: "c".into(),
                cluster: Some(ClusterInfo {
                    leader: l.into(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .into_iter()
            .collect(),
        ..Default::default()
    }
}

fn three(meta_peers: Vec<PeerInfo>, meta_leader: &str, streams: Vec<StreamDetail>) -> Observation {
    let mut o = Observation::default();
    for i in 0..3 {
        let n = format!("demo-{i}");
        let peers = if n == meta_leader {
            meta_peers.clone()
        } else {
            vec![]
        };
        let s = if i == 0 { streams.clone() } else { vec![] };
        o.answers
            .insert(n.clone(), answer(&n, meta_leader, peers, s));
    }
    o
}

fn expected() -> Vec<String> {
    (0..3).map(|i| format!("demo-{i}")).collect()
}

#[rstest]
#[case::all_current(
    three(vec![peer("demo-1", true, false), peer("demo-2", true, false)], "demo-0",
          vec![stream("demo-0", vec![peer("demo-1", true, false)], Some("demo-0"))]),
    true, reason::ALL_GROUPS_CURRENT)]
#[case::meta_leaderless(three(vec![], "", vec![]), false, reason::GROUPS_LEADERLESS)]
#[case::stream_leaderless(
    three(vec![peer("demo-1", true, false)], "demo-0", vec![stream("", vec![], None)]),
    false, reason::GROUPS_LEADERLESS)]
#[case::consumer_leaderless(
    three(vec![peer("demo-1", true, false)], "demo-0", vec![stream("demo-0", vec![], Some(""))]),
    false, reason::GROUPS_LEADERLESS)]
#[case::member_offline(
    three(vec![peer("demo-1", false, true)], "demo-0", vec![]),
    false, reason::MEMBERS_OFFLINE)]
#[case::catching_up(
    three(vec![peer("demo-1", true, false)], "demo-0",
          vec![stream("demo-0", vec![peer("demo-2", false, false)], None)]),
    false, reason::GROUPS_CATCHING_UP)]
fn settled_reads_every_raft_group(
    #[case] o: Observation,
    #[case] status: bool,
    #[case] want: &str,
) {
    let v = settled(&expected(), true, &o);
    assert_eq!((v.status, v.reason), (status, want), "{}", v.message);
}

/// demo-0..2 of a supercluster whose meta leader is `west-1`, in another NATS cluster, each
/// reporting the meta group as a nats-server follower does (raft.go `Peers()`): the leader
/// current when heard of lately (`hears[i]`, `None`: it names no leader), every other follower
/// not current.
fn followers_of_west_1(hears: [Option<bool>; 3]) -> Observation {
    let mut o = Observation::default();
    let all = ["west-0", "west-1", "west-2", "demo-0", "demo-1", "demo-2"];
    for (i, heard) in hears.iter().enumerate() {
        let n = format!("demo-{i}");
        let peers = all
            .iter()
            .filter(|p| **p != n)
            .map(|p| peer(p, *p == "west-1" && *heard == Some(true), false))
            .collect();
        let leader = if heard.is_some() { "west-1" } else { "" };
        o.answers
            .insert(n.clone(), answer(&n, leader, peers, vec![]));
    }
    o
}

#[rstest]
#[case::every_follower_hears_the_leader([Some(true); 3], true, reason::ALL_GROUPS_CURRENT)]
#[case::one_lost_the_leader(
    [Some(true), Some(false), Some(true)],
    false,
    reason::GROUPS_CATCHING_UP
)]
#[case::one_names_no_leader([Some(true), Some(true), None], false, reason::GROUPS_CATCHING_UP)]
#[case::none_names_a_leader([None; 3], false, reason::GROUPS_LEADERLESS)]
fn the_meta_group_led_from_another_nats_cluster_is_judged_by_each_followers_leader(
    #[case] hears: [Option<bool>; 3],
    #[case] status: bool,
    #[case] want: &str,
) {
    let v = settled(&expected(), true, &followers_of_west_1(hears));
    assert_eq!((v.status, v.reason), (status, want), "{}", v.message);
}

#[test]
fn settled_needs_every_server_to_answer() {
    let mut o = three(vec![], "demo-0", vec![]);
    o.answers.remove("demo-2");
    let v = settled(&expected(), true, &o);
    assert_eq!(v.reason, reason::SERVERS_SILENT);
    assert!(v.message.contains("demo-2"));
    let failed = Observation {
        answers: BTreeMap::new(),
        failure: Some("dial: refused".into()),
    };
    assert_eq!(
        settled(&expected(), true, &failed).reason,
        reason::OBSERVATION_FAILED
    );
    let v = settled(&expected(), false, &three(vec![], "", vec![]));
    assert!(v.status, "without JetStream answering is enough");
    assert_eq!(
        meta_leader(&three(vec![], "demo-1", vec![])),
        Some("demo-1".into())
    );
}

fn gw(outbound: &[&str], inbound: &[&str]) -> Gatewayz {
    let conn = || RemoteGatewayz {
        configured: true,
        connection: Some(ConnInfo::default()),
    };
    Gatewayz {
        outbound_gateways: outbound.iter().map(|n| (n.to_string(), conn())).collect(),
        inbound_gateways: inbound
            .iter()
            .map(|n| (n.to_string(), vec![conn()]))
            .collect(),
        ..Default::default()
    }
}

#[test]
fn gateways_connected_when_every_server_reaches_every_member() {
    let mut o = Observation::default();
    for (i, g) in [gw(&["west"], &["west"]), gw(&["west"], &[])]
        .into_iter()
        .enumerate()
    {
        o.answers.insert(
            format!("e-{i}"),
            ServerAnswer {
                name: format!("e-{i}"),
                gatewayz: Some(g),
                ..Default::default()
            },
        );
    }
    let (s, v) = gateways(&["west".into()], &o);
    assert_eq!(
        s,
        vec![GatewayStatus {
            name: "west".into(),
            connected: true,
            inbound: 1,
            outbound: 2
        }]
    );
    assert_eq!(v.reason, reason::ALL_MEMBERS_REACHABLE);
    let (s, v) = gateways(&["west".into(), "north".into()], &o);
    assert!(!s[1].connected);
    assert_eq!((v.status, v.reason), (false, reason::MEMBERS_UNREACHABLE));
    assert!(v.message.contains("north"));
    let (_, v) = gateways(&["west".into()], &Observation::default());
    assert!(!v.status);
}

fn leafz(accounts: &[&str]) -> Leafz {
    Leafz {
        leafs: accounts
            .iter()
            .map(|a| LeafInfo {
                account: a.to_string(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn remote(i: usize, account: Option<&str>, refused: bool) -> LeafRemoteView {
    LeafRemoteView {
        index: i,
        connection_namespace: "edge".into(),
        connection_name: format!("hub-{i}"),
        account: account.map(str::to_string),
        refused: refused.then(|| (reason::REMOTE_NOT_PERMITTED, format!("hub-{i}: no grant"))),
    }
}

fn leaf_obs(per_server: &[&[&str]]) -> Observation {
    let mut o = Observation::default();
    for (i, a) in per_server.iter().enumerate() {
        o.answers.insert(
            format!("l-{i}"),
            ServerAnswer {
                name: format!("l-{i}"),
                leafz: Some(leafz(a)),
                ..Default::default()
            },
        );
    }
    o
}

#[test]
fn leaf_remotes_counted_by_account_and_refused_ones_named() {
    let o = leaf_obs(&[&["$G", "$G", "SYS"], &["$G", "SYS"]]);
    let remotes = vec![
        remote(0, None, false),
        remote(1, None, false),
        remote(2, Some("SYS"), false),
    ];
    let (s, v) = leafnodes(&remotes, &o);
    assert_eq!(
        s.iter().map(|r| r.connected).collect::<Vec<_>>(),
        vec![2, 1, 2],
        "the second global remote is held by one server only"
    );
    assert_eq!((v.status, v.reason), (false, reason::REMOTES_DISCONNECTED));
    assert!(v.message.contains("edge/hub-1"), "{}", v.message);

    let (_, v) = leafnodes(&[remote(0, None, false)], &o);
    assert_eq!((v.status, v.reason), (true, reason::REMOTES_CONNECTED));

    let (s, v) = leafnodes(&[remote(0, None, false), remote(1, None, true)], &o);
    assert_eq!(s[1].connected, 0);
    assert_eq!((v.status, v.reason), (false, reason::REMOTE_NOT_PERMITTED));
    assert!(v.message.contains("hub-1"));
}

#[rstest::rstest]
#[case::all_agree(&[("demo-1", Some("2.15.0"))], Some("2.15.0"))]
#[case::a_canary_ahead(&[("demo-2", Some("2.15.1"))], Some("2.15.0"))]
#[case::the_rest_ahead(&[("demo-0", Some("2.15.1")), ("demo-1", Some("2.15.1"))], Some("2.15.0"))]
#[case::by_semver_not_text(&[("demo-0", Some("2.9.9")), ("demo-1", Some("2.10.0")), ("demo-2", Some("2.10.0"))], Some("2.9.9"))]
#[case::one_restarting(&[("demo-1", None)], Some("2.15.0"))]
#[case::none_answers(&[("demo-0", None), ("demo-1", None), ("demo-2", None)], None)]
#[case::not_semver_last(&[("demo-0", Some("dev")), ("demo-1", Some("2.15.1")), ("demo-2", Some("2.15.1"))], Some("2.15.1"))]
fn status_version_is_the_oldest_a_server_runs(
    #[case] versions: &[(&str, Option<&str>)],
    #[case] want: Option<&str>,
) {
    let mut o = three(vec![], "", vec![]);
    for (name, v) in versions {
        match v {
            Some(v) => {
                if let Some(a) = o.answers.get_mut(*name) {
                    a.version = Some(v.to_string());
                }
            }
            None => {
                o.answers.remove(*name);
            }
        }
    }
    assert_eq!(oldest_version(&o, &expected()), want.map(String::from));
}
