//! Replica divergence as the system account can see it: each server answering
//! `$SYS.REQ.SERVER.PING.JSZ` (accounts and streams asked for) reports the state of its own
//! replica of every stream it holds — message count, first and last sequence — not the
//! leader's. Replicas that have applied the same log agree on all three; a replica whose block
//! file was cut while its server was down comes back at the same last sequence holding fewer
//! messages, and nats-server's leader still lists it current (docs/durability.md, the run that
//! showed it).
//!
//! The rule here judges a stream's replica states over the last passes. A NatsStream reconciles
//! over its account's connection, which cannot send the system account's ping; the
//! NatsSystemBalancer of the NATS cluster can, and its pass judges every stream there
//! ([`carried`], [`consistency`]): `status.diverged`, the ReplicasConsistent condition, a
//! ReplicasDiverged Warning Event and the `nats_operator_streams_diverged` gauge.

use std::collections::BTreeMap;

use controller_kit::conditions::Decided;
use nats_api::jetstream::{DivergedReplicas, condition, reason};
use nats_wire::PingReplies;
use nats_wire::monitor::Jsz;

/// Passes in a row a divergence must persist before ReplicasConsistent reads False: a pass may
/// catch a replica mid-apply (one message behind on the count at the same last sequence), three
/// in a row at a system balancer's 5 s floor cannot.
pub const DIVERGED_AFTER: i32 = 3;

/// One pass's reading of the stream groups' replicas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// (account, stream, divergence) of each group whose replicas diverge now.
    pub diverged: Vec<(String, String, Divergence)>,
    /// (account, stream) of each group not every replica of which answered this pass.
    pub unheard: Vec<(String, String)>,
}

/// This pass's divergences carried over the previous status: the passes counted on where the
/// same servers of the same stream diverged last time, started at 1 otherwise. A stream not
/// every replica of which answered keeps its previous entry as it was (a missing answer is
/// neither agreement nor another pass of divergence); a stream whose replicas all answered and
/// agree is left out.
pub fn carried(previous: &[DivergedReplicas], now: &Found) -> Vec<DivergedReplicas> {
    let kept = previous.iter().filter(|p| {
        now.unheard
            .iter()
            .any(|(account, stream)| &p.account == account && &p.stream == stream)
    });
    now.diverged
        .iter()
        .map(|(account, stream, d)| {
            let before = previous
                .iter()
                .find(|p| &p.account == account && &p.stream == stream && p.servers == d.servers)
                .map_or(0, |p| p.passes);
            DivergedReplicas {
                account: account.clone(),
                stream: stream.clone(),
                last_seq: i64::try_from(d.last_seq).unwrap_or(i64::MAX),
                servers: d.servers.clone(),
                passes: before.saturating_add(1),
            }
        })
        .chain(kept.cloned())
        .collect()
}

/// ReplicasConsistent from the carried divergences: False ReplicasDiverged naming each one that
/// persisted [`DIVERGED_AFTER`] passes, True ReplicasAgree otherwise.
pub fn consistency(diverged: &[DivergedReplicas]) -> Decided {
    let lasting: Vec<String> = diverged
        .iter()
        .filter(|d| d.passes >= DIVERGED_AFTER)
        .map(|d| {
            format!(
                "stream {} of account {}: the replicas on {} hold other messages than their peers at \
                 sequence {} ({} passes)",
                d.stream,
                d.account,
                d.servers.join(", "),
                d.last_seq,
                d.passes
            )
        })
        .collect();
    if lasting.is_empty() {
        Decided::new(
            condition::REPLICAS_CONSISTENT,
            true,
            reason::REPLICAS_AGREE,
            "every stream's replicas at the same last sequence hold the same messages",
        )
    } else {
        Decided::new(
            condition::REPLICAS_CONSISTENT,
            false,
            reason::REPLICAS_DIVERGED,
            format!(
                "{}; nats-server does not repair a damaged replica: move it off the server \
                 (docs/durability.md)",
                lasting.join("; ")
            ),
        )
    }
}

/// One server's own replica of a stream, as its JSZ answer reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaState {
    pub server: String,
    pub messages: u64,
    pub first_seq: u64,
    pub last_seq: u64,
}

/// Replicas that agree on the last sequence and not on what they hold before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The last sequence the diverged replicas share.
    pub last_seq: u64,
    /// The servers holding other than the most of their peers at that sequence hold.
    pub servers: Vec<String>,
}

