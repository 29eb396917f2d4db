//! An account balancer's view, Settled gate, yielding and move judgement, row by row against
//! §6.5: "NatsBalancer … yields to the system balancer, including any stream the system
//! balancer has a move pending on"; "One move per pass, none while unsettled".

use std::collections::BTreeMap;

use nats_api::jetstream::MoveKind;
use nats_wire::monitor::{PeerInfo, Placement};
use serde_json::json;

use super::*;

/// (what, streams listed, streams missing) → why the gate does not hold.
type SettledRow<'a> = (&'a str, Vec<Listed>, Vec<String>, Option<&'a str>);

fn peer(name: &str, current: bool, offline: bool) -> PeerInfo {
    PeerInfo {
        name: name.into(),
        current,
        offline,
        ..Default::default()
    }
}

/// A stream in `cluster` led by `leader`, followers current and online.
fn listed(name: &str, cluster: &str, leader: &str, followers: &[&str]) -> Listed {
    Listed {
        config: StreamConfigView {
            name: name.into(),
            num_replicas: 1 + followers.len() as i64,
            placement: None,
            metadata: BTreeMap::new(),
        },
        cluster: Some(ClusterInfo {
            name: cluster.into(),
            leader: leader.into(),
            replicas: followers.iter().map(|f| peer(f, true, false)).collect(),
            ..Default::default()
        }),
    }
}

#[test]
fn the_view_holds_the_accounts_groups_and_the_servers_holding_them() {
    let mut owned = listed("B", "c1", "c1-1", &["c1-0", "c1-2"]);
    owned.config.metadata = [(OWNER_METADATA_KEY.to_string(), "uid-b".to_string())].into();
    owned.config.placement = Some(Placement {
        cluster: "c1".into(),
        ..Default::default()
    });
    let v = account_view(
        "APP",
        &[
            owned,
            listed("A", "c1", "c1-0", &["c1-1", "c1-2"]),
            listed("W", "c2", "c2-0", &[]),
        ],
    );
    let streams: Vec<&str> = v.groups.iter().map(|g| g.stream.as_str()).collect();
    assert_eq!(streams, vec!["A", "B", "W"], "sorted by name");
    assert!(v.groups.iter().all(|g| g.account == "APP"));
    let b = &v.groups[1];
    assert_eq!(
        (b.owner.as_deref(), b.placement_cluster.as_str(), b.replicas),
        (Some("uid-b"), "c1", 3)
    );
    let servers: Vec<(&str, &str)> = v
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.cluster.as_str()))
        .collect();
    assert_eq!(
        servers,
        vec![
            ("c1-0", "c1"),
            ("c1-1", "c1"),
            ("c1-2", "c1"),
            ("c2-0", "c2")
        ]
    );
    assert!(v.meta.is_none());
}

#[test]
fn the_settled_gate_row_by_row() {
    let good = || listed("A", "c1", "c1-0", &["c1-1", "c1-2"]);
    let with = |f: fn(&mut Listed)| {
        let mut l = good();
        f(&mut l);
        l
    };
    let cases: Vec<SettledRow> = vec![
        ("every group as asked", vec![good()], vec![], None),
        ("no streams", vec![], vec![], None),
        (
            "a stream did not answer",
            vec![good()],
            vec!["B".into()],
            Some("stream B did not answer STREAM.LIST"),
        ),
        (
            "no leader",
            vec![with(|l| l.cluster.as_mut().unwrap().leader.clear())],
            vec![],
            Some("stream A has no leader"),
        ),
        (
            "a copy offline (a server restarting in a rollout)",
            vec![with(|l| {
                l.cluster.as_mut().unwrap().replicas[1] = peer("c1-2", false, true)
            })],
            vec![],
            Some("the copy of stream A on c1-2 is offline"),
        ),
        (
            "a copy behind",
            vec![with(|l| {
                l.cluster.as_mut().unwrap().replicas[0] = peer("c1-1", false, false)
            })],
            vec![],
            Some("the copy of stream A on c1-1 is not current"),
        ),
        (
            "four copies of an R3 stream: a move in progress",
            vec![with(|l| {
                l.cluster
                    .as_mut()
                    .unwrap()
                    .replicas
                    .push(peer("c1-3", true, false))
            })],
            vec![],
            Some("stream A is not as its config asks (a move or election in progress)"),
        ),
        (
            "another NATS cluster's stream is not judged",
            vec![
                good(),
                with(|l| {
                    let c = l.cluster.as_mut().unwrap();
                    c.name = "c2".into();
                    c.leader.clear();
                }),
            ],
            vec![],
            None,
        ),
    ];
    for (what, listed, missing, why) in cases {
        assert_eq!(
            account_settled(&listed, &missing, "c1").err().as_deref(),
            why,
            "{what}"
        );
    }
}

