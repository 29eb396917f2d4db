//! The balancers' rules, row by row against the sentences of §6.5.

use nats_wire::jsapi::{MetaGroup, MetaPeer};

use super::*;
use crate::system_view::ServerSeen;

pub(super) fn server(name: &str, cluster: &str) -> ServerSeen {
    ServerSeen {
        name: name.into(),
        cluster: cluster.into(),
        tags: Vec::new(),
    }
}

/// A group in `cluster` led by `members[0]`.
pub(super) fn group(account: &str, stream: &str, cluster: &str, members: &[&str]) -> GroupSeen {
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

/// east-0..2 and west-0..2, the meta group of all six, none offline.
pub(super) fn view(groups: Vec<GroupSeen>) -> SystemView {
    let names = ["east-0", "east-1", "east-2", "west-0", "west-1", "west-2"];
    SystemView {
        servers: names
            .iter()
            .map(|n| server(n, n.split('-').next().unwrap_or_default()))
            .collect(),
        meta: Some(MetaGroup {
            leader_cluster: "east".into(),
            leader: "east-0".into(),
            peers: names
                .iter()
                .map(|n| MetaPeer {
                    name: n.to_string(),
                    current: true,
                    ..Default::default()
                })
                .collect(),
            cluster_size: 6,
        }),
        meta_leader: Some("east-0".into()),
        groups,
    }
}

/// Three R3 streams of APP in east, all led by east-0; one in west led by west-0.
pub(super) fn piled() -> SystemView {
    view(vec![
        group("APP", "A", "east", &["east-0", "east-1", "east-2"]),
        group("APP", "B", "east", &["east-0", "east-2", "east-1"]),
        group("APP", "C", "east", &["east-0", "east-1", "east-2"]),
        group("APP", "W", "west", &["west-0", "west-1", "west-2"]),
    ])
}

fn leader_scope(accounts: &[&str]) -> Scope {
    Scope {
        leader: true,
        leader_accounts: accounts.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }
}

pub(super) fn key(account: &str, stream: &str) -> (String, String) {
    (account.into(), stream.into())
}

#[test]
fn loads_and_skew_count_only_the_nats_cluster_judged() {
    let v = piled();
    let loads = loads(&v, "east");
    let got: Vec<(&str, u32, u32)> = loads
        .iter()
        .map(|l| (l.name.as_str(), l.leaders, l.replicas))
        .collect();
    assert_eq!(
        got,
        vec![("east-0", 3, 3), ("east-1", 0, 3), ("east-2", 0, 3)]
    );
    assert_eq!(
        skew(&loads),
        Skew {
            leaders: 3,
            replicas: 0
        }
    );
    assert_eq!(skew(&[]), Skew::default());
}

#[test]
fn the_settled_gate_reads_only_its_nats_cluster() {
    let cases: Vec<(&str, SystemView, Result<(), &str>)> = vec![
        ("all as asked", piled(), Ok(())),
        (
            "no meta leader",
            SystemView {
                meta: None,
                meta_leader: None,
                ..piled()
            },
            Err("no leader"),
        ),
        (
            "a group of east mid-move",
            view(vec![
                group(
                    "APP",
                    "A",
                    "east",
                    &["east-0", "east-1", "east-2", "west-0"],
                )
                .tap(|g| g.replicas = 3),
            ]),
            Err("stream A of account APP is not as its config asks"),
        ),
        (
            "a group of west mid-move: not east's business",
            view(vec![
                group("APP", "W", "west", &["west-0", "west-1"]).tap(|g| g.replicas = 3),
            ]),
            Ok(()),
        ),
        (
            "a member of an east group silent",
            {
                let mut v = piled();
                v.servers.retain(|s| s.name != "east-2");
                v
            },
            Err("east-2, holding a copy of stream A"),
        ),
    ];
    for (case, v, want) in cases {
        match (settled(&v, "east"), want) {
            (Ok(()), Ok(())) => {}
            (Err(got), Err(w)) => assert!(got.contains(w), "{case}: {got}"),
            (got, w) => panic!("{case}: {got:?}, wanted {w:?}"),
        }
    }
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&mut Self)) -> Self;
}
impl<T> Tap for T {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}