/// The rule for one pass: among replicas at the same last sequence, those whose message count
/// or first sequence differs from what most of them hold (ties: the larger count wins, a
/// replica missing messages being the likelier damaged one). Replicas at different last
/// sequences are lagging or catching up, not diverged. `None` when all agree.
pub fn diverged_now(replicas: &[ReplicaState]) -> Option<Divergence> {
    let mut by_last: BTreeMap<u64, Vec<&ReplicaState>> = BTreeMap::new();
    for r in replicas {
        by_last.entry(r.last_seq).or_default().push(r);
    }
    for (last_seq, group) in by_last {
        let mut held: BTreeMap<(u64, u64), usize> = BTreeMap::new();
        for r in &group {
            *held.entry((r.messages, r.first_seq)).or_default() += 1;
        }
        if held.len() < 2 {
            continue;
        }
        let Some((&common, _)) = held
            .iter()
            .max_by_key(|((messages, _), n)| (**n, *messages))
        else {
            continue;
        };
        let mut servers: Vec<String> = group
            .iter()
            .filter(|r| (r.messages, r.first_seq) != common)
            .map(|r| r.server.clone())
            .collect();
        servers.sort();
        return Some(Divergence { last_seq, servers });
    }
    None
}

/// The rule over passes: diverged when each of the last `passes` passes (oldest first) found
/// the same servers diverged; a divergence that one pass no longer shows was a pass caught
/// mid-apply, not a damaged replica. `None` with fewer passes than `passes`.
pub fn replicas_diverged(history: &[Vec<ReplicaState>], passes: usize) -> Option<Divergence> {
    if passes == 0 || history.len() < passes {
        return None;
    }
    let recent = &history[history.len() - passes..];
    let last = diverged_now(recent.last()?)?;
    recent
        .iter()
        .all(|pass| diverged_now(pass).is_some_and(|d| d.servers == last.servers))
        .then_some(last)
}