fn cover(
    cluster: &str,
    leader_accounts: &[&str],
    placement: bool,
    pending: &[&str],
) -> SystemCover {
    SystemCover {
        name: "NatsSystemBalancer nats/system".into(),
        cluster: cluster.into(),
        leader_accounts: leader_accounts.iter().map(|a| a.to_string()).collect(),
        placement,
        pending: pending
            .iter()
            .map(|s| ("APP".to_string(), s.to_string()))
            .collect(),
    }
}

#[test]
fn the_streams_with_a_system_move_pending_are_skipped_whoever_covers_the_cluster() {
    let key = |s: &str| ("APP".to_string(), s.to_string());
    let named = |n: &str, c: SystemCover| SystemCover {
        name: n.into(),
        ..c
    };
    let cases: Vec<(&str, Vec<SystemCover>, BTreeMap<StreamKey, String>)> = vec![
        ("no system balancer", vec![], BTreeMap::new()),
        (
            "one moving this account's leaders, nothing pending: nothing skipped",
            vec![cover("c1", &["APP"], true, &[])],
            BTreeMap::new(),
        ),
        (
            "its pending streams",
            vec![cover("c1", &["APP"], false, &["S1", "S2"])],
            [
                (key("S1"), "NatsSystemBalancer nats/system".to_string()),
                (key("S2"), "NatsSystemBalancer nats/system".to_string()),
            ]
            .into(),
        ),
        (
            "two balancers' pending streams, each named",
            vec![
                cover("c1", &[], false, &["S1"]),
                named(
                    "NatsSystemBalancer nats/west",
                    cover("c2", &[], true, &["S3"]),
                ),
            ],
            [
                (key("S1"), "NatsSystemBalancer nats/system".to_string()),
                (key("S3"), "NatsSystemBalancer nats/west".to_string()),
            ]
            .into(),
        ),
    ];
    for (what, covers, want) in cases {
        assert_eq!(system_pending(&covers), want, "{what}");
    }
}

#[test]
fn it_yields_only_when_its_next_move_is_on_a_stream_the_system_balancer_moves() {
    let planned = |stream: &str| crate::balance::PlannedMove {
        kind: MoveKind::Leader,
        account: "APP".into(),
        stream: stream.into(),
        consumer: None,
        from: "c1-0".into(),
        to: Some("c1-1".into()),
    };
    let pending: BTreeMap<StreamKey, String> = [(
        ("APP".to_string(), "S1".to_string()),
        "NatsSystemBalancer nats/system".to_string(),
    )]
    .into();
    let cases = [
        ("nothing to move", None, None),
        (
            "its next move is on another stream",
            Some(planned("S2")),
            None,
        ),
        (
            "its next move is on the stream the system balancer moves",
            Some(planned("S1")),
            Some(
                "NatsSystemBalancer nats/system has a move pending on stream S1: this balancer yields to it",
            ),
        ),
    ];
    for (what, wanted, want) in cases {
        assert_eq!(
            yielded(wanted.as_ref(), &pending).as_deref(),
            want,
            "{what}"
        );
    }
    let other_account = crate::balance::PlannedMove {
        account: "OTHER".into(),
        ..planned("S1")
    };
    assert_eq!(
        yielded(Some(&other_account), &pending),
        None,
        "another account's S1"
    );
}

