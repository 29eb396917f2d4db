//! Consumers' groups in the balancers' rules, row by row against §6.5: the system balancer
//! "evens leaders and copies over every account … leader moves through each account's
//! jetstream-stepdown export"; a consumer's group is a group for leaders and copies, its leader
//! moves as a Leader move naming it, and it follows its stream otherwise.

use super::*;

/// (case, view, scope, the move's stream and consumer).
type MoveRow<'a> = (
    &'a str,
    SystemView,
    Scope,
    Option<(&'a str, Option<&'a str>)>,
);
/// (case, accounts reaching their streams' stepdown, their consumers', leader, reason).
type CapabilityRow<'a> = (
    &'a str,
    BTreeSet<String>,
    BTreeSet<String>,
    LeaderCapability,
    Option<&'a str>,
);

/// A consumer `name` of `stream` of APP in east, led by `members[0]`.
fn consumer(stream: &str, name: &str, members: &[&str]) -> GroupSeen {
    GroupSeen {
        consumer: Some(name.into()),
        ..group("APP", stream, "east", members)
    }
}

/// Stream A of APP led by east-1, its consumers C1..C3 all led by east-0: 3, 1, 0 leaders.
fn piled_consumers() -> SystemView {
    view(vec![
        group("APP", "A", "east", &["east-1", "east-0", "east-2"]),
        consumer("A", "C1", &["east-0", "east-1", "east-2"]),
        consumer("A", "C2", &["east-0", "east-2", "east-1"]),
        consumer("A", "C3", &["east-0", "east-1", "east-2"]),
    ])
}

/// Leader moves on for APP's streams and consumers.
fn both() -> Scope {
    Scope {
        consumer_accounts: ["APP".to_string()].into(),
        ..leader_scope(&["APP"])
    }
}

fn counted(v: &SystemView) -> Vec<(String, u32, u32)> {
    loads(v, "east")
        .into_iter()
        .map(|l| (l.name, l.leaders, l.replicas))
        .collect()
}

#[test]
fn a_consumers_group_counts_for_leaders_and_copies() {
    assert_eq!(
        counted(&piled_consumers()),
        vec![
            ("east-0".to_string(), 3, 4),
            ("east-1".to_string(), 1, 4),
            ("east-2".to_string(), 0, 4),
        ]
    );
    assert_eq!(
        skew(&loads(&piled_consumers(), "east")),
        Skew {
            leaders: 3,
            replicas: 0
        }
    );
}

