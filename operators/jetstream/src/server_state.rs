//! status.server and status.ownership from what the server reports: the group's leader, its
//! replicas with lag, messages and bytes (`$JS.API.STREAM.INFO` / `$JS.API.CONSUMER.INFO`), and
//! the ownership marker with how the object came to be owned.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nats_api::jetstream::{Ownership, OwnershipOrigin, ReplicaState, ServerState};
use serde_json::Value;

use crate::lifecycle_policies::Action;
use crate::ownership::OWNER_METADATA_KEY;

fn replicas(info: &Value) -> Vec<ReplicaState> {
    info.pointer("/cluster/replicas")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some(ReplicaState {
                name: r.get("name")?.as_str()?.to_string(),
                current: r.get("current").and_then(Value::as_bool).unwrap_or(false),
                lag: r.get("lag").and_then(Value::as_u64),
            })
        })
        .collect()
}

fn common(info: &Value) -> ServerState {
    ServerState {
        created: info
            .get("created")
            .and_then(|c| serde_json::from_value::<Time>(c.clone()).ok()),
        leader: info
            .pointer("/cluster/leader")
            .and_then(Value::as_str)
            .filter(|l| !l.is_empty())
            .map(str::to_string),
        replicas: replicas(info),
        messages: None,
        bytes: None,
    }
}

/// How soon to look again while a placement move runs: status.transfer follows it closely.
pub const IN_FLIGHT_RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// How soon to look at a group again once it is unsettled: no leader, or a replica behind
/// (a server restarting, a peer catching up). status.server written in such a moment would
/// otherwise show it until the resync, minutes later.
pub const UNSETTLED_RECHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether the group of a STREAM.INFO or CONSUMER.INFO answer is unsettled: it has a cluster
/// block (it is clustered) and no leader or a replica not current.
pub fn unsettled(info: &Value) -> bool {
    if info.get("cluster").is_none_or(Value::is_null) {
        return false;
    }
    let s = common(info);
    s.leader.is_none() || s.replicas.iter().any(|r| !r.current)
}

/// How soon the pass after this one looks: closely while a placement move runs
/// ([`IN_FLIGHT_RECHECK`]), within [`UNSETTLED_RECHECK`] while the group is
/// unsettled, else at the resync (each no later than the resync).
pub fn recheck_after(
    moving: bool,
    info: &Value,
    resync: std::time::Duration,
) -> std::time::Duration {
    if moving {
        IN_FLIGHT_RECHECK
    } else if unsettled(info) {
        UNSETTLED_RECHECK.min(resync)
    } else {
        resync
    }
}

/// status.server of a stream, key-value bucket or object store from its STREAM.INFO answer.
pub fn of_stream(info: &Value) -> ServerState {
    ServerState {
        messages: info.pointer("/state/messages").and_then(Value::as_u64),
        bytes: info.pointer("/state/bytes").and_then(Value::as_u64),
        ..common(info)
    }
}

/// status.server of a consumer from its CONSUMER.INFO answer: messages are those pending delivery.
pub fn of_consumer(info: &Value) -> ServerState {
    ServerState {
        messages: info.get("num_pending").and_then(Value::as_u64),
        ..common(info)
    }
}

