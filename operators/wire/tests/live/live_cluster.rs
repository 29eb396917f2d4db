//! Live tests against a real 3-server JetStream cluster (sim, config accounts SYS and APP):
//! every monitoring ping collects all three answers, per-server forms answer, reload succeeds for
//! a reloadable change and is refused for a restart-only one, kick disconnects a client, leader
//! stepdowns move leaders, evacuation moves a stream off a server, and SERVER.REMOVE removes a
//! peer from the meta group.

use crate::common;

use std::time::Duration;

use async_nats::jetstream;
use common::{WAIT, app_wire, eventually, roster, sys_wire};
use nats_wire::jsapi::{MetaView, PeerRef};
use nats_wire::monitor::{ConnzOptions, GatewayzOptions, HealthzOptions, JszOptions, LeafzOptions};
use nats_wire::{Collect, ServerFilter, WireError};
use sim::testkit::publish_acked;
use sim::topology::{Topology, TopologySpec};

const N: usize = 3;

async fn cluster() -> Topology {
    Topology::start(TopologySpec::cluster(N))
        .await
        .expect("a 3-server cluster boots")
}

fn all_three() -> Collect {
    Collect::expecting(N, Duration::from_secs(5))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_collect_every_servers_answer_and_per_server_forms_answer() {
    let topo = cluster().await;
    let wire = sys_wire(&topo).await;
    let ids = roster(&wire, N).await;
    let mut names: Vec<String> = ids.keys().cloned().collect();
    names.sort();
    assert_eq!(names, topo.server_names());

    // Without an expected count the ping collects until the deadline and still sees everyone.
    let statsz = wire
        .ping_statsz(&ServerFilter::all(), Collect::until(Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!(statsz.server_names(), names);
    // `active_servers` counts the servers each one has heard from over the system account
    // (their STATSZ events), which can trail the routes a moment on a busy machine (seen in CI:
    // a server answering with 2): every server comes to report all three.
    eventually("every server reports 3 active servers", WAIT, || async {
        let statsz = wire
            .ping_statsz(&ServerFilter::all(), all_three())
            .await
            .map_err(|e| e.to_string())?;
        let active: Vec<i64> = statsz
            .replies
            .iter()
            .map(|r| r.data.active_servers)
            .collect();
        if active.len() == N && active.iter().all(|a| *a == N as i64) {
            Ok(Some(()))
        } else {
            Err(format!("active_servers per answer: {active:?}"))
        }
    })
    .await;

    let varz = wire
        .ping_varz(&ServerFilter::all(), all_three())
        .await
        .unwrap();
    assert_eq!(varz.server_names(), names);
    for r in &varz.replies {
        assert!(
            r.data.config_digest.len() > 10,
            "{:?}",
            r.data.config_digest
        );
        assert!(r.data.config_load_time.is_some());
        assert_eq!(r.data.server_name, r.server.name);
        assert_eq!(r.data.cluster.name, "c1");
    }

    let jsz = wire
        .ping_jsz(
            &JszOptions {
                filter: ServerFilter::cluster("c1"),
                ..Default::default()
            },
            all_three(),
        )
        .await
        .unwrap();
    assert_eq!(jsz.server_names(), names);
    let leaders: Vec<String> = jsz
        .replies
        .iter()
        .filter_map(|r| r.data.meta_cluster.as_ref().map(|m| m.leader.clone()))
        .collect();
    assert_eq!(leaders.len(), N);
    assert!(leaders.iter().all(|l| l == &leaders[0] && !l.is_empty()));

    // A cluster filter naming another NATS cluster leaves nobody to answer.
    let err = wire
        .ping_jsz(
            &JszOptions {
                filter: ServerFilter::cluster("elsewhere"),
                ..Default::default()
            },
            Collect::until(Duration::from_millis(500)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, WireError::Timeout { .. }), "{err}");

    let connz = wire
        .ping_connz(&ConnzOptions::default(), all_three())
        .await
        .unwrap();
    assert_eq!(connz.server_names(), names);
    let sys_conns: usize = connz
        .replies
        .iter()
        .map(|r| {
            r.data
                .connections
                .iter()
                .filter(|c| c.name == "wire-test-sys")
                .count()
        })
        .sum();
    assert_eq!(sys_conns, 1, "our own connection shows up once");

    let leafz = wire
        .ping_leafz(&LeafzOptions::default(), all_three())
        .await
        .unwrap();
    assert_eq!(leafz.server_names(), names);
    assert!(leafz.replies.iter().all(|r| r.data.num_leafs == 0));

    let gwz = wire
        .ping_gatewayz(&GatewayzOptions::default(), all_three())
        .await
        .unwrap();
    assert_eq!(gwz.server_names(), names);

    let health = wire
        .ping_healthz(&HealthzOptions::default(), all_three())
        .await
        .unwrap();
    assert_eq!(health.server_names(), names);
    assert!(
        health.replies.iter().all(|r| r.data.is_ok()),
        "{:?}",
        health.replies
    );

    // The per-server forms, addressed by id, answer from exactly that server.
    for (name, id) in &ids {
        assert_eq!(&wire.statsz(id).await.unwrap().server.name, name);
        let v = wire.varz(id).await.unwrap();
        assert_eq!(&v.data.server_name, name);
        let j = wire.jsz(id, &JszOptions::default()).await.unwrap();
        assert_eq!(&j.data.server_id, id);
        let c = wire.connz(id, &ConnzOptions::default()).await.unwrap();
        assert_eq!(&c.data.server_id, id);
        let l = wire.leafz(id, &LeafzOptions::default()).await.unwrap();
        assert_eq!(&l.data.server_id, id);
        let g = wire
            .gatewayz(id, &GatewayzOptions::default())
            .await
            .unwrap();
        assert_eq!(&g.data.server_id, id);
        let h = wire.healthz(id, &HealthzOptions::default()).await.unwrap();
        assert!(h.data.is_ok());
    }

    // An id no server has: nobody subscribes, and the error names the server asked for.
    let err = wire.varz("NOSUCHSERVER").await.unwrap_err();
    assert!(matches!(err, WireError::NoResponders { .. }), "{err}");
    assert_eq!(err.server(), Some("NOSUCHSERVER"));

    // The APP account cannot reach the system pings.
    let app = app_wire(&topo).await;
    let err = app
        .ping_statsz(
            &ServerFilter::all(),
            Collect::until(Duration::from_millis(500)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            WireError::NoResponders { .. } | WireError::Timeout { .. }
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_applies_a_reloadable_change_and_refuses_a_restart_only_one() {
    let mut topo = cluster().await;
    let wire = sys_wire(&topo).await;
    let ids = roster(&wire, N).await;
    let name = "c1-0";
    let id = ids[name].clone();
    let before = wire.varz(&id).await.unwrap().data;

    // server_tags reload.
    {
        let server = topo.server_mut(name).unwrap();
        server.config.tags = vec!["az:reloaded".to_string()];
        server.write_config().unwrap();
    }
    let answered = wire.reload(&id).await.expect("a reloadable change reloads");
    assert_eq!(answered.id, id);
    let after = wire.varz(&id).await.unwrap().data;
    assert!(
        after.tags.contains(&"az:reloaded".to_string()),
        "{:?}",
        after.tags
    );
    assert_ne!(after.config_digest, before.config_digest);
    assert!(after.config_load_time > before.config_load_time);

    // The JetStream store directory is restart-only: the whole reload is refused.
    {
        let server = topo.server_mut(name).unwrap();
        let js = server.config.jetstream.as_mut().unwrap();
        js.store_dir = js.store_dir.with_file_name("elsewhere");
        server.write_config().unwrap();
    }
    let err = wire.reload(&id).await.unwrap_err();
    match &err {
        WireError::Refused {
            request,
            server,
            description,
            ..
        } => {
            assert_eq!(request, &format!("$SYS.REQ.SERVER.{id}.RELOAD"));
            assert!(server.contains(name), "{server}");
            assert!(
                description.to_lowercase().contains("not supported")
                    || description.to_lowercase().contains("jetstream"),
                "{description}"
            );
        }
        other => panic!("expected a refusal, got {other}"),
    }
    let unchanged = wire.varz(&id).await.unwrap().data;
    assert_eq!(unchanged.config_digest, after.config_digest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kick_disconnects_the_client_connz_found() {
    let topo = cluster().await;
    let wire = sys_wire(&topo).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let victim = async_nats::ConnectOptions::new()
        .name("kick-me")
        .event_callback(move |e| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(e);
            }
        })
        .connect(topo.server_addrs())
        .await
        .unwrap();
    victim.flush().await.unwrap();

    // The design's lookup: a CONNZ ping filtered by account and user.
    let connz = wire
        .ping_connz(&ConnzOptions::user_of_account("APP", "app"), all_three())
        .await
        .unwrap();
    let (server_id, cid) = connz
        .replies
        .iter()
        .find_map(|r| {
            r.data
                .connections
                .iter()
                .find(|c| c.name == "kick-me")
                .map(|c| (r.server.id.clone(), c.cid))
        })
        .expect("CONNZ finds the client");
    // The account filter leaves out the system user's own connection.
    assert!(
        connz
            .replies
            .iter()
            .flat_map(|r| &r.data.connections)
            .all(|c| c.account == "APP" && c.authorized_user == "app")
    );

    wire.kick(&server_id, cid).await.expect("kick");
    tokio::time::timeout(WAIT, async {
        while let Some(e) = rx.recv().await {
            if matches!(e, async_nats::Event::Disconnected) {
                return;
            }
        }
    })
    .await
    .expect("the kicked client sees its connection closed");

    let err = wire.kick(&server_id, 987_654).await.unwrap_err();
    assert!(matches!(err, WireError::Refused { .. }), "{err}");
    drop(victim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_stepdowns_move_stream_consumer_and_meta_leaders() {
    let topo = cluster().await;
    let sys = sys_wire(&topo).await;
    let app = app_wire(&topo).await;
    let js = jetstream::new(app.client().clone());
    let stream = js
        .create_stream(jetstream::stream::Config {
            name: "ORDERS".into(),
            subjects: vec!["orders.>".into()],
            num_replicas: 3,
            ..Default::default()
        })
        .await
        .unwrap();
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some("worker".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let _ = consumer;

    // JSZ with account, stream, consumer and config details, reported by stream leaders only:
    // exactly one server reports ORDERS, with its three members and its consumer.
    let details = eventually("ORDERS in JSZ details", WAIT, || async {
        let jsz = sys
            .ping_jsz(
                &JszOptions {
                    accounts: true,
                    streams: true,
                    consumer: true,
                    config: true,
                    stream_leader_only: true,
                    ..Default::default()
                },
                all_three(),
            )
            .await
            .map_err(|e| e.to_string())?;
        let found: Vec<_> = jsz
            .replies
            .iter()
            .flat_map(|r| r.data.account_details.iter())
            .filter(|a| a.name == "APP")
            .flat_map(|a| a.streams.iter())
            .filter(|s| s.name == "ORDERS")
            .cloned()
            .collect();
        Ok((found.len() == 1
            && found[0]
                .cluster
                .as_ref()
                .is_some_and(|c| c.members().len() == 3))
        .then_some(found))
    })
    .await;
    let orders = &details[0];
    assert_eq!(
        orders.config.as_ref().map(|c| c.num_replicas),
        Some(3),
        "{orders:?}"
    );
    assert_eq!(orders.consumers.len(), 1);
    assert_eq!(orders.consumers[0].name, "worker");
    let mut members = orders.cluster.as_ref().unwrap().members();
    members.sort();
    assert_eq!(members, topo.server_names());

    let stream_leader = || async {
        let info = js
            .get_stream("ORDERS")
            .await
            .map_err(|e| e.to_string())?
            .info()
            .await
            .map_err(|e| e.to_string())?
            .clone();
        Ok(info.cluster.and_then(|c| c.leader))
    };
    let first = eventually("stream leader", WAIT, stream_leader).await;
    app.stream_leader_stepdown("ORDERS", None)
        .await
        .expect("stream stepdown");
    eventually("a new stream leader", WAIT, || async {
        Ok(stream_leader().await?.filter(|l| *l != first))
    })
    .await;

    let consumer_leader = || async {
        let mut c: jetstream::consumer::PullConsumer = js
            .get_consumer_from_stream("worker", "ORDERS")
            .await
            .map_err(|e| e.to_string())?;
        let info = c.info().await.map_err(|e| e.to_string())?.clone();
        Ok(info.cluster.and_then(|c| c.leader))
    };
    let first = eventually("consumer leader", WAIT, consumer_leader).await;
    app.consumer_leader_stepdown("ORDERS", "worker", None)
        .await
        .expect("consumer stepdown");
    eventually("a new consumer leader", WAIT, || async {
        Ok(consumer_leader().await?.filter(|l| *l != first))
    })
    .await;

    // A stream the account does not have: a JetStream error naming the request.
    let err = app.stream_leader_stepdown("NOPE", None).await.unwrap_err();
    match &err {
        WireError::JetStream { request, code, .. } => {
            assert_eq!(request, "$JS.API.STREAM.LEADER.STEPDOWN.NOPE");
            assert_eq!(*code, 404);
        }
        other => panic!("{other}"),
    }

    let group = sys
        .meta_group(Collect::until(Duration::from_secs(2)))
        .await
        .unwrap()
        .expect("the meta leader answers");
    assert_eq!(group.peer_names(), topo.server_names());
    sys.meta_leader_stepdown(None).await.expect("meta stepdown");
    eventually("a new meta leader", WAIT, || async {
        let g = sys
            .meta_group(Collect::until(Duration::from_secs(1)))
            .await
            .map_err(|e| e.to_string())?;
        Ok(g.filter(|g| g.leader != group.leader).map(|g| g.leader))
    })
    .await;

    // The meta group is the system account's: APP is not answered.
    let err = app.meta_leader_stepdown(None).await.unwrap_err();
    assert!(
        matches!(err, WireError::JetStream { .. } | WireError::Timeout { .. }),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evacuate_moves_a_stream_off_the_server_and_remove_drops_the_peer() {
    let mut topo = cluster().await;
    let sys = sys_wire(&topo).await;
    let app = app_wire(&topo).await;
    let js = jetstream::new(app.client().clone());
    js.create_stream(jetstream::stream::Config {
        name: "ONE".into(),
        subjects: vec!["one.>".into()],
        num_replicas: 1,
        ..Default::default()
    })
    .await
    .unwrap();
    publish_acked(&js, "one.x", "hello".into(), WAIT).await;
    let host = topo.wait_stream_leader("ONE", WAIT).await.unwrap();

    sys.server_evacuate(&PeerRef::name(&host))
        .await
        .expect("evacuate");
    let moved_to = eventually("ONE off the evacuated server", WAIT, || async {
        Ok(topo.stream_leader("ONE").await?.filter(|l| *l != host))
    })
    .await;
    assert_ne!(moved_to, host);

    // Remove a peer that is gone: the meta group shrinks to the other two.
    let meta = sys
        .meta_group(Collect::until(Duration::from_secs(2)))
        .await
        .unwrap()
        .expect("meta leader");
    // Not the server the system connection is on: the request would wait out a reconnect.
    let connected = sys.client().server_info().server_name;
    let victim = topo
        .server_names()
        .into_iter()
        .find(|n| *n != meta.leader && *n != connected)
        .unwrap();
    topo.server_mut(&victim).unwrap().kill9().unwrap();
    // Only the meta leader answers, from its API queue; on a loaded machine an answer can miss
    // the request's 5 s (stop 26's CI). Only a timeout is sent again. A request after an
    // unanswered one that took effect is refused as "not a member", which is the outcome; the
    // wait below proves the group shrank either way.
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut unanswered = 0;
    loop {
        match sys.server_remove(&PeerRef::name(&victim)).await {
            Ok(()) => break,
            Err(WireError::Timeout { .. }) if tokio::time::Instant::now() < deadline => {
                unanswered += 1;
            }
            Err(WireError::JetStream { .. }) if unanswered > 0 => break,
            Err(e) => panic!("SERVER.REMOVE: {e}"),
        }
    }
    eventually("the meta group without the removed peer", WAIT, || async {
        let g = sys
            .meta_group(Collect::until(Duration::from_secs(1)))
            .await
            .map_err(|e| e.to_string())?;
        Ok(g.filter(|g| !g.peer_names().contains(&victim)))
    })
    .await;

    // The meta view from the leader lists the two remaining peers.
    match sys
        .meta_view(
            &ServerFilter::all(),
            Collect::expecting(2, Duration::from_secs(5)),
        )
        .await
        .unwrap()
    {
        MetaView::FromLeader(g) => assert!(!g.peer_names().contains(&victim), "{g:?}"),
        other => panic!("{other:?}"),
    }

    // A peer that is not a member: a JetStream error naming that server.
    let err = sys
        .server_remove(&PeerRef::name("no-such-server"))
        .await
        .unwrap_err();
    assert!(matches!(err, WireError::JetStream { .. }), "{err}");
    assert_eq!(err.server(), Some("no-such-server"));
    // With one of the two remaining peers gone the group has no leader: the survivor answers.
    let survivor = meta.leader.clone();
    let second = topo
        .server_names()
        .into_iter()
        .find(|n| *n != victim && *n != survivor)
        .unwrap();
    topo.server_mut(&second).unwrap().kill9().unwrap();
    let view = eventually("the meta group judged from followers", WAIT, || async {
        let v = sys
            .meta_view(&ServerFilter::all(), Collect::until(Duration::from_secs(1)))
            .await
            .map_err(|e| e.to_string())?;
        Ok(matches!(v, MetaView::FromFollowers { .. }).then_some(v))
    })
    .await;
    assert_eq!(
        view,
        MetaView::FromFollowers {
            answered: vec![survivor]
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_over_a_dropped_connection_ends_at_its_deadline() {
    let mut topo = cluster().await;
    let wire = sys_wire(&topo).await;
    roster(&wire, N).await;
    for name in topo.server_names() {
        topo.server_mut(&name).unwrap().kill9().unwrap();
    }
    // Without the deadline bounding the send, flush waits for a reconnect that never comes;
    // the outer guard only turns such a hang into a failure instead of a stuck test.
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        wire.ping_statsz(&ServerFilter::all(), Collect::until(Duration::from_secs(1))),
    )
    .await
    .expect("the ping returns instead of waiting for a reconnect");
    match answer {
        Err(WireError::Timeout { .. }) | Err(WireError::Send { .. }) => {}
        other => panic!("a ping with every server gone answered {other:?}"),
    }
}
