//! Live: replica divergence as the system account sees it (`jetstream_controller::divergence`).
//! Three real servers, an R3 stream of 200 messages; a follower's message block is cut in half
//! while its server is down, and the server restarted. Every server's own answer to
//! `$SYS.REQ.SERVER.PING.JSZ` then shows the cut replica at the same last sequence holding fewer
//! messages, pass after pass, and the rule names it; before the cut it names nobody.

use std::sync::Mutex;
use std::time::Duration;

use async_nats::jetstream;
use jetstream_controller::divergence::{ReplicaState, replica_states, replicas_diverged};
use nats_wire::monitor::JszOptions;
use nats_wire::{Collect, Wire};
use sim::testkit::publish_acked;
use sim::topology::{SYS_USER, Topology, TopologySpec};

const WAIT: Duration = Duration::from_secs(60);
const PASSES: usize = 3;

/// One pass: every server's own replica of APP's stream S.
async fn pass(wire: &Wire) -> Result<Vec<ReplicaState>, String> {
    let options = JszOptions {
        accounts: true,
        streams: true,
        ..Default::default()
    };
    let replies = wire
        .ping_jsz(&options, Collect::expecting(3, Duration::from_secs(2)))
        .await
        .map_err(|e| e.to_string())?;
    let states = replica_states(&replies, "APP", "S");
    if states.len() < 3 {
        return Err(format!(
            "{} of 3 replicas answered: {states:?}",
            states.len()
        ));
    }
    Ok(states)
}

