//! The deletion guard (design §4.6): deleting a NatsCluster with JetStream that still holds
//! stream groups waits with Deleting=True, reason JetStreamDataRemains naming them, found through
//! the controller's own system JSZ ([`crate::nats::ask_remaining_data`]); a NATS cluster that cannot
//! be observed waits too, with ObservationFailed — unless its servers' workloads and volume
//! claims are gone (a namespace being deleted takes the pods first, then everything else): the
//! data went with them, so the deletion proceeds ([`DataObservation::ServersGone`]). The
//! `force-delete` annotation overrides every hold.
//! NatsClusterEvacuation is how the data leaves first.

use nats_api::cluster::reason;
use nats_wire::Reply;
use nats_wire::monitor::Jsz;

/// What was observed of the NATS cluster's JetStream data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataObservation {
    /// No JetStream on the NATS cluster: nothing to keep.
    NoJetStream,
    /// The stream groups placed in this NATS cluster (none: deletion may proceed).
    StreamGroups(Vec<String>),
    /// The NATS cluster could not be observed.
    Failed(String),
    /// The servers' workloads (StatefulSets) and their labelled volume claims are gone: no data
    /// is left to keep, whatever the NATS cluster would have said.
    ServersGone,
}

/// Whether deletion may proceed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeletionDecision {
    /// Delete: remove the finalizer.
    Proceed,
    /// Wait with Deleting=True, `reason`, `message`.
    Hold {
        reason: &'static str,
        message: String,
    },
}

/// The guard. `force_delete` is whether the `force-delete` annotation is present (its value is
/// not read, and it is never cleared).
pub fn deletion_guard(force_delete: bool, observed: &DataObservation) -> DeletionDecision {
    if force_delete {
        return DeletionDecision::Proceed;
    }
    match observed {
        DataObservation::NoJetStream | DataObservation::ServersGone => DeletionDecision::Proceed,
        DataObservation::StreamGroups(groups) if groups.is_empty() => DeletionDecision::Proceed,
        DataObservation::StreamGroups(groups) => DeletionDecision::Hold {
            reason: reason::JETSTREAM_DATA_REMAINS,
            message: format!(
                "stream groups remain: {}; move them off (NatsClusterEvacuation) or set the cluster.nats.mikluko.io/force-delete annotation",
                groups.join(", ")
            ),
        },
        DataObservation::Failed(error) => DeletionDecision::Hold {
            reason: reason::OBSERVATION_FAILED,
            message: format!(
                "the NATS cluster cannot be observed ({error}); set the cluster.nats.mikluko.io/force-delete annotation to delete anyway"
            ),
        },
    }
}

/// How long a held guard waits before it looks again: while stream groups remain, at most
/// [`DATA_RECHECK`] whatever the backoff has grown to, since in a teardown the resources deleted
/// with the NatsCluster remove their streams within seconds and the guard should see it then
/// (issue 43); an unobservable NATS cluster keeps the backoff.
pub fn recheck_after(reason: &str, backoff: std::time::Duration) -> std::time::Duration {
    if reason == reason::JETSTREAM_DATA_REMAINS {
        backoff.min(DATA_RECHECK)
    } else {
        backoff
    }
}