#[test]
fn a_leader_move_goes_from_the_most_to_the_fewest_leaders_one_per_pass() {
    let m = next_move(&piled(), "east", &leader_scope(&["APP"])).expect("a move");
    assert_eq!(
        m,
        PlannedMove {
            kind: MoveKind::Leader,
            account: "APP".into(),
            stream: "A".into(),
            consumer: None,
            from: "east-0".into(),
            to: Some("east-1".into()),
        }
    );
}

#[test]
fn no_leader_move_within_a_skew_of_one_or_without_the_stepdown_export() {
    let even = view(vec![
        group("APP", "A", "east", &["east-0", "east-1", "east-2"]),
        group("APP", "B", "east", &["east-1", "east-2", "east-0"]),
        group("APP", "C", "east", &["east-2", "east-1", "east-0"]),
        group("APP", "D", "east", &["east-0", "east-1", "east-2"]),
    ]);
    assert_eq!(
        next_move(&even, "east", &leader_scope(&["APP"])),
        None,
        "skew 1"
    );
    assert_eq!(
        next_move(&piled(), "east", &leader_scope(&["OTHER"])),
        None,
        "APP does not export jetstream-stepdown"
    );
    let off = Scope {
        leader: false,
        ..leader_scope(&["APP"])
    };
    assert_eq!(next_move(&piled(), "east", &off), None, "leader moves off");
}

#[test]
fn streams_under_evacuation_or_another_move_are_skipped() {
    let mut scope = leader_scope(&["APP"]);
    scope.skip = [key("APP", "A"), key("APP", "B")].into();
    // Only C is counted: east-0 leads one, skew 1, nothing to do.
    assert_eq!(next_move(&piled(), "east", &scope), None);
    scope.skip = [key("APP", "A")].into();
    let m = next_move(&piled(), "east", &scope).expect("a move");
    assert_eq!(m.stream, "B");
}

#[test]
fn a_pool_is_balanced_within_itself() {
    let mut scope = leader_scope(&["APP"]);
    scope.only = Some([key("APP", "A"), key("APP", "B")].into());
    let m = next_move(&piled(), "east", &scope).expect("two led by east-0 of the pool");
    assert_eq!((m.stream.as_str(), m.to.as_deref()), ("A", Some("east-1")));
    scope.only = Some([key("APP", "C")].into());
    assert_eq!(next_move(&piled(), "east", &scope), None);
}

#[test]
fn placement_moves_only_when_opted_in_within_the_nats_cluster_never_pinned() {
    // R1 streams piled on east-0: copies 3, 0, 0.
    let v = view(vec![
        group("APP", "A", "east", &["east-0"]),
        group("APP", "B", "east", &["east-0"]),
        group("APP", "C", "east", &["east-0"]),
        group("APP", "W", "west", &["west-0"]),
    ]);
    let mut scope = Scope {
        placement: true,
        ..Default::default()
    };
    let m = next_move(&v, "east", &scope).expect("a placement move");
    assert_eq!(
        (m.kind, m.stream.as_str(), m.from.as_str(), m.to.as_deref()),
        (MoveKind::Placement, "A", "east-0", None)
    );
    scope.pinned = [key("APP", "A")].into();
    assert_eq!(
        next_move(&v, "east", &scope).map(|m| m.stream),
        Some("B".into())
    );
    // A stream with no resource whose own config names its NATS cluster is pinned as well.
    let mut declared = v.clone();
    declared.groups[1].placement_cluster = "east".into();
    assert_eq!(
        next_move(&declared, "east", &scope).map(|m| m.stream),
        Some("C".into()),
        "B's config declares placement.cluster: never placement-moved"
    );
    scope.placement = false;
    assert_eq!(
        next_move(&v, "east", &scope),
        None,
        "placement moves are opt-in"
    );
    assert_eq!(
        next_move(
            &v,
            "west",
            &Scope {
                placement: true,
                ..Default::default()
            }
        ),
        None,
        "west holds one copy on one of three servers: skew 1"
    );
}

mod consumers;
