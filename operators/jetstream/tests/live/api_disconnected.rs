//! API tier + live NATS: a NatsConnection's Ready follows its servers. Every server of its NATS
//! cluster paused (SIGSTOP: TCP stays open, nothing answers) turns it Ready=False Disconnected
//! within 30 s, naming what the client reported and since when; the NatsStream on it says it
//! waits on the connection; SIGCONT turns it Connected again within 30 s.

use crate::common;

use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use nats_api::jetstream::NatsStream;
use nats_api::nats::NatsConnection;
use serde_json::json;
use sim::testkit::{WAIT, apiserver_with_crds, is, message, wait_for, wait_for_within};

const NS: &str = "nats";
/// What the design promises: Ready follows the servers within 30 s either way.
const FOLLOWS: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_goes_disconnected_while_every_server_is_paused_and_back_after() {
    let api = apiserver_with_crds(&[NS]).await;
    let mut topo = common::cluster().await;
    topo.wait_meta_leader(WAIT)
        .await
        .expect("the cluster elects a meta leader");
    let _controllers =
        common::spawn_controller(api.client(), Duration::from_secs(2), Default::default());
    common::create_demo_connection(api.client(), NS, topo.client_urls()).await;
    let conns: Api<NatsConnection> = Api::namespaced(api.client(), NS);
    let streams: Api<NatsStream> = Api::namespaced(api.client(), NS);
    wait_for(&conns, "demo", "NatsConnection Ready", |o| {
        is(o, "Ready", "True", "Connected")
    })
    .await;
    let stream: NatsStream = serde_json::from_value(json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1",
        "kind": "NatsStream",
        "metadata": {"name": "orders", "namespace": NS},
        "spec": {"connectionRef": {"name": "demo"},
                 "subjects": ["orders.>"], "replicas": 3},
    }))
    .expect("a NatsStream");
    streams
        .create(&PostParams::default(), &stream)
        .await
        .expect("NatsStream created");
    wait_for(&streams, "orders", "orders Ready", |o| {
        is(o, "Ready", "True", "MatchesSpec")
    })
    .await;

    let names = topo.server_names();
    for name in &names {
        topo.server_mut(name)
            .expect("a server")
            .pause()
            .expect("SIGSTOP");
    }
    let paused = Instant::now();
    let lost = wait_for_within(
        &conns,
        "demo",
        "NatsConnection Disconnected",
        FOLLOWS,
        |o| is(o, "Ready", "False", "Disconnected"),
    )
    .await;
    let noticed = paused.elapsed();
    let said = message(&lost, "Ready");
    eprintln!("Disconnected {noticed:?} after SIGSTOP: {said}");
    assert!(
        said.contains("answers since ") && said.contains(&topo.client_urls()[0]),
        "names the servers and since when: {said}"
    );
    // The stream on it says it waits on the connection.
    let waiting = wait_for(&streams, "orders", "orders waits on its connection", |o| {
        is(o, "Ready", "False", "Disconnected")
    })
    .await;
    assert!(
        message(&waiting, "Ready").contains("NatsConnection nats/demo"),
        "{}",
        message(&waiting, "Ready")
    );

    for name in &names {
        topo.server_mut(name)
            .expect("a server")
            .resume()
            .expect("SIGCONT");
    }
    let resumed = Instant::now();
    wait_for_within(&conns, "demo", "NatsConnection Connected", FOLLOWS, |o| {
        is(o, "Ready", "True", "Connected")
    })
    .await;
    eprintln!("Connected {:?} after SIGCONT", resumed.elapsed());
    wait_for(&streams, "orders", "orders Ready again", |o| {
        is(o, "Ready", "True", "MatchesSpec")
    })
    .await;
}