/// A follower of stream S (not `leader`): stopped, its first message block cut in half, started
/// again. Its name.
async fn cut_a_follower(topo: &mut Topology, leader: &str) -> &'static str {
    let cut = ["c1-0", "c1-1", "c1-2"]
        .into_iter()
        .find(|s| *s != leader)
        .expect("a follower");
    topo.server_mut(cut)
        .expect("server")
        .sigterm(WAIT)
        .await
        .expect("stop");
    let block = topo
        .server(cut)
        .expect("server")
        .store_dir()
        .expect("a store")
        .join("jetstream/APP/streams/S/msgs/1.blk");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&block)
        .expect("the block");
    let len = file.metadata().expect("its length").len();
    file.set_len(len / 2).expect("cut the block in half");
    topo.server_mut(cut)
        .expect("server")
        .start()
        .await
        .expect("restart");
    cut
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_while_down_is_seen_diverged_from_the_system_account() {
    let mut topo = Topology::start(TopologySpec::cluster(3).with_sync_interval("c1", "always"))
        .await
        .expect("topology");
    let js = jetstream::new(topo.connect().await.expect("connect"));
    js.create_stream(jetstream::stream::Config {
        name: "S".into(),
        subjects: vec!["s.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .expect("stream");
    for i in 0..200 {
        publish_acked(&js, "s.x", format!("{i}").into(), WAIT).await;
    }
    let leader = topo.wait_stream_current("S", WAIT).await.expect("current");
    let sys =
        async_nats::ConnectOptions::with_user_and_password(SYS_USER.0.into(), SYS_USER.1.into())
            .connect(topo.server_addrs())
            .await
            .expect("a system client");
    let wire = Wire::new(sys);

    let mut healthy = Vec::new();
    for _ in 0..PASSES {
        healthy.push(pass(&wire).await.expect("a pass"));
    }
    assert_eq!(replicas_diverged(&healthy, PASSES), None, "{healthy:?}");

    let cut = cut_a_follower(&mut topo, &leader).await;

    let history = Mutex::new(Vec::new());
    let seen = sim::wait::poll_every(
        &format!("{cut} seen diverged over {PASSES} passes"),
        WAIT,
        Duration::from_millis(500),
        || async {
            let states = pass(&wire).await?;
            let mut h = history.lock().map_err(|e| e.to_string())?;
            h.push(states);
            Ok(replicas_diverged(&h, PASSES))
        },
    )
    .await
    .expect("divergence seen");
    eprintln!(
        "diverged: {seen:?}; last pass {:?}",
        history.lock().map(|h| h.last().cloned())
    );
    assert_eq!(seen.servers, vec![cut.to_string()]);
    assert_eq!(seen.last_seq, 200);
}

/// The same cut as the NatsSystemBalancer of the NATS cluster sees it, through the apiserver:
/// ReplicasConsistent True while the replicas agree, then False ReplicasDiverged naming the cut
/// server once three passes in a row found it, `status.diverged` listing it, a ReplicasDiverged
/// Warning Event and `nats_operator_streams_diverged` at 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_balancer_reads_a_cut_replica_as_diverged_and_counts_it() {
    use controller_kit::metrics::Metrics;
    use jetstream_controller::controller::Settings;
    use k8s_openapi::api::events::v1::Event;
    use kube::api::{Api, PostParams};
    use nats_api::jetstream::{NatsSystemBalancer, metric};
    use sim::testkit::apiserver_with_crds;

    const NS: &str = "nats";
    let api = apiserver_with_crds(&[NS]).await;
    let mut topo = Topology::start(TopologySpec::cluster(3).with_sync_interval("c1", "always"))
        .await
        .expect("topology");
    let metrics = Metrics::default();
    let (_, _controllers) =
        crate::common::spawn_controller_with(api.client(), Settings::default(), metrics.clone());
    crate::live_placement::create_system_connection(api.client(), topo.client_urls()).await;
    let balancers: Api<NatsSystemBalancer> = Api::namespaced(api.client(), NS);
    let balancer: NatsSystemBalancer = serde_json::from_value(serde_json::json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsSystemBalancer",
        "metadata": {"name": "system", "namespace": NS},
        "spec": {"connectionRef": {"name": "system"}, "interval": "5s", "moves": {"leader": false}},
    }))
    .expect("a NatsSystemBalancer");
    balancers
        .create(&PostParams::default(), &balancer)
        .await
        .expect("created");

    let js = jetstream::new(topo.connect().await.expect("connect"));
    js.create_stream(jetstream::stream::Config {
        name: "S".into(),
        subjects: vec!["s.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .expect("stream");
    for i in 0..200 {
        publish_acked(&js, "s.x", format!("{i}").into(), WAIT).await;
    }
    let leader = topo.wait_stream_current("S", WAIT).await.expect("current");
    let consistent = |want: &'static str| {
        let balancers = balancers.clone();
        move || {
            let balancers = balancers.clone();
            async move {
                let o = balancers.get("system").await.map_err(|e| e.to_string())?;
                let status = o.status.clone().unwrap_or_default();
                let c = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "ReplicasConsistent")
                    .cloned();
                match c {
                    Some(c) if c.reason == want => Ok(Some((c, status.diverged))),
                    other => Err(format!("ReplicasConsistent: {other:?}")),
                }
            }
        }
    };
    sim::wait::poll(
        "ReplicasConsistent ReplicasAgree",
        WAIT,
        consistent("ReplicasAgree"),
    )
    .await
    .expect("agree before the cut");

    let cut = cut_a_follower(&mut topo, &leader).await;

    let (condition, diverged) = sim::wait::poll(
        "ReplicasConsistent ReplicasDiverged",
        Duration::from_secs(90),
        consistent("ReplicasDiverged"),
    )
    .await
    .expect("diverged after the cut");
    eprintln!("{}: {diverged:?}", condition.message);
    assert_eq!(condition.status, "False");
    assert!(condition.message.contains(cut), "{}", condition.message);
    assert_eq!(diverged.len(), 1, "{diverged:?}");
    assert_eq!(diverged[0].servers, vec![cut.to_string()]);
    assert_eq!(diverged[0].stream, "S");
    let gauge = sim::testkit::replicas::sample(
        &metrics.render(),
        metric::STREAMS_DIVERGED,
        &format!("namespace=\"{NS}\",name=\"system\""),
    );
    assert_eq!(gauge, Some(1.0));
    let events: Api<Event> = Api::namespaced(api.client(), NS);
    let told = sim::wait::poll("a ReplicasDiverged Event", WAIT, || async {
        let list = events
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("ReplicasDiverged")))
    })
    .await
    .expect("the Event");
    assert_eq!(told.type_.as_deref(), Some("Warning"));
    assert!(
        told.note.as_deref().is_some_and(|n| n.contains(cut)),
        "{told:?}"
    );
}
