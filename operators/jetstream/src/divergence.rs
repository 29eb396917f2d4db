//! Replica divergence as the system account can see it: each server answering
//! `$SYS.REQ.SERVER.PING.JSZ` (accounts and streams asked for) reports the state of its own
//! replica of every stream it holds — message count, first and last sequence — not the
//! leader's. Replicas that have applied the same log agree on all three; a replica whose block
//! file was cut while its server was down comes back at the same last sequence holding fewer
//! messages, and nats-server's leader still lists it current (docs/durability.md, the run that
//! showed it).
//!
//! The rule here judges a stream's replica states over the last passes. It is not wired to a
//! NatsStream condition or a metric yet: a NatsStream reconciles over its account's connection,
//! which cannot send the system account's ping (docs/durability.md says what remains).

use std::collections::BTreeMap;

use nats_wire::PingReplies;
use nats_wire::monitor::Jsz;

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