#[test]
fn a_move_is_done_once_the_leader_or_copy_left_its_server() {
    let m = |kind, stream: &str| Move {
        kind,
        account: Some("APP".into()),
        stream: stream.into(),
        consumer: None,
        from: Some("c1-0".into()),
        to: None,
        time: None,
    };
    let view = |leader: &str, followers: &[&str]| {
        account_view("APP", &[listed("S", "c1", leader, followers)])
    };
    for (what, v, mv, done) in [
        (
            "leader still on from",
            view("c1-0", &["c1-1", "c1-2"]),
            m(MoveKind::Leader, "S"),
            false,
        ),
        (
            "leader elsewhere",
            view("c1-1", &["c1-0", "c1-2"]),
            m(MoveKind::Leader, "S"),
            true,
        ),
        (
            "no leader yet",
            view("", &["c1-0", "c1-2"]),
            m(MoveKind::Leader, "S"),
            false,
        ),
        (
            "stream gone",
            view("c1-0", &["c1-1"]),
            m(MoveKind::Leader, "GONE"),
            true,
        ),
        (
            "copy still on from",
            view("c1-1", &["c1-0", "c1-2"]),
            m(MoveKind::Placement, "S"),
            false,
        ),
        (
            "copy left, group as asked",
            view("c1-1", &["c1-2", "c1-3"]),
            m(MoveKind::Placement, "S"),
            true,
        ),
    ] {
        assert_eq!(move_done(&v, &mv), done, "{what}");
    }
}

/// A consumer of `stream` led by `leader`, followers current and online.
fn consumer(name: &str, leader: &str, followers: &[&str]) -> ConsumerDetail {
    ConsumerDetail {
        name: name.into(),
        stream_name: "S".into(),
        cluster: Some(ClusterInfo {
            name: "c1".into(),
            leader: leader.into(),
            replicas: followers.iter().map(|f| peer(f, true, false)).collect(),
            ..Default::default()
        }),
    }
}

fn consumers_of(stream: &str, consumers: Vec<ConsumerDetail>) -> ListedConsumers {
    ListedConsumers {
        stream: stream.into(),
        consumers,
        ..Default::default()
    }
}

#[test]
fn consumers_are_listed_only_for_streams_of_the_cluster_with_a_leader_and_a_consumer() {
    let entry = |name: &str, cluster: &str, leader: &str, consumers: i64| {
        json!({"config": {"name": name, "num_replicas": 3},
               "state": {"messages": 0, "consumer_count": consumers},
               "cluster": {"name": cluster, "leader": leader}})
    };
    let values = vec![
        entry("WITH", "c1", "c1-0", 2),
        entry("NONE", "c1", "c1-0", 0),
        entry("LEADERLESS", "c1", "", 1),
        entry("ELSEWHERE", "c2", "c2-0", 1),
        json!({"config": {"name": "UNCLUSTERED"}, "state": {"consumer_count": 1}}),
        json!("not a stream"),
    ];
    assert_eq!(
        consumer_streams(&values, "c1"),
        vec!["WITH".to_string()],
        "one CONSUMER.LIST per stream of c1 with a leader and a consumer, none otherwise"
    );
}

