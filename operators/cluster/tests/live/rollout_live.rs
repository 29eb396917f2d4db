//! Oracle: a real three-server JetStream cluster (the sim's topology) with an R3 stream.
//!
//! The rollout's observation adapters and gate, fed from real JSZ answers over the system user:
//! the gate is open on a settled cluster; after an involuntary disruption (kill -9 of a server)
//! it closes naming the server and the stream group that is not current, and the step order
//! holds the next voluntary step; once the server is back and the groups are current it opens and
//! the step is taken.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cluster_controller::rollout::gate::{Gate, GateInput, SettledView, gate};
use cluster_controller::rollout::order::{Action, Hold, OrderInput, Step, StepKind, decide};
use cluster_controller::rollout::rollout_inputs::{
    Targets, gate_servers, members, meta_observation, not_current, reported_revision,
};
use cluster_controller::server_lifecycle::ObservedServer;
use nats_wire::jsapi::meta_view_of;
use nats_wire::monitor::JszOptions;
use nats_wire::{Collect, ConnectionConfig, ServerFilter, Wire};
use sim::topology::{Topology, TopologySpec};

struct Observed {
    gate: Gate,
    observed: Vec<ObservedServer>,
}

/// One observation pass, as the reconciler makes it: processes (the server lifecycle), JSZ and the
/// meta view over the system connection, each server's /varz digest mapped to its revision.
async fn observe(topo: &mut Topology, wire: &Wire, digests: &BTreeMap<String, String>) -> Observed {
    let names = topo.server_names();
    let mut observed = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let ready = topo.server_mut(n).expect("server").is_running();
        observed.push(ObservedServer {
            ordinal: i as u32,
            server_name: n.clone(),
            present: true,
            ready,
            revision: Some("r1".into()),
            restarts: 0,
            volume: None,
            claim: None,
        });
    }
    let targets: Targets = (0..names.len() as u32)
        .map(|o| (o, "r1".to_string()))
        .collect();
    let options = JszOptions {
        filter: ServerFilter::cluster("c1"),
        accounts: true,
        streams: true,
        consumer: true,
        raft_groups: true,
        ..Default::default()
    };
    let replies = wire
        .ping_jsz(
            &options,
            Collect::expecting(names.len(), Duration::from_secs(2)),
        )
        .await;
    let (answers, view) = match &replies {
        Ok(r) => (
            r.replies
                .iter()
                .map(|x| (x.server.name.clone(), x.data.clone()))
                .collect::<Vec<_>>(),
            Some(meta_view_of(r)),
        ),
        Err(_) => (Vec::new(), None),
    };
    let answered: BTreeSet<String> = answers.iter().map(|(n, _)| n.clone()).collect();
    let mut reported = BTreeMap::new();
    for n in &answered {
        if let Ok(v) = topo.monitor(n, "/varz").await
            && let Some(d) = v["config_digest"].as_str()
            && let Some(known) = digests.get(n)
            && let Some(r) = reported_revision(d, &[("r1".to_string(), known.clone())])
        {
            reported.insert(n.clone(), r);
        }
    }
    let settled = match &replies {
        Err(e) => SettledView::Unobserved {
            error: e.to_string(),
        },
        Ok(_) => {
            let groups = not_current(&answers, None);
            if groups.is_empty() {
                SettledView::Settled
            } else {
                SettledView::NotCurrent { groups }
            }
        }
    };
    let servers = gate_servers(&observed, &targets, &reported, &answered);
    let meta = meta_observation(true, view.as_ref());
    let g = gate(&GateInput {
        servers: &servers,
        meta: &meta,
        settled: &settled,
        rejoining: &[],
    });
    Observed { gate: g, observed }
}

/// The step order with server 0 waiting for a restart onto r2.
fn next(o: &Observed) -> Action {
    let mut targets: Targets = (0..3).map(|i| (i, "r1".to_string())).collect();
    targets.insert(0, "r2".into());
    let m = members(&o.observed, &targets);
    decide(&OrderInput {
        replicas: 3,
        servers: &m,
        meta_leader: None,
        paused: false,
        force_step: None,
        replace: &[],
        removals: &[],
        gate: &o.gate,
        auth_change: None,
        restart_all: false,
    })
    .action
}