/// The longest a guard held by data waits between looks.
pub const DATA_RECHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// The stream groups in JSZ answers (with account and stream details), each named once as
/// `account > stream (raft group)`, sorted. Every member of a group reports it; only groups
/// placed in `cluster` count.
pub fn stream_groups(replies: &[Reply<Jsz>], cluster: &str) -> Vec<String> {
    let mut out: Vec<String> = replies
        .iter()
        .flat_map(|r| r.data.account_details.iter())
        .flat_map(|a| {
            a.streams.iter().filter_map(move |s| {
                let placed = s.cluster.as_ref().map(|c| c.name.as_str());
                (placed.is_none_or(|c| c.is_empty() || c == cluster)).then(|| {
                    let account = if a.name.is_empty() { &a.id } else { &a.name };
                    if s.raft_group.is_empty() {
                        format!("{account} > {}", s.name)
                    } else {
                        format!("{account} > {} ({})", s.name, s.raft_group)
                    }
                })
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_wire::ServerInfo;
    use nats_wire::monitor::{AccountDetail, ClusterInfo, StreamDetail};
    use rstest::rstest;

    fn groups(names: &[&str]) -> DataObservation {
        DataObservation::StreamGroups(names.iter().map(|s| s.to_string()).collect())
    }

    #[rstest]
    #[case::data_is_looked_at_again_within_seconds(reason::JETSTREAM_DATA_REMAINS, 30, 5)]
    #[case::a_short_backoff_stays_short(reason::JETSTREAM_DATA_REMAINS, 2, 2)]
    #[case::an_unobservable_cluster_keeps_its_backoff(reason::OBSERVATION_FAILED, 30, 30)]
    fn how_soon_a_held_guard_looks_again(
        #[case] reason: &str,
        #[case] backoff: u64,
        #[case] want: u64,
    ) {
        use std::time::Duration;
        assert_eq!(
            recheck_after(reason, Duration::from_secs(backoff)),
            Duration::from_secs(want)
        );
    }

    #[rstest]
    #[case::no_jetstream(false, DataObservation::NoJetStream, None)]
    #[case::empty(false, groups(&[]), None)]
    #[case::data_remains(false, groups(&["APP > ORDERS (S-R3F-x)"]), Some(reason::JETSTREAM_DATA_REMAINS))]
    #[case::unobserved(false, DataObservation::Failed("timeout".into()), Some(reason::OBSERVATION_FAILED))]
    #[case::force_over_data(true, groups(&["APP > ORDERS (S-R3F-x)"]), None)]
    #[case::force_over_unobserved(true, DataObservation::Failed("timeout".into()), None)]
    #[case::servers_and_claims_gone_the_data_with_them(false, DataObservation::ServersGone, None)]
    fn the_deletion_guard(
        #[case] force: bool,
        #[case] observed: DataObservation,
        #[case] want: Option<&str>,
    ) {
        match (deletion_guard(force, &observed), want) {
            (DeletionDecision::Proceed, None) => {}
            (DeletionDecision::Hold { reason, .. }, Some(w)) => assert_eq!(reason, w),
            (got, want) => panic!("{got:?}, wanted {want:?}"),
        }
    }

    #[test]
    fn the_hold_names_the_groups() {
        let DeletionDecision::Hold { message, .. } =
            deletion_guard(false, &groups(&["APP > A (S-1)", "APP > B (S-2)"]))
        else {
            panic!("held")
        };
        assert!(
            message.starts_with("stream groups remain: APP > A (S-1), APP > B (S-2);"),
            "{message}"
        );
    }

    fn stream(name: &str, cluster: &str, group: &str) -> StreamDetail {
        StreamDetail {
            name: name.into(),
            cluster: Some(ClusterInfo {
                name: cluster.into(),
                raft_group: group.into(),
                ..Default::default()
            }),
            raft_group: group.into(),
            ..Default::default()
        }
    }

    fn reply(server: &str, streams: Vec<StreamDetail>) -> Reply<Jsz> {
        Reply {
            server: ServerInfo {
                name: server.into(),
                ..Default::default()
            },
            data: Jsz {
                account_details: vec![AccountDetail {
                    name: "APP".into(),
                    streams,
                    ..Default::default()
                }],
                ..Default::default()
            },
        }
    }

    #[test]
    fn stream_groups_are_named_once_and_only_this_clusters() {
        let replies = vec![
            reply(
                "demo-0",
                vec![
                    stream("ORDERS", "demo", "S-R3F-a"),
                    stream("EU", "west", "S-R3F-b"),
                ],
            ),
            reply("demo-1", vec![stream("ORDERS", "demo", "S-R3F-a")]),
        ];
        assert_eq!(
            stream_groups(&replies, "demo"),
            vec!["APP > ORDERS (S-R3F-a)".to_string()]
        );
    }
}