#[test]
fn the_view_holds_each_streams_consumers_after_it() {
    let v = account_view(
        "APP",
        &[
            listed("S", "c1", "c1-0", &["c1-1", "c1-2"]),
            listed("T", "c1", "c1-1", &["c1-0", "c1-2"]),
        ],
    );
    let v = with_consumers(
        v,
        &[
            consumers_of(
                "S",
                vec![
                    consumer("W2", "c1-2", &["c1-0", "c1-1"]),
                    consumer("W1", "c1-1", &["c1-0", "c1-2"]),
                ],
            ),
            consumers_of("GONE", vec![consumer("X", "c1-0", &[])]),
        ],
    );
    let got: Vec<(&str, Option<&str>, &str, usize)> = v
        .groups
        .iter()
        .map(|g| {
            (
                g.stream.as_str(),
                g.consumer.as_deref(),
                g.leader.as_str(),
                g.replicas,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("S", None, "c1-0", 3),
            ("S", Some("W1"), "c1-1", 3),
            ("S", Some("W2"), "c1-2", 3),
            ("T", None, "c1-1", 3),
        ],
        "each stream's consumers after it, by name; a consumer of a stream not held left out"
    );
    assert!(
        v.groups
            .iter()
            .all(|g| g.account == "APP" && g.cluster == "c1")
    );
}

#[test]
fn the_consumers_settled_gate_row_by_row() {
    let good = || consumers_of("S", vec![consumer("W", "c1-0", &["c1-1", "c1-2"])]);
    let with = |f: fn(&mut ListedConsumers)| {
        let mut l = good();
        f(&mut l);
        l
    };
    let cases: Vec<(&str, Vec<ListedConsumers>, Option<&str>)> = vec![
        ("every consumer as asked", vec![good()], None),
        ("no consumers listed", vec![], None),
        (
            "CONSUMER.LIST failed",
            vec![with(|l| l.unlisted = Some("timed out".into()))],
            Some("the consumers of stream S were not listed: timed out"),
        ),
        (
            "a consumer did not answer",
            vec![with(|l| l.missing = vec!["LOST".into()])],
            Some("consumer LOST of stream S did not answer CONSUMER.LIST"),
        ),
        (
            "no leader",
            vec![with(|l| {
                l.consumers[0].cluster.as_mut().unwrap().leader.clear()
            })],
            Some("consumer W of stream S has no leader"),
        ),
        (
            "a copy offline",
            vec![with(|l| {
                l.consumers[0].cluster.as_mut().unwrap().replicas[1] = peer("c1-2", false, true)
            })],
            Some("the copy of consumer W of stream S on c1-2 is offline"),
        ),
        (
            "a copy behind",
            vec![with(|l| {
                l.consumers[0].cluster.as_mut().unwrap().replicas[0] = peer("c1-1", false, false)
            })],
            Some("the copy of consumer W of stream S on c1-1 is not current"),
        ),
    ];
    for (what, listed, why) in cases {
        assert_eq!(consumers_settled(&listed).err().as_deref(), why, "{what}");
    }
}

#[test]
fn a_consumers_move_is_judged_on_the_consumers_group() {
    let m = |consumer: Option<&str>| Move {
        kind: MoveKind::Leader,
        account: Some("APP".into()),
        stream: "S".into(),
        consumer: consumer.map(String::from),
        from: Some("c1-0".into()),
        to: Some("c1-1".into()),
        time: None,
    };
    // The stream is led by c1-0; W has left it for c1-1.
    let view = |w_leader: &str| {
        with_consumers(
            account_view("APP", &[listed("S", "c1", "c1-0", &["c1-1", "c1-2"])]),
            &[consumers_of(
                "S",
                vec![consumer("W", w_leader, &["c1-0", "c1-2"])],
            )],
        )
    };
    for (what, v, mv, done) in [
        ("W's leader left c1-0", view("c1-1"), m(Some("W")), true),
        (
            "W's leader still on c1-0",
            view("c1-0"),
            m(Some("W")),
            false,
        ),
        (
            "W's own leader, not the stream's",
            view("c1-1"),
            m(None),
            false,
        ),
        ("the consumer gone", view("c1-1"), m(Some("GONE")), true),
    ] {
        assert_eq!(move_done(&v, &mv), done, "{what}");
    }
}

#[test]
fn pinned_streams_are_never_placement_moved() {
    let with = |name: &str, f: fn(&mut Listed)| {
        let mut l = listed(name, "c1", "c1-0", &["c1-1", "c1-2"]);
        f(&mut l);
        l
    };
    let v = account_view(
        "APP",
        &[
            with("FREE", |_| {}),
            with("R1", |l| {
                l.config.num_replicas = 1;
                l.cluster.as_mut().unwrap().replicas.clear();
            }),
            with("CONFIG_PINNED", |l| {
                l.config.placement = Some(Placement {
                    cluster: "c1".into(),
                    ..Default::default()
                })
            }),
            with("TAGS_ONLY", |l| {
                l.config.placement = Some(Placement {
                    tags: vec!["zone:a".into()],
                    ..Default::default()
                })
            }),
            with("RESOURCE_PINNED", |l| {
                l.config.metadata = [(OWNER_METADATA_KEY.to_string(), "uid-p".into())].into()
            }),
            with("RESOURCE_FREE", |l| {
                l.config.metadata = [(OWNER_METADATA_KEY.to_string(), "uid-f".into())].into()
            }),
        ],
    );
    // An R1 consumer of FREE does not pin it.
    let v = with_consumers(
        v,
        &[consumers_of("FREE", vec![consumer("ONE", "c1-0", &[])])],
    );
    let pinned = placement_pinned(&v, &["uid-p".to_string()].into());
    for (stream, is_pinned) in [
        ("FREE", false),
        ("R1", true),
        ("CONFIG_PINNED", true),
        ("TAGS_ONLY", false),
        ("RESOURCE_PINNED", true),
        ("RESOURCE_FREE", false),
    ] {
        assert_eq!(
            pinned.contains(&("APP".to_string(), stream.to_string())),
            is_pinned,
            "{stream}"
        );
    }
}
