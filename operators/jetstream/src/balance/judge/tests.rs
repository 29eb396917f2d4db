//! Both balancers' judge phase, row by row against §6.5: "One move per pass, none while
//! unsettled"; "NatsBalancer … yields to the system balancer, including any stream the system
//! balancer has a move pending on"; streams under evacuation are never moved.

use nats_api::jetstream::Moves;
use rstest::rstest;

use super::*;
use crate::balance::tests::{group, key, piled, view};

/// A verdict as a row reads it: Holding's reason, `Settled`, or `<kind> <stream>`.
fn label(v: &Verdict) -> String {
    match v {
        Verdict::Hold { reason, .. } => (*reason).to_string(),
        Verdict::Settled(_) => "Settled".into(),
        Verdict::Move(m) => format!("{:?} {}", m.kind, m.stream),
    }
}

fn keys(streams: &[&str]) -> BTreeSet<StreamKey> {
    streams.iter().map(|s| key("APP", s)).collect()
}

const LEADERS: Moves = Moves {
    leader: true,
    placement: false,
};

#[rstest]
#[case::a_pile_of_leaders_moves_one("piled", &["APP"], None, &[], "Leader A")]
#[case::no_stepdown_export_nothing_to_move("piled", &[], None, &[], "Settled")]
#[case::pins_unread_hold_the_pass("piled", &["APP"], Some("not filled"), &[], "PassFailed")]
#[case::a_leaderless_group_holds("leaderless", &["APP"], None, &[], "Unsettled")]
#[case::streams_under_evacuation_are_skipped("piled", &["APP"], None, &["A", "B", "C"], "Settled")]
fn the_system_balancer_judges(
    #[case] shown: &str,
    #[case] reached: &[&str],
    #[case] unread: Option<&str>,
    #[case] evacuating: &[&str],
    #[case] want: &str,
) {
    let v = match shown {
        "piled" => piled(),
        _ => view(vec![group("APP", "A", "east", &["", "east-1", "east-2"])]),
    };
    let reached: BTreeSet<String> = reached.iter().map(|a| a.to_string()).collect();
    let none = BTreeSet::new();
    let seen = SystemSeen {
        cluster: "east",
        view: &v,
        reached: &reached,
        reached_consumers: &reached,
        pinned: unread.map_or(Ok(&none), Err),
    };
    let got = system_verdict(&seen, keys(evacuating), &LEADERS, "1m0s");
    assert_eq!(label(&got), want, "{got:?}");
}

#[rstest]
#[case::a_pile_of_leaders_moves_one(&[], None, &[], &[], "Leader A")]
#[case::a_stream_not_answering_holds(&["A"], None, &[], &[], "Unsettled")]
#[case::consumers_not_listed_hold(&[], Some("timed out"), &[], &[], "Unsettled")]
#[case::a_system_move_pending_yields(&[], None, &["A", "B", "C"], &[], "YieldingToSystemBalancer")]
#[case::streams_under_evacuation_are_skipped(&[], None, &[], &["A", "B", "C"], "Settled")]
fn the_account_balancer_judges(
    #[case] missing: &[&str],
    #[case] unlisted: Option<&str>,
    #[case] system_pending: &[&str],
    #[case] evacuating: &[&str],
    #[case] want: &str,
) {
    let v = piled();
    let missing: Vec<String> = missing.iter().map(|m| m.to_string()).collect();
    let consumers: Vec<ListedConsumers> = unlisted
        .map(|why| ListedConsumers {
            stream: "A".into(),
            unlisted: Some(why.into()),
            ..Default::default()
        })
        .into_iter()
        .collect();
    let pools = Assignment {
        pools: vec![("default".into(), keys(&["A", "B", "C"]))],
        overlapping: Vec::new(),
    };
    let none = BTreeSet::new();
    let seen = AccountSeen {
        cluster: "east",
        account: "APP",
        listed: &[],
        missing: &missing,
        consumers: &consumers,
        view: &v,
        pools: &pools,
        pinned_uids: &none,
    };
    let around = Around {
        from: GateFrom::Account("no system view of NATS cluster east".into()),
        system_pending: keys(system_pending)
            .into_iter()
            .map(|k| (k, "NatsSystemBalancer nats/all".into()))
            .collect(),
        evacuating: keys(evacuating),
    };
    let got = account_verdict(&seen, &around, &LEADERS, "1m0s");
    assert_eq!(label(&got), want, "{got:?}");
}