/// Each answering server's own replica of stream `stream` of account `account` (JSZ's `id`).
pub fn replica_states(
    replies: &PingReplies<Jsz>,
    account: &str,
    stream: &str,
) -> Vec<ReplicaState> {
    let mut out = Vec::new();
    for reply in &replies.replies {
        for acc in &reply.data.account_details {
            if acc.id != account && acc.name != account {
                continue;
            }
            for s in acc.streams.iter().filter(|s| s.name == stream) {
                out.push(ReplicaState {
                    server: reply.server.name.clone(),
                    messages: s.state.messages,
                    first_seq: s.state.first_seq,
                    last_seq: s.state.last_seq,
                });
            }
        }
    }
    out.sort_by(|a, b| a.server.cmp(&b.server));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn r(server: &str, messages: u64, first_seq: u64, last_seq: u64) -> ReplicaState {
        ReplicaState {
            server: server.into(),
            messages,
            first_seq,
            last_seq,
        }
    }

    #[rstest]
    #[case::all_agree(vec![r("a", 200, 1, 200), r("b", 200, 1, 200), r("c", 200, 1, 200)], None)]
    #[case::a_cut_block_at_the_same_last_sequence(
        vec![r("a", 101, 1, 200), r("b", 200, 1, 200), r("c", 200, 1, 200)],
        Some((200, vec!["a"]))
    )]
    #[case::another_first_sequence(
        vec![r("a", 200, 1, 200), r("b", 200, 1, 200), r("c", 200, 5, 200)],
        Some((200, vec!["c"]))
    )]
    #[case::lag_is_not_divergence(
        vec![r("a", 150, 1, 150), r("b", 200, 1, 200), r("c", 200, 1, 200)],
        None
    )]
    #[case::one_of_two_at_that_sequence_the_fuller_wins(
        vec![r("a", 101, 1, 200), r("b", 200, 1, 200), r("c", 120, 1, 120)],
        Some((200, vec!["a"]))
    )]
    #[case::a_lone_replica_has_no_peer_to_differ_from(vec![r("a", 101, 1, 200)], None)]
    fn one_pass_judges_replicas_at_the_same_last_sequence(
        #[case] replicas: Vec<ReplicaState>,
        #[case] want: Option<(u64, Vec<&str>)>,
    ) {
        let got = diverged_now(&replicas).map(|d| (d.last_seq, d.servers));
        let want = want.map(|(l, s)| (l, s.into_iter().map(String::from).collect::<Vec<_>>()));
        assert_eq!(got, want);
    }

    #[rstest]
    #[case::persisting_over_three_passes(vec![true, true, true], 3, true)]
    #[case::gone_in_the_last_pass(vec![true, true, false], 3, false)]
    #[case::too_few_passes_yet(vec![true, true], 3, false)]
    #[case::once_in_between_is_not_enough(vec![false, true, true, false], 2, false)]
    #[case::the_last_two_of_more(vec![false, true, true], 2, true)]
    fn divergence_must_persist_over_the_passes(
        #[case] diverged: Vec<bool>,
        #[case] passes: usize,
        #[case] want: bool,
    ) {
        let history: Vec<Vec<ReplicaState>> = diverged
            .iter()
            .map(|d| {
                let a = if *d { 101 } else { 200 };
                vec![r("a", a, 1, 200), r("b", 200, 1, 200), r("c", 200, 1, 200)]
            })
            .collect();
        assert_eq!(replicas_diverged(&history, passes).is_some(), want);
    }

    fn entry(stream: &str, servers: &[&str], passes: i32) -> DivergedReplicas {
        DivergedReplicas {
            account: "APP".into(),
            stream: stream.into(),
            last_seq: 200,
            servers: servers.iter().map(|s| s.to_string()).collect(),
            passes,
        }
    }

    fn found(stream: &str, servers: &[&str]) -> (String, String, Divergence) {
        let d = Divergence {
            last_seq: 200,
            servers: servers.iter().map(|s| s.to_string()).collect(),
        };
        ("APP".into(), stream.into(), d)
    }

    #[rstest]
    #[case::first_seen(vec![], vec![found("S", &["a"])], vec![entry("S", &["a"], 1)])]
    #[case::counted_on(vec![entry("S", &["a"], 2)], vec![found("S", &["a"])], vec![entry("S", &["a"], 3)])]
    #[case::other_servers_start_again(vec![entry("S", &["a"], 2)], vec![found("S", &["b"])], vec![entry("S", &["b"], 1)])]
    #[case::agreeing_again_is_left_out(vec![entry("S", &["a"], 5)], vec![], vec![])]
    #[case::each_stream_its_own(
        vec![entry("S", &["a"], 1), entry("T", &["c"], 4)],
        vec![found("T", &["c"]), found("S", &["a"])],
        vec![entry("T", &["c"], 5), entry("S", &["a"], 2)]
    )]
    fn divergences_are_carried_over_passes(
        #[case] previous: Vec<DivergedReplicas>,
        #[case] diverged: Vec<(String, String, Divergence)>,
        #[case] want: Vec<DivergedReplicas>,
    ) {
        let now = Found {
            diverged,
            unheard: vec![],
        };
        assert_eq!(carried(&previous, &now), want);
    }

    /// A pass some replica of which did not answer (late under load) cannot say the replicas
    /// agree: the divergence found before stays as it was, not cleared and not counted on.
    #[rstest]
    #[case::a_lasting_divergence_outlives_a_missing_answer(
        vec![entry("S", &["a"], 3)], vec![], vec![("APP", "S")], vec![entry("S", &["a"], 3)]
    )]
    #[case::only_the_unheard_stream_is_kept(
        vec![entry("S", &["a"], 3), entry("T", &["b"], 2)], vec![], vec![("APP", "T")],
        vec![entry("T", &["b"], 2)]
    )]
    #[case::an_unheard_stream_never_diverged_adds_nothing(vec![], vec![], vec![("APP", "S")], vec![])]
    #[case::heard_again_and_still_diverged_counts_on(
        vec![entry("S", &["a"], 3)], vec![found("S", &["a"])], vec![], vec![entry("S", &["a"], 4)]
    )]
    fn a_missing_answer_neither_clears_nor_counts(
        #[case] previous: Vec<DivergedReplicas>,
        #[case] diverged: Vec<(String, String, Divergence)>,
        #[case] unheard: Vec<(&str, &str)>,
        #[case] want: Vec<DivergedReplicas>,
    ) {
        let now = Found {
            diverged,
            unheard: unheard
                .into_iter()
                .map(|(a, s)| (a.to_string(), s.to_string()))
                .collect(),
        };
        assert_eq!(carried(&previous, &now), want);
    }

    #[rstest]
    #[case::none(vec![], true)]
    #[case::not_yet_lasting(vec![entry("S", &["a"], DIVERGED_AFTER - 1)], true)]
    #[case::lasting(vec![entry("S", &["a"], DIVERGED_AFTER)], false)]
    fn consistency_reads_false_once_a_divergence_lasts(
        #[case] diverged: Vec<DivergedReplicas>,
        #[case] consistent: bool,
    ) {
        let d = consistency(&diverged);
        assert_eq!(d.status, consistent, "{d:?}");
        assert_eq!(d.reason == reason::REPLICAS_AGREE, consistent);
        if !consistent {
            assert!(
                d.message
                    .contains("stream S of account APP: the replicas on a hold"),
                "{}",
                d.message
            );
        }
    }

    #[test]
    fn divergence_moving_to_another_server_restarts_the_count() {
        let history = vec![
            vec![
                r("a", 101, 1, 200),
                r("b", 200, 1, 200),
                r("c", 200, 1, 200),
            ],
            vec![
                r("a", 200, 1, 200),
                r("b", 101, 1, 200),
                r("c", 200, 1, 200),
            ],
        ];
        assert_eq!(replicas_diverged(&history, 2), None);
    }
}
