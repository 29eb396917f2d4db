//! The servers a NatsBalancer judges copies over and the replica skew it cannot even, row by
//! row against §6.5: "with `moves.placement`, a copy moves to a server holding fewer"; a
//! consumer's copies follow its stream.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nats_api::jetstream::Moves;
use rstest::rstest;

use super::*;
use crate::balance::gate::{RECENT, Sighting, gate_from};
use crate::balance::judge::{AccountSeen, Around, Verdict, account_verdict};
use crate::balance::pools::Assignment;
use crate::balance::tests::{group, server};
use crate::system_view::GroupSeen;

const EAST: [&str; 5] = ["east-0", "east-1", "east-2", "east-3", "east-4"];

/// The account's view as STREAM.LIST shows it: every server holding one of `groups`' copies.
fn account_view(groups: Vec<GroupSeen>) -> SystemView {
    let mut servers: Vec<_> = groups
        .iter()
        .flat_map(|g| g.members().map(|m| server(m, "east")).collect::<Vec<_>>())
        .collect();
    servers.sort_by(|a, b| a.name.cmp(&b.name));
    servers.dedup_by(|a, b| a.name == b.name);
    SystemView {
        servers,
        groups,
        ..Default::default()
    }
}

/// What a NatsSystemBalancer's ping of east saw: its five servers, a meta leader, no group
/// unsettled.
fn sighting(at: Instant) -> Sighting {
    Sighting {
        by: "NatsSystemBalancer nats/system".into(),
        at,
        view: SystemView {
            servers: EAST.iter().map(|n| server(n, "east")).collect(),
            meta_leader: Some("east-0".into()),
            ..Default::default()
        },
        lagging: Vec::new(),
    }
}

/// APP's R3 streams Q1..Q4 all on east-0..2 and R1 A1 on east-0: 5, 4, 4 copies; east-3 and
/// east-4 hold none of the account's.
fn piled_on_three() -> Vec<GroupSeen> {
    let mut g: Vec<GroupSeen> = ["Q1", "Q2", "Q3", "Q4"]
        .iter()
        .map(|s| group("APP", s, "east", &["east-0", "east-1", "east-2"]))
        .collect();
    g.insert(0, group("APP", "A1", "east", &["east-0"]));
    g
}

fn consumer(stream: &str, name: &str, members: &[&str]) -> GroupSeen {
    GroupSeen {
        consumer: Some(name.into()),
        ..group("APP", stream, "east", members)
    }
}

/// The verdict as a row reads it: `Settled`, a Holding reason, or `<kind> <stream>[/<consumer>]
/// off <server>`.
fn label(v: &Verdict) -> String {
    match v {
        Verdict::Hold { reason, .. } => (*reason).to_string(),
        Verdict::Settled(_) => "Settled".into(),
        Verdict::Move(m) => {
            let c = m
                .consumer
                .as_deref()
                .map(|c| format!("/{c}"))
                .unwrap_or_default();
            format!("{:?} {}{c} off {}", m.kind, m.stream, m.from)
        }
    }
}

/// The account balancer's verdict over `groups` (one default pool of them all) with the
/// servers `from` shows, and the Ready note on unseen servers.
fn judged(groups: Vec<GroupSeen>, from: &GateFrom<'_>, moves: &Moves) -> (Verdict, Option<String>) {
    let streams: BTreeSet<_> = groups.iter().map(GroupSeen::stream_key).collect();
    let view = widened(account_view(groups), from, "east", moves.placement);
    let note = unseen_note(from, &view, "east", moves.placement);
    let pools = Assignment {
        pools: vec![("default".into(), streams)],
        overlapping: Vec::new(),
    };
    let none = BTreeSet::new();
    let seen = AccountSeen {
        cluster: "east",
        account: "APP",
        listed: &[],
        missing: &[],
        consumers: &[],
        view: &view,
        pools: &pools,
        pinned_uids: &none,
    };
    let around = Around {
        from: from.clone(),
        system_pending: Default::default(),
        evacuating: BTreeSet::new(),
    };
    (account_verdict(&seen, &around, moves, "5s"), note)
}

#[rstest]
#[case::a_sighting_shows_servers_holding_none("fresh", true, "Placement Q1 off east-0", false)]
#[case::placement_off_moves_nothing("fresh", false, "Settled", false)]
#[case::no_sighting_says_why_in_ready("none", true, "Settled", true)]
#[case::a_stale_sighting_says_why_in_ready("stale", true, "Settled", true)]
fn placement_reaches_the_servers_holding_none_of_the_accounts_copies(
    #[case] sighted: &str,
    #[case] placement: bool,
    #[case] want: &str,
    #[case] noted: bool,
) {
    let at = Instant::now();
    let s = sighting(at);
    let now = match sighted {
        "stale" => at + RECENT + Duration::from_secs(1),
        _ => at,
    };
    let from = gate_from((sighted != "none").then_some(&s), "east", now);
    let moves = Moves {
        leader: false,
        placement,
    };
    let (got, note) = judged(piled_on_three(), &from, &moves);
    assert_eq!(label(&got), want, "{got:?}");
    assert_eq!(note.is_some(), noted, "{note:?}");
    if let Some(n) = note {
        assert!(
            n.starts_with("placement judged only among the 3 servers holding the account's streams: no system view of NATS cluster east"),
            "{n}"
        );
    }
}