async fn until(
    topo: &mut Topology,
    wire: &Wire,
    digests: &BTreeMap<String, String>,
    what: &str,
    ok: impl Fn(&Gate) -> bool,
) -> Observed {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let o = observe(topo, wire, digests).await;
        if ok(&o.gate) {
            return o;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: last gate {:?}",
            o.gate
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_holds_the_next_step_after_a_kill_until_the_cluster_is_settled() {
    let mut topo = Topology::start(TopologySpec::cluster(3))
        .await
        .expect("three servers");
    topo.wait_meta_leader(Duration::from_secs(60))
        .await
        .expect("a meta leader");
    let app = topo.connect().await.expect("app connects");
    let created = app
        .request(
            "$JS.API.STREAM.CREATE.ORDERS",
            r#"{"name":"ORDERS","subjects":["orders.>"],"num_replicas":3}"#.into(),
        )
        .await
        .expect("stream create answers");
    let body = String::from_utf8_lossy(&created.payload).to_string();
    assert!(!body.contains("\"error\""), "{body}");
    for i in 0..50 {
        app.publish(format!("orders.{i}"), "x".into())
            .await
            .expect("publish");
    }
    app.flush().await.expect("flush");

    let url = topo.client_urls()[0].replace("nats://", "nats://sys:sys@");
    let wire = nats_wire::dial(&ConnectionConfig::new([url]))
        .await
        .expect("the system user connects");
    let mut digests = BTreeMap::new();
    for n in topo.server_names() {
        let v = topo.monitor(&n, "/varz").await.expect("varz");
        digests.insert(
            n,
            v["config_digest"].as_str().unwrap_or_default().to_string(),
        );
    }

    let o = until(
        &mut topo,
        &wire,
        &digests,
        "the gate opens on a settled cluster",
        Gate::is_open,
    )
    .await;
    let step0 = Step {
        server: "c1-0".into(),
        ordinal: 0,
        kind: StepKind::Restart,
    };
    assert_eq!(next(&o), Action::Take(step0.clone()));

    // An involuntary disruption: the gate closes naming the server and the R3 stream's group.
    topo.server_mut("c1-2")
        .expect("c1-2")
        .kill9()
        .expect("kill -9");
    let o = until(
        &mut topo,
        &wire,
        &digests,
        "the gate names the killed server and the stream not current",
        |g| {
            g.waiting_for()
                .is_some_and(|w| w.contains("c1-2 not Ready") && w.contains("stream APP > ORDERS"))
        },
    )
    .await;
    assert_eq!(
        next(&o),
        Action::Held(Hold::Gate),
        "the next voluntary step waits"
    );

    // Back: the gate opens once every group is current again, and the step is taken.
    topo.server_mut("c1-2")
        .expect("c1-2")
        .start()
        .await
        .expect("c1-2 restarts");
    let o = until(
        &mut topo,
        &wire,
        &digests,
        "the gate opens once settled",
        Gate::is_open,
    )
    .await;
    assert_eq!(next(&o), Action::Take(step0));
    drop(topo);
}

/// A JetStream API request as the APP user; an error answer fails the test.
async fn js(app: &Wire, subject: &str, body: &str) -> serde_json::Value {
    let reply = app
        .client()
        .request(subject.to_string(), body.to_string().into())
        .await
        .unwrap_or_else(|e| panic!("{subject}: {e}"));
    let v: serde_json::Value = serde_json::from_slice(&reply.payload).expect("JSON answer");
    assert!(v.get("error").is_none(), "{subject}: {v}");
    v
}

/// Scale-down of a four-server cluster to three, driven step by step by the removal state
/// machine against the real servers: a stream wider than the new size blocks it; once gone, the
/// server is evacuated (its stream moves with its messages), removed from the meta group, and
/// its process and files deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_down_is_evacuated_removed_and_deleted_step_by_step() {
    use cluster_controller::rollout::removal::{
        Claim, RemovalInput, RemovalKind, RemovalStep, ServerObjects, next as removal_next,
    };
    use cluster_controller::rollout::rollout_inputs::{groups_on, stream_replicas};
    use nats_api::cluster::{RemovalPhase, reason};
    use nats_wire::jsapi::{MetaView, PeerRef};

    let mut topo = Topology::start(TopologySpec::cluster(4).with_tags("c1", 3, &["node:3"]))
        .await
        .expect("four servers");
    topo.wait_meta_leader(Duration::from_secs(60))
        .await
        .expect("a meta leader");
    let app = Wire::new(topo.connect().await.expect("app connects"));
    js(
        &app,
        "$JS.API.STREAM.CREATE.WIDE",
        r#"{"name":"WIDE","subjects":["wide.>"],"num_replicas":4}"#,
    )
    .await;
    // ON3 starts on c1-3 (placed by tag), then drops the placement without moving: a group the
    // evacuation has to move.
    js(
        &app,
        "$JS.API.STREAM.CREATE.ON3",
        r#"{"name":"ON3","subjects":["on3.>"],"num_replicas":1,"placement":{"tags":["node:3"]}}"#,
    )
    .await;
    js(
        &app,
        "$JS.API.STREAM.UPDATE.ON3",
        r#"{"name":"ON3","subjects":["on3.>"],"num_replicas":1}"#,
    )
    .await;
    for i in 0..20 {
        js(&app, &format!("on3.{i}"), "x").await;
    }

    let url = topo.client_urls()[0].replace("nats://", "nats://sys:sys@");
    let wire = nats_wire::dial(&ConnectionConfig::new([url]))
        .await
        .expect("the system user connects");
    let server = "c1-3";
    let store = topo
        .server(server)
        .expect("c1-3")
        .store_dir()
        .expect("a store dir")
        .to_path_buf();
    let config = topo.server(server).expect("c1-3").config_path();

    // The server being removed leads the meta group, so the removal steps it down and judges
    // the group while a new leader is elected: the race that once sent SERVER.REMOVE to a meta
    // group with no leader to answer it (a 5 s timeout whenever c1-3 happened to lead).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let leader = wire
            .meta_group(Collect::until(Duration::from_secs(2)))
            .await
            .expect("meta group")
            .map(|g| g.leader);
        if leader.as_deref() == Some(server) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "c1-3 never took the meta leadership (now {leader:?})"
        );
        if leader.is_some() {
            // Refused while a previous stepdown's election runs: asked again next poll.
            let _ = wire
                .meta_leader_stepdown(Some(&nats_wire::monitor::Placement {
                    preferred: server.into(),
                    ..Default::default()
                }))
                .await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let mut phase: Option<RemovalPhase> = None;
    let mut wide_deleted = false;
    let mut taken: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "steps so far: {taken:?}"
        );
        let options = JszOptions {
            filter: ServerFilter::cluster("c1"),
            accounts: true,
            streams: true,
            consumer: true,
            raft_groups: true,
            config: true,
            ..Default::default()
        };
        let replies = wire
            .ping_jsz(&options, Collect::expecting(4, Duration::from_secs(2)))
            .await
            .expect("JSZ");
        let answers: Vec<(String, nats_wire::monitor::Jsz)> = replies
            .replies
            .iter()
            .map(|r| (r.server.name.clone(), r.data.clone()))
            .collect();
        let (meta_leader, meta_peers) = match meta_view_of(&replies) {
            MetaView::FromLeader(g) => (
                Some(g.leader.clone()),
                Some(g.peers.iter().map(|p| p.name.clone()).collect::<Vec<_>>()),
            ),
            MetaView::FromFollowers { .. } => (None, None),
        };
        let running = topo.server_mut(server).expect("c1-3").is_running();
        let objects = ServerObjects {
            statefulset: running,
            pvc: store
                .exists()
                .then(|| (store.display().to_string(), Claim::Own)),
            configmap: config
                .exists()
                .then(|| (config.display().to_string(), true)),
        };
        let streams = stream_replicas(&answers);
        let on_server = groups_on(&answers, server);
        let others = not_current(&answers, Some(server));
        let step = removal_next(&RemovalInput {
            server,
            kind: RemovalKind::ScaleDown,
            phase,
            jetstream: true,
            system_credentials: true,
            new_size: 3,
            streams: &streams,
            groups_on_server: &on_server,
            not_current_apart_from_server: &others,
            meta_leader: meta_leader.as_deref(),
            meta_peers: meta_peers.as_deref(),
            objects: &objects,
            server_ready: running,
        });
        let label = match &step {
            RemovalStep::Blocked { reason, .. } => format!("Blocked({reason})"),
            RemovalStep::WaitEvacuation { .. } => "WaitEvacuation".to_string(),
            RemovalStep::Delete { .. } => "Delete".to_string(),
            other => format!("{other:?}"),
        };
        if taken.last() != Some(&label) {
            taken.push(label);
        }
        match &step {
            RemovalStep::Blocked { reason: r, message } => {
                assert_eq!(*r, reason::SCALE_DOWN_BLOCKED);
                assert!(message.contains("APP > WIDE (R4)"), "{message}");
                // The user removes the wide stream once; the shrink goes on by itself when
                // every server has stopped reporting it.
                if !wide_deleted {
                    js(&app, "$JS.API.STREAM.DELETE.WIDE", "").await;
                    wide_deleted = true;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            RemovalStep::Evacuate => wire
                .server_evacuate(&PeerRef::name(server))
                .await
                .expect("evacuate"),
            RemovalStep::WaitEvacuation { .. } => {
                tokio::time::sleep(Duration::from_millis(250)).await
            }
            RemovalStep::StepDownMetaLeader => wire
                .meta_leader_stepdown(None)
                .await
                .expect("meta leader steps down"),
            RemovalStep::RemovePeer => wire
                .server_remove(&PeerRef::name(server))
                .await
                .expect("server remove"),
            RemovalStep::Delete {
                statefulset,
                pvc,
                configmap,
            } => {
                let s = topo.server_mut(server).expect("c1-3");
                if *statefulset && s.is_running() {
                    s.kill9().expect("kill");
                }
                if *pvc && store.exists() {
                    std::fs::remove_dir_all(&store).expect("remove store");
                }
                if *configmap && config.exists() {
                    std::fs::remove_file(&config).expect("remove config");
                }
            }
            RemovalStep::Done => break,
            other => panic!("unexpected step {other:?} after {taken:?}"),
        }
        if let Some(p) = step.phase_after(RemovalKind::ScaleDown) {
            phase = Some(p);
        }
    }
    // The wait for the evacuation lasts as many polls as the move takes, and the wait for the
    // new meta leader as many as its election.
    let mut taken: Vec<String> = taken
        .into_iter()
        .filter(|s| s != "WaitEvacuation")
        .collect();
    taken.dedup();
    assert_eq!(
        taken,
        vec![
            format!("Blocked({})", reason::SCALE_DOWN_BLOCKED),
            "Evacuate".to_string(),
            "StepDownMetaLeader".to_string(),
            "RemovePeer".to_string(),
            "Delete".to_string(),
            "Done".to_string(),
        ],
        "the steps in order"
    );
    // The stream moved with its messages, and the meta group no longer lists the server.
    let info = js(&app, "$JS.API.STREAM.INFO.ON3", "").await;
    assert_eq!(info["state"]["messages"].as_u64(), Some(20), "{info}");
    assert_ne!(info["cluster"]["leader"].as_str(), Some(server), "{info}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let g = wire
            .meta_group(Collect::until(Duration::from_secs(2)))
            .await
            .expect("meta group");
        if let Some(g) = g
            && !g.peer_names().iter().any(|p| p == server)
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "c1-3 still a meta peer"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    drop(topo);
}

/// The deletion guard over the controller's own system JSZ: an R3 stream holds deletion with
/// JetStreamDataRemains naming its group, force-delete overrides, deletion proceeds once the
/// stream is gone, and a NATS cluster that cannot be observed holds with ObservationFailed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deletion_guard_names_real_stream_groups_and_unobservable_clusters() {
    use cluster_controller::deletion_guard::{DataObservation, DeletionDecision, deletion_guard};
    use cluster_controller::nats::ask_remaining_data::observe as observe_data;
    use nats_api::cluster::reason;

    let mut topo = Topology::start(TopologySpec::cluster(3))
        .await
        .expect("three servers");
    topo.wait_meta_leader(Duration::from_secs(60))
        .await
        .expect("a meta leader");
    let app = Wire::new(topo.connect().await.expect("app connects"));
    js(
        &app,
        "$JS.API.STREAM.CREATE.ORDERS",
        r#"{"name":"ORDERS","subjects":["orders.>"],"num_replicas":3}"#,
    )
    .await;
    let url = topo.client_urls()[0].replace("nats://", "nats://sys:sys@");
    let wire =
        nats_wire::dial(&ConnectionConfig::new([url]).with_request_timeout(Duration::from_secs(2)))
            .await
            .expect("the system user connects");
    let window = Duration::from_secs(2);

    let observed = observe_data(&wire, "c1", 3, window).await;
    let DataObservation::StreamGroups(groups) = &observed else {
        panic!("expected stream groups, got {observed:?}")
    };
    assert_eq!(groups.len(), 1, "one group, named once: {groups:?}");
    assert!(groups[0].starts_with("APP > ORDERS (S-R3F-"), "{groups:?}");
    match deletion_guard(false, &observed) {
        DeletionDecision::Hold { reason: r, message } => {
            assert_eq!(r, reason::JETSTREAM_DATA_REMAINS);
            assert!(message.contains(&groups[0]), "{message}");
        }
        other => panic!("held expected, got {other:?}"),
    }
    assert_eq!(deletion_guard(true, &observed), DeletionDecision::Proceed);

    js(&app, "$JS.API.STREAM.DELETE.ORDERS", "").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let observed = observe_data(&wire, "c1", 3, window).await;
        if deletion_guard(false, &observed) == DeletionDecision::Proceed {
            assert_eq!(observed, DataObservation::StreamGroups(vec![]));
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{observed:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    for n in topo.server_names() {
        topo.server_mut(&n)
            .expect("server")
            .kill9()
            .expect("kill -9");
    }
    let observed = observe_data(&wire, "c1", 3, window).await;
    match deletion_guard(false, &observed) {
        DeletionDecision::Hold { reason: r, .. } => assert_eq!(r, reason::OBSERVATION_FAILED),
        other => panic!("held expected, got {other:?} from {observed:?}"),
    }
    assert_eq!(deletion_guard(true, &observed), DeletionDecision::Proceed);
    drop(topo);
}