#[test]
fn the_settled_gate_reads_consumers_groups_too() {
    let cases: Vec<(&str, SystemView, Result<(), &str>)> = vec![
        ("every consumer led", piled_consumers(), Ok(())),
        (
            "a consumer without a leader",
            view(vec![
                group("APP", "A", "east", &["east-1", "east-0", "east-2"]),
                consumer("A", "C1", &["east-0", "east-1", "east-2"]).tap(|g| g.leader.clear()),
            ]),
            Err("consumer C1 of stream A of account APP is not as its config asks"),
        ),
        (
            "a consumer's copy on a silent server",
            view(vec![consumer("A", "C1", &["east-0", "east-1", "ghost"])]),
            Err("ghost, holding a copy of consumer C1 of stream A of account APP, did not answer"),
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

#[test]
fn a_consumers_leader_move_is_a_leader_move_naming_it() {
    let m = next_move(&piled_consumers(), "east", &both()).expect("a move");
    assert_eq!(
        m,
        PlannedMove {
            kind: MoveKind::Leader,
            account: "APP".into(),
            stream: "A".into(),
            consumer: Some("C1".into()),
            from: "east-0".into(),
            to: Some("east-1".into()),
        },
        "from the server leading three consumers to a member leading none (east-1 on the tie \
         by name: the stream leader it holds is counted apart)"
    );
}

#[test]
fn consumer_leader_moves_row_by_row() {
    let key = |s: &str| ("APP".to_string(), s.to_string());
    let cases: Vec<MoveRow> = vec![
        (
            "stream leaders within one of even (1, 0, 0), consumer leaders not (2, 0, 0): a \
             consumer moves",
            view(vec![
                group("APP", "A", "east", &["east-0", "east-1", "east-2"]),
                consumer("A", "C1", &["east-0", "east-1", "east-2"]),
                consumer("A", "C2", &["east-0", "east-1", "east-2"]),
            ]),
            both(),
            Some(("A", Some("C1"))),
        ),
        (
            "the sum even (2, 1, 1) but stream leaders not (2, 0, 0): a stream leader moves, \
             not left skewed behind its consumers (the balance scenario's 1, 3, 2)",
            view(vec![
                group("APP", "A", "east", &["east-0", "east-1", "east-2"]),
                group("APP", "B", "east", &["east-0", "east-1", "east-2"]),
                consumer("A", "C1", &["east-1", "east-0", "east-2"]),
                consumer("B", "C2", &["east-2", "east-0", "east-1"]),
            ]),
            both(),
            Some(("A", None)),
        ),
        (
            "stream leaders skewed before consumer leaders: the stream's own group first",
            view(vec![
                group("APP", "A", "east", &["east-0", "east-1", "east-2"]),
                group("APP", "B", "east", &["east-0", "east-1", "east-2"]),
                consumer("A", "C1", &["east-0", "east-1", "east-2"]),
                consumer("A", "C2", &["east-0", "east-1", "east-2"]),
            ]),
            both(),
            Some(("A", None)),
        ),
        (
            "the consumers' stepdown not reached: only the streams' own groups move",
            view(vec![
                group("APP", "A", "east", &["east-0", "east-1", "east-2"]),
                group("APP", "B", "east", &["east-0", "east-1", "east-2"]),
                consumer("A", "C1", &["east-0", "east-1", "east-2"]),
                consumer("A", "C2", &["east-0", "east-1", "east-2"]),
            ]),
            leader_scope(&["APP"]),
            Some(("A", None)),
        ),
        (
            "the consumers' stepdown not reached and stream leaders even: nothing",
            view(vec![
                group("APP", "A", "east", &["east-1", "east-0", "east-2"]),
                group("APP", "B", "east", &["east-0", "east-1", "east-2"]),
                consumer("A", "C1", &["east-0", "east-1", "east-2"]),
                consumer("A", "C2", &["east-0", "east-1", "east-2"]),
            ]),
            leader_scope(&["APP"]),
            None,
        ),
        (
            "neither stepdown reached: nothing",
            piled_consumers(),
            Scope {
                consumer_accounts: ["OTHER".to_string()].into(),
                ..leader_scope(&["OTHER"])
            },
            None,
        ),
        (
            "a consumer of a stream under evacuation or another balancer's move is skipped",
            piled_consumers(),
            Scope {
                skip: [key("A")].into(),
                ..both()
            },
            None,
        ),
        (
            "a pool holds its streams' consumers",
            piled_consumers(),
            Scope {
                only: Some([key("A")].into()),
                ..both()
            },
            Some(("A", Some("C1"))),
        ),
        (
            "a pool without the stream: none of its consumers",
            piled_consumers(),
            Scope {
                only: Some([key("B")].into()),
                ..both()
            },
            None,
        ),
        (
            "an R1 consumer has no member to lead instead",
            view(vec![
                consumer("A", "E1", &["east-0"]),
                consumer("A", "E2", &["east-0"]),
            ]),
            both(),
            None,
        ),
    ];
    for (case, v, scope, want) in cases {
        let got = next_move(&v, "east", &scope);
        assert_eq!(
            got.as_ref()
                .map(|m| (m.stream.as_str(), m.consumer.as_deref())),
            want,
            "{case}: {got:?}"
        );
        assert!(
            got.is_none_or(|m| m.kind == MoveKind::Leader),
            "{case}: leader moves only"
        );
    }
}

#[test]
fn placement_moves_stay_stream_only_consumers_follow() {
    // east-0 holds the copies of R1 consumers of B, placed with it; the stream B is on east-1.
    let v = view(vec![
        group("APP", "B", "east", &["east-1"]),
        consumer("B", "C1", &["east-0"]),
        consumer("B", "C2", &["east-0"]),
        consumer("B", "C3", &["east-0"]),
    ]);
    let scope = Scope {
        placement: true,
        ..Default::default()
    };
    assert_eq!(
        next_move(&v, "east", &scope),
        None,
        "copies 3, 1, 0: only consumers' groups on east-0, none to move alone"
    );
    // A and its two consumers are the whole pile: moved, it would pile 3 copies elsewhere.
    let v = view(vec![
        group("APP", "A", "east", &["east-0"]),
        consumer("A", "C1", &["east-0"]),
        consumer("A", "C2", &["east-0"]),
    ]);
    assert_eq!(
        next_move(&v, "east", &scope),
        None,
        "a stream carrying as many copies as the gap is not moved"
    );
    // A and its consumer carry 2 of east-0's 3: moved, they even it.
    let v = view(vec![
        group("APP", "A", "east", &["east-0"]),
        consumer("A", "C1", &["east-0"]),
        group("APP", "B", "east", &["east-0"]),
    ]);
    let m = next_move(&v, "east", &scope).expect("the stream, its consumers following");
    assert_eq!(
        (m.kind, m.stream.as_str(), m.consumer, m.from.as_str()),
        (MoveKind::Placement, "A", None, "east-0")
    );
}

#[test]
fn a_move_is_done_once_the_leader_of_its_own_group_left() {
    let m = |stream: &str, consumer: Option<&str>, kind| Move {
        kind,
        account: Some("APP".into()),
        stream: stream.into(),
        consumer: consumer.map(String::from),
        from: Some("east-0".into()),
        to: None,
        time: None,
    };
    // A still led by east-0; its consumer C1 now led by east-2.
    let v = view(vec![
        group("APP", "A", "east", &["east-0", "east-1", "east-2"]),
        consumer("A", "C1", &["east-2", "east-0", "east-1"]),
        consumer("A", "C2", &["east-0", "east-1", "east-2"]),
    ]);
    for (case, mv, done) in [
        (
            "C1's leader left east-0",
            m("A", Some("C1"), MoveKind::Leader),
            true,
        ),
        (
            "C2's leader is still on east-0",
            m("A", Some("C2"), MoveKind::Leader),
            false,
        ),
        (
            "the stream's own leader is still on east-0",
            m("A", None, MoveKind::Leader),
            false,
        ),
        (
            "a consumer gone",
            m("A", Some("GONE"), MoveKind::Leader),
            true,
        ),
        (
            "another account's stream of that name: gone here",
            Move {
                account: Some("OTHER".into()),
                ..m("A", None, MoveKind::Leader)
            },
            true,
        ),
        (
            "a placement move: A's copy still on east-0",
            m("A", None, MoveKind::Placement),
            false,
        ),
    ] {
        assert_eq!(move_done(&v, &mv), done, "{case}");
    }
}

#[test]
fn capabilities_name_who_lacks_which_stepdown() {
    let set = |a: &[&str]| -> BTreeSet<String> { a.iter().map(|s| s.to_string()).collect() };
    let all = set(&["A", "B", "C"]);
    let cases: Vec<CapabilityRow> = vec![
        (
            "every account reaches both",
            all.clone(),
            all.clone(),
            LeaderCapability::Full,
            None,
        ),
        (
            "none reaches its streams'",
            set(&[]),
            set(&[]),
            LeaderCapability::None,
            Some(
                "3 of 3 accounts carry no jetstream-stepdown export; their leaders are not moved: \
                 A, B, C",
            ),
        ),
        (
            "one without the export at all",
            set(&["A", "B"]),
            set(&["A", "B"]),
            LeaderCapability::Partial,
            Some(
                "1 of 3 accounts carry no jetstream-stepdown export; their leaders are not moved: C",
            ),
        ),
        (
            "one exporting its streams' stepdown only",
            all.clone(),
            set(&["A", "C"]),
            LeaderCapability::Partial,
            Some(
                "1 of 3 accounts export no consumer stepdown; their consumers' leaders are not \
                 moved: B",
            ),
        ),
        (
            "both kinds missing",
            set(&["A", "B"]),
            set(&["A"]),
            LeaderCapability::Partial,
            Some(
                "1 of 3 accounts carry no jetstream-stepdown export; their leaders are not moved: \
                 C; 1 of 3 accounts export no consumer stepdown; their consumers' leaders are not \
                 moved: B",
            ),
        ),
    ];
    for (case, streams, consumers, leader, reason) in cases {
        let c = capabilities(&all, &streams, &consumers);
        assert_eq!(c.leader, Some(leader), "{case}");
        assert_eq!(c.leader_reason.as_deref(), reason, "{case}");
        assert!(c.placement, "{case}");
    }
}