#[test]
fn the_servers_holding_none_count_zero_in_the_pools_skew() {
    let at = Instant::now();
    let s = sighting(at);
    let from = gate_from(Some(&s), "east", at);
    let v = widened(account_view(piled_on_three()), &from, "east", true);
    let names: Vec<&str> = v.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, EAST.to_vec());
    let streams = piled_on_three().iter().map(GroupSeen::stream_key).collect();
    assert_eq!(
        crate::balance::pools::pool_skews(&v, "east", &streams).replicas,
        5,
        "5, 4, 4, 0, 0"
    );
    let narrow = account_view(piled_on_three());
    assert_eq!(
        crate::balance::pools::pool_skews(&narrow, "east", &streams).replicas,
        1,
        "without the sighting: 5, 4, 4"
    );
}

/// Consumers' copies over east-0..3 (all four hold a copy of the account's): the streams' own
/// copies within one of even in every row.
fn consumer_rows(case: &str) -> Vec<GroupSeen> {
    let (a, b, c, d) = (
        &["east-0", "east-1", "east-2"][..],
        &["east-1", "east-2", "east-3"][..],
        &["east-0", "east-2", "east-3"][..],
        &["east-3"][..],
    );
    match case {
        // R1 consumers of R3 A, all three on east-0: 4, 1, 1 (+ B, C, D elsewhere).
        "r1_consumers_piled" => vec![
            group("APP", "A", "east", a),
            consumer("A", "E1", &["east-0"]),
            consumer("A", "E2", &["east-0"]),
            consumer("A", "E3", &["east-0"]),
            group("APP", "D", "east", d),
        ],
        // A carries two durables (3 copies on each of its servers); moving it would overshoot.
        "a_stream_carrying_the_gap" => vec![
            group("APP", "A", "east", a),
            consumer("A", "C1", a),
            consumer("A", "C2", a),
            group("APP", "B", "east", b),
            group("APP", "C", "east", c),
        ],
        // A carries one durable; B, with none, evens the consumers' skew.
        "a_stream_without_consumers_evens_it" => vec![
            group("APP", "A", "east", a),
            consumer("A", "C1", a),
            group("APP", "B", "east", a),
            group("APP", "D", "east", d),
        ],
        // Consumers' leaders piled on east-0: the leader rule moves one.
        _ => vec![
            group("APP", "A", "east", &["east-1", "east-0", "east-2"]),
            consumer("A", "C1", a),
            consumer("A", "C2", a),
            consumer("A", "C3", a),
            group("APP", "D", "east", d),
        ],
    }
}

#[rstest]
#[case::r1_consumers_piled("r1_consumers_piled", false, "Settled", Some(3))]
#[case::a_stream_carrying_the_gap("a_stream_carrying_the_gap", false, "Settled", Some(3))]
#[case::a_stream_without_consumers_evens_it(
    "a_stream_without_consumers_evens_it",
    false,
    "Placement B off east-0",
    None
)]
#[case::consumer_leaders_piled("consumer_leaders_piled", true, "Leader A/C1 off east-0", None)]
fn a_replica_skew_of_consumers_alone(
    #[case] case: &str,
    #[case] leader: bool,
    #[case] want: &str,
    #[case] noted_skew: Option<u32>,
) {
    let groups = consumer_rows(case);
    let streams: BTreeSet<_> = groups.iter().map(GroupSeen::stream_key).collect();
    let own = account_view(
        groups
            .iter()
            .filter(|g| g.consumer.is_none())
            .cloned()
            .collect(),
    );
    assert!(
        skew(&loads(&own, "east")).replicas <= 1,
        "the streams' own copies are even in every row"
    );
    let from = GateFrom::Account("no system view of NATS cluster east".into());
    let moves = Moves {
        leader,
        placement: true,
    };
    let (got, _) = judged(groups.clone(), &from, &moves);
    assert_eq!(label(&got), want, "{got:?}");
    let note = consumer_note(&account_view(groups), "east", "default", &streams);
    match (noted_skew, &got) {
        (Some(n), Verdict::Settled(message)) => {
            let note = note.expect("a note");
            assert!(
                note.starts_with(&format!(
                    "replica skew {n} in pool default is of consumers' copies alone"
                )),
                "{note}"
            );
            assert!(message.ends_with(&note), "Settled names it: {message}");
        }
        (Some(_), other) => panic!("{other:?}"),
        (None, Verdict::Settled(message)) => {
            assert!(!message.contains("consumers' copies"), "{message}")
        }
        (None, _) => {}
    }
}

#[test]
fn a_placement_move_takes_the_stream_and_its_consumers_copies_along() {
    let groups = consumer_rows("a_stream_carrying_the_gap");
    let a = &groups[0];
    assert_eq!(crate::balance::carried(&groups, a, "east-0"), 3);
    assert_eq!(crate::balance::carried(&groups, a, "east-3"), 0);
}