/// status.ownership after a pass: the marker's UID as found on the server, and the origin — set
/// by the action that took ownership, kept from the previous status otherwise.
pub fn ownership(
    config: &Value,
    action: Action,
    previous: Option<&Ownership>,
) -> Option<Ownership> {
    let uid = config
        .pointer("/metadata")
        .and_then(|m| m.get(OWNER_METADATA_KEY))
        .and_then(Value::as_str)
        .map(str::to_string);
    let origin = match action {
        Action::Create => Some(OwnershipOrigin::Created),
        Action::AdoptIntoSpec | Action::LateInitialize => Some(OwnershipOrigin::Adopted),
        Action::Update | Action::Terminal(_) => previous.and_then(|p| p.origin),
    };
    (uid.is_some() || origin.is_some()).then_some(Ownership { origin, uid })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle_policies::TerminalReason;
    use rstest::rstest;
    use serde_json::json;

    const RESYNC: std::time::Duration = std::time::Duration::from_secs(300);

    #[rstest]
    #[case::settled(json!({"cluster": {"leader": "n1", "replicas": [{"name": "n2", "current": true}]}}), false, 300)]
    #[case::a_replica_behind(json!({"cluster": {"leader": "n1", "replicas": [{"name": "n2", "current": false, "lag": 1}]}}), false, 30)]
    #[case::no_leader(json!({"cluster": {"replicas": [{"name": "n2", "current": true}]}}), false, 30)]
    #[case::an_empty_leader(json!({"cluster": {"leader": "", "replicas": []}}), false, 30)]
    #[case::r1_in_a_cluster(json!({"cluster": {"leader": "n1"}}), false, 300)]
    #[case::not_clustered(json!({"config": {}}), false, 300)]
    #[case::moving_beats_all(json!({"cluster": {"leader": "n1"}}), true, 2)]
    fn how_soon_a_group_is_looked_at_again(
        #[case] info: Value,
        #[case] moving: bool,
        #[case] secs: u64,
    ) {
        assert_eq!(
            recheck_after(moving, &info, RESYNC),
            std::time::Duration::from_secs(secs)
        );
    }

    #[test]
    fn an_unsettled_group_is_looked_at_no_later_than_the_resync() {
        let behind =
            json!({"cluster": {"leader": "n1", "replicas": [{"name": "n2", "current": false}]}});
        let short = std::time::Duration::from_secs(5);
        assert_eq!(recheck_after(false, &behind, short), short);
    }

    #[test]
    fn a_replicated_streams_leader_replicas_and_state() {
        let info = json!({
            "created": "2026-11-29T10:00:00.123456789Z",
            "state": {"messages": 42, "bytes": 4096},
            "cluster": {"name": "c1", "leader": "n1", "replicas": [
                {"name": "n2", "current": true, "active": 1000, "lag": 0},
                {"name": "n3", "current": false, "active": 1000, "lag": 7}
            ]}
        });
        let s = of_stream(&info);
        assert_eq!(s.leader.as_deref(), Some("n1"));
        assert_eq!((s.messages, s.bytes), (Some(42), Some(4096)));
        assert_eq!(
            s.replicas,
            vec![
                ReplicaState {
                    name: "n2".into(),
                    current: true,
                    lag: Some(0)
                },
                ReplicaState {
                    name: "n3".into(),
                    current: false,
                    lag: Some(7)
                },
            ]
        );
        assert!(s.created.is_some());
    }

    #[test]
    fn a_single_server_stream_has_no_replicas_and_maybe_no_leader() {
        let s =
            of_stream(&json!({"state": {"messages": 0, "bytes": 0}, "cluster": {"leader": ""}}));
        assert_eq!(s.leader, None);
        assert!(s.replicas.is_empty());
    }

    #[test]
    fn a_consumers_messages_are_those_pending() {
        let s = of_consumer(&json!({"num_pending": 5, "cluster": {"leader": "n2"}}));
        assert_eq!(
            (s.messages, s.bytes, s.leader.as_deref()),
            (Some(5), None, Some("n2"))
        );
    }

    fn owned(uid: &str) -> Value {
        json!({"metadata": {OWNER_METADATA_KEY: uid}})
    }

    #[rstest]
    #[case::created(Action::Create, None, Some(OwnershipOrigin::Created))]
    #[case::adopted(Action::AdoptIntoSpec, None, Some(OwnershipOrigin::Adopted))]
    #[case::adopted_or_created_over_an_existing_object(
        Action::LateInitialize,
        None,
        Some(OwnershipOrigin::Adopted)
    )]
    #[case::update_keeps_the_origin(
        Action::Update,
        Some(OwnershipOrigin::Adopted),
        Some(OwnershipOrigin::Adopted)
    )]
    #[case::terminal_keeps_the_origin(
        Action::Terminal(TerminalReason::OwnedByOther),
        Some(OwnershipOrigin::Created),
        Some(OwnershipOrigin::Created)
    )]
    fn the_origin_is_set_by_the_action_that_took_ownership(
        #[case] action: Action,
        #[case] before: Option<OwnershipOrigin>,
        #[case] want: Option<OwnershipOrigin>,
    ) {
        let previous = before.map(|o| Ownership {
            origin: Some(o),
            uid: Some("u".into()),
        });
        let got = ownership(&owned("u"), action, previous.as_ref()).expect("owned");
        assert_eq!((got.origin, got.uid.as_deref()), (want, Some("u")));
    }

    #[test]
    fn an_unowned_object_reports_no_ownership() {
        assert_eq!(
            ownership(
                &json!({}),
                Action::Terminal(TerminalReason::ExistsUnowned),
                None
            ),
            None
        );
    }
}
