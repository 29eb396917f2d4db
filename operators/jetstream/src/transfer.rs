//! status.transfer: a placement move of a stream between clusters of a supercluster, read from
//! the server's STREAM.INFO. nats-server moves a stream itself when an update changes
//! placement.cluster: it adds peers in the new cluster to the group, lets them catch up, hands
//! leadership over and drops the old peers. Until then the group's cluster (the leader's) is the
//! old one, or it lists more peers than the stream's replicas.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nats_api::jetstream::{StreamTransfer, TransferConsumers};
use serde_json::Value;

use crate::server_state;

/// The transfer record after this pass: `to` is the placement cluster spec asks for, `info` the
/// STREAM.INFO answer, `previous` the record in status. None when no move runs (or the one that
/// ran has finished: leader and peers in `to`, no extra peers, every replica current).
pub fn observe(
    to: Option<&str>,
    info: &Value,
    previous: Option<&StreamTransfer>,
    now: &Time,
) -> Option<StreamTransfer> {
    let to = to?;
    let cluster = info.pointer("/cluster/name").and_then(Value::as_str)?;
    let state = server_state::of_stream(info);
    let peers = state.replicas.len() + usize::from(state.leader.is_some());
    let wanted = info
        .pointer("/config/num_replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1);
    let extra_peers = peers as u64 > wanted;
    let moving = if previous.is_some() {
        // Once seen, a move lasts until the new peers have caught up too.
        cluster != to || extra_peers || state.replicas.iter().any(|r| !r.current)
    } else {
        cluster != to || extra_peers
    };
    if !moving {
        return None;
    }
    Some(StreamTransfer {
        from: previous
            .and_then(|p| p.from.clone())
            .or_else(|| (cluster != to).then(|| cluster.to_string())),
        to: Some(to.to_string()),
        started: previous
            .and_then(|p| p.started.clone())
            .or_else(|| Some(now.clone())),
        replicas: state.replicas,
        consumers: previous.and_then(|p| p.consumers.clone()),
    })
}

/// The stream's consumers that have moved to `to`, from their CONSUMER.INFO answers: a
/// consumer's group follows its stream's, and has moved once its leader is in `to` with no extra
/// peers and every replica current. A consumer's replicas 0 means the stream's (`stream_replicas`).
pub fn consumers_moved(to: &str, consumers: &[Value], stream_replicas: u64) -> TransferConsumers {
    let moved = consumers
        .iter()
        .filter(|c| {
            let state = server_state::of_consumer(c);
            let wanted = match c.pointer("/config/num_replicas").and_then(Value::as_u64) {
                Some(0) | None => stream_replicas,
                Some(r) => r,
            }
            .max(1);
            let peers = state.replicas.len() + usize::from(state.leader.is_some());
            c.pointer("/cluster/name").and_then(Value::as_str) == Some(to)
                && peers as u64 <= wanted
                && state.replicas.iter().all(|r| r.current)
        })
        .count();
    TransferConsumers {
        moved: u32::try_from(moved).unwrap_or(u32::MAX),
        total: u32::try_from(consumers.len()).unwrap_or(u32::MAX),
    }
}

/// Ready and Synced while `t` runs (§6 story 08): the stream keeps serving, so Ready stays True
/// with reason Moving naming the move and the server `leader` it serves from; Synced says the
/// placement was applied and nats-server is transferring.
pub fn conditions(
    t: &StreamTransfer,
    leader: Option<&str>,
) -> (
    controller_kit::conditions::Decided,
    controller_kit::conditions::Decided,
) {
    use controller_kit::conditions::Decided;
    use nats_api::jetstream::{condition, reason};
    let from = t.from.as_deref().unwrap_or("its cluster");
    let to = t.to.as_deref().unwrap_or("the new cluster");
    let serving = leader.map_or(String::new(), |l| format!("; stream serving from {l}"));
    (
        Decided::new(
            condition::READY,
            true,
            reason::MOVING,
            format!("placement move {from} -> {to} running{serving}"),
        ),
        Decided::new(
            condition::SYNCED,
            true,
            reason::MATCHES_SPEC,
            format!("placement.cluster {to} applied; nats-server is transferring the stream"),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::jetstream::ReplicaState;
    use rstest::rstest;
    use serde_json::json;

    #[test]
    fn a_running_move_reads_ready_moving_and_synced() {
        let t = StreamTransfer {
            from: Some("east".into()),
            to: Some("west".into()),
            ..Default::default()
        };
        let (ready, synced) = conditions(&t, Some("east-0"));
        assert_eq!(
            (
                ready.type_,
                ready.status,
                ready.reason,
                ready.message.as_str()
            ),
            (
                "Ready",
                true,
                "Moving",
                "placement move east -> west running; stream serving from east-0"
            )
        );
        assert_eq!(
            (
                synced.type_,
                synced.status,
                synced.reason,
                synced.message.as_str()
            ),
            (
                "Synced",
                true,
                "MatchesSpec",
                "placement.cluster west applied; nats-server is transferring the stream"
            )
        );
        let (leaderless, _) = conditions(&t, None);
        assert_eq!(leaderless.message, "placement move east -> west running");
    }

    fn at(s: &str) -> Time {
        serde_json::from_value(json!(s)).expect("time")
    }

    fn info(cluster: &str, leader: &str, replicas: &[(&str, bool)], r: u64) -> Value {
        let replicas: Vec<Value> = replicas
            .iter()
            .map(|(n, c)| json!({"name": n, "current": c, "lag": if *c { 0 } else { 9 }}))
            .collect();
        json!({
            "config": {"num_replicas": r},
            "cluster": {"name": cluster, "leader": leader, "replicas": replicas}
        })
    }

    fn record(from: Option<&str>, started: &str) -> StreamTransfer {
        StreamTransfer {
            from: from.map(str::to_string),
            to: Some("c2".into()),
            started: Some(at(started)),
            ..StreamTransfer::default()
        }
    }

    const EARLIER: &str = "2026-11-29T10:00:00Z";
    const NOW: &str = "2026-11-29T10:00:05Z";

    #[rstest]
    #[case::settled_in_its_cluster(
        Some("c1"), info("c1", "a1", &[("a2", true), ("a3", true)], 3), None, None)]
    #[case::no_placement_cluster_no_transfer(
        None, info("c1", "a1", &[("a2", true), ("a3", true)], 3), None, None)]
    #[case::a_lagging_replica_without_a_move_is_no_transfer(
        Some("c1"), info("c1", "a1", &[("a2", true), ("a3", false)], 3), None, None)]
    #[case::placement_changed_the_leader_still_in_the_old_cluster(
        Some("c2"), info("c1", "a1", &[("a2", true), ("a3", true)], 3), None,
        Some((Some("c1"), NOW, 2)))]
    #[case::new_peers_catching_up(
        Some("c2"),
        info("c1", "a1", &[("a2", true), ("a3", true), ("b1", false), ("b2", false), ("b3", false)], 3),
        Some(record(Some("c1"), EARLIER)),
        Some((Some("c1"), EARLIER, 5)))]
    #[case::leader_handed_over_old_peers_not_yet_dropped(
        Some("c2"),
        info("c2", "b1", &[("b2", true), ("b3", true), ("a1", true), ("a2", true), ("a3", true)], 3),
        Some(record(Some("c1"), EARLIER)),
        Some((Some("c1"), EARLIER, 5)))]
    #[case::first_seen_after_the_handover_the_origin_is_unknown(
        Some("c2"),
        info("c2", "b1", &[("b2", true), ("b3", true), ("a1", true)], 3),
        None,
        Some((None, NOW, 3)))]
    #[case::in_the_new_cluster_a_peer_still_catching_up(
        Some("c2"), info("c2", "b1", &[("b2", true), ("b3", false)], 3),
        Some(record(Some("c1"), EARLIER)),
        Some((Some("c1"), EARLIER, 2)))]
    #[case::done_every_peer_in_the_new_cluster_and_current(
        Some("c2"), info("c2", "b1", &[("b2", true), ("b3", true)], 3),
        Some(record(Some("c1"), EARLIER)), None)]
    fn the_transfer_follows_the_server(
        #[case] to: Option<&str>,
        #[case] info: Value,
        #[case] previous: Option<StreamTransfer>,
        #[case] want: Option<(Option<&str>, &str, usize)>,
    ) {
        let got = observe(to, &info, previous.as_ref(), &at(NOW));
        let got = got.map(|t| {
            assert_eq!(t.to.as_deref(), to);
            (t.from, t.started, t.replicas.len())
        });
        let want = want.map(|(from, started, n)| (from.map(str::to_string), Some(at(started)), n));
        assert_eq!(got, want);
    }

    #[test]
    fn the_record_carries_each_replicas_lag() {
        let t = observe(
            Some("c2"),
            &info("c1", "a1", &[("b1", false)], 1),
            None,
            &at(NOW),
        )
        .expect("moving");
        assert_eq!(
            t.replicas,
            vec![ReplicaState {
                name: "b1".into(),
                current: false,
                lag: Some(9)
            }]
        );
    }

    fn consumer(cluster: &str, leader: &str, replicas: &[(&str, bool)], r: u64) -> Value {
        info(cluster, leader, replicas, r)
    }

    #[test]
    fn consumers_count_as_moved_once_their_group_is_settled_in_the_target() {
        let consumers = [
            // Settled in c2, replicas inherited from the stream (0).
            consumer("c2", "b1", &[("b2", true), ("b3", true)], 0),
            // Leader in c2, old peers not yet dropped.
            consumer("c2", "b1", &[("b2", true), ("b3", true), ("a1", true)], 3),
            // Still in c1.
            consumer("c1", "a1", &[("a2", true), ("a3", true)], 3),
            // In c2, a replica catching up.
            consumer("c2", "b1", &[("b2", true), ("b3", false)], 3),
            // An R1 consumer of the R3 stream, moved.
            consumer("c2", "b2", &[], 1),
        ];
        assert_eq!(
            consumers_moved("c2", &consumers, 3),
            TransferConsumers { moved: 2, total: 5 }
        );
        assert_eq!(
            consumers_moved("c2", &[], 3),
            TransferConsumers { moved: 0, total: 0 }
        );
    }

    #[test]
    fn a_single_server_without_cluster_info_has_no_transfer() {
        assert_eq!(
            observe(
                Some("c2"),
                &json!({"config": {"num_replicas": 1}}),
                None,
                &at(NOW)
            ),
            None
        );
    }
}
