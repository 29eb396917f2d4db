//! API tier + live NATS, story 08: a NatsStream placed in c1 of a 2-cluster supercluster (R3 each,
//! JetStream, gateways) moves to c2 when spec.placement.cluster changes, under traffic. The
//! controller reports status.transfer while nats-server moves the stream and clears it once the
//! leader and every peer are in c2; the sim's ledger shows no acknowledged message lost and none
//! stored twice.
//!
//! Needs `scripts/install-apiserver.sh` to have run; without the binaries the test fails saying so.

use crate::common;

use std::time::{Duration, Instant};

use async_nats::jetstream;
use controller_kit::metrics::Metrics;
use jetstream_controller::jsapi;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nats_api::jetstream::NatsStream;
use serde_json::{Value, json};
use sim::ledger::Ledger;
use sim::testkit::apiserver_with_crds;
use sim::traffic::{self, ConsumerKind, ConsumerSpec, PublisherSpec};
use sim::{GatewayMode, Topology, TopologySpec};

const WAIT: Duration = Duration::from_secs(60);
const MOVE_WAIT: Duration = Duration::from_secs(180);
const NS: &str = "nats";
const STREAM: &str = "MOVING";

fn in_cluster(server: &str, cluster: &str) -> bool {
    server.starts_with(&format!("{cluster}-"))
}

/// Whether the stream's leader and its other peers (status.server) are all in `cluster`.
fn placed_in(status: &Value, cluster: &str, replicas: usize) -> bool {
    let server = &status["server"];
    let leader_in = server["leader"]
        .as_str()
        .is_some_and(|l| in_cluster(l, cluster));
    let peers: Vec<&str> = server["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .collect();
    leader_in && peers.len() == replicas - 1 && peers.iter().all(|p| in_cluster(p, cluster))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_08_placement_move_reports_transfer_and_loses_no_acknowledged_message() {
    let api = apiserver_with_crds(&[NS]).await;
    let topo = Topology::start(TopologySpec::supercluster(2, 3, GatewayMode::Explicit))
        .await
        .expect("a 2×3 supercluster boots");
    topo.wait_meta_leader(WAIT)
        .await
        .expect("the supercluster elects a meta leader");
    topo.wait_gateways_connected(WAIT)
        .await
        .expect("gateways connect");
    let _controllers =
        common::spawn_controller(api.client(), Duration::from_secs(10), Metrics::default());

    common::create_demo_connection(api.client(), NS, topo.client_urls()).await;

    let streams: Api<NatsStream> = Api::namespaced(api.client(), NS);
    let stream: NatsStream = serde_json::from_value(json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1",
        "kind": "NatsStream",
        "metadata": {"name": "moving", "namespace": NS},
        "spec": {
            "name": STREAM,
            "connectionRef": {"name": "demo"},
            "subjects": ["moving.>"],
            "replicas": 3,
            "placement": {"cluster": "c1"},
        },
    }))
    .expect("a NatsStream");
    streams
        .create(&PostParams::default(), &stream)
        .await
        .expect("NatsStream created");
    let streams = &streams;
    sim::wait::poll("NatsStream Ready in c1", WAIT, || async move {
        let s = streams.get("moving").await.map_err(|e| e.to_string())?;
        let v = serde_json::to_value(&s).map_err(|e| e.to_string())?;
        let ready = v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        if ready && placed_in(&v["status"], "c1", 3) {
            Ok(Some(()))
        } else {
            Err(format!("status: {}", v["status"]))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // Traffic: a publisher with Nats-Msg-Id retrying on ack timeout, and a pull consumer.
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect(topo.server_addrs())
        .await
        .expect("a traffic client");
    let js = jetstream::new(client.clone());
    let ledger = Ledger::new();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let consumers = vec!["reader".to_string()];
    let reader = traffic::spawn_consumer(
        js.clone(),
        ConsumerSpec {
            name: "reader".into(),
            stream: STREAM.into(),
            kind: ConsumerKind::Pull,
        },
        ledger.clone(),
        stop_rx.clone(),
    )
    .await
    .expect("the consumer is created");
    let watch = traffic::spawn_leader_watch(js.clone(), STREAM.into(), ledger.clone(), stop_rx);
    let publisher = traffic::spawn_publisher(
        js.clone(),
        PublisherSpec {
            subject: "moving.orders".into(),
            rate: 150,
            duration: Duration::from_secs(40),
            ack_timeout: Duration::from_secs(2),
            give_up_after: Duration::from_secs(90),
            payload_bytes: 128,
        },
        ledger.clone(),
    );
    let ledger_ref = &ledger;
    sim::wait::poll(
        "300 messages acknowledged before the move",
        WAIT,
        || async move {
            let n = ledger_ref.acknowledged_ids().len();
            if n >= 300 {
                Ok(Some(()))
            } else {
                Err(format!("{n} acknowledged"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // The placement move.
    ledger.step("placement.cluster c1 -> c2");
    let moved_at = Instant::now();
    streams
        .patch(
            "moving",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"placement": {"cluster": "c2"}}})),
        )
        .await
        .expect("placement patched");

    // Every transfer record seen, in order.
    let seen: std::sync::Mutex<Vec<Value>> = std::sync::Mutex::new(Vec::new());
    let seen_ref = &seen;
    // Ready's status and reason beside each transfer record seen.
    let moving_ready: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    let moving_ready = &moving_ready;
    sim::wait::poll(
        "status.transfer filled, then cleared with the stream in c2",
        MOVE_WAIT,
        || async move {
            let s = streams.get("moving").await.map_err(|e| e.to_string())?;
            let v = serde_json::to_value(&s).map_err(|e| e.to_string())?;
            let status = &v["status"];
            let transfer = &status["transfer"];
            let mut records = seen_ref.lock().map_err(|e| e.to_string())?;
            if transfer.is_object() {
                if records.last() != Some(transfer) {
                    records.push(transfer.clone());
                }
                // Written with the record in the same status: the stream serves, Ready says so.
                let ready = status["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["type"] == "Ready");
                if let Some(r) = ready {
                    moving_ready.lock().map_err(|e| e.to_string())?.push((
                        r["status"].as_str().unwrap_or_default().to_string(),
                        r["reason"].as_str().unwrap_or_default().to_string(),
                    ));
                }
                return Err(format!("moving: {transfer}"));
            }
            if !records.is_empty() && placed_in(status, "c2", 3) {
                Ok(Some(()))
            } else {
                Err(format!(
                    "transfer records seen: {}; status: {status}",
                    records.len()
                ))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let move_time = moved_at.elapsed();
    let records = seen.lock().expect("not poisoned").clone();
    let readies = moving_ready.lock().expect("not poisoned").clone();
    assert!(
        !readies.is_empty() && readies.iter().all(|(s, r)| s == "True" && r == "Moving"),
        "while status.transfer shows the move, Ready reads True, Moving: {readies:?}"
    );
    let (first, last) = (&records[0], &records[records.len() - 1]);
    for t in &records {
        assert_eq!(t["to"], "c2", "{t}");
        assert_eq!(t["from"], "c1", "{t}");
        assert_eq!(t["started"], first["started"], "{t}");
        // CONSUMER.LIST may miss the consumer while its group is moving (seen once under load),
        // or fail, which keeps the previous record's count (none before the first): a record
        // counts it, nothing, or has no count yet, never another one.
        assert!(
            t["consumers"]["total"] == 1
                || t["consumers"]["total"] == 0
                || t["consumers"].is_null(),
            "the reader consumer moves too: {t}"
        );
    }
    assert!(
        records.iter().any(|t| t["consumers"]["total"] == 1),
        "the reader consumer is counted in the transfer: {records:?}"
    );
    let peak_peers = records
        .iter()
        .filter_map(|t| t["replicas"].as_array().map(Vec::len))
        .max()
        .unwrap_or(0);

    // The server agrees: the group's cluster is c2.
    let info = jsapi::stream_info(&client, STREAM)
        .await
        .expect("STREAM.INFO")
        .expect("the stream exists");
    assert_eq!(info["cluster"]["name"], "c2", "{}", info["cluster"]);

    // Stop traffic: the publisher finishes its run, the consumer drains, then everything stops.
    tokio::time::timeout(Duration::from_secs(150), publisher)
        .await
        .expect("the publisher finishes")
        .expect("the publisher task");
    traffic::wait_drained(&ledger, &consumers, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    stop_tx.send(true).expect("traffic tasks listen");
    let _ = tokio::time::timeout(Duration::from_secs(10), reader).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), watch).await;

    let f = ledger.figures(&consumers);
    println!(
        "placement move c1 -> c2: {:.1} s until status.transfer cleared; {} distinct transfer \
         records, up to {peak_peers} non-leader peers; first {first}; last {last}",
        move_time.as_secs_f64(),
        records.len()
    );
    println!(
        "published {}, acknowledged {}, lost {}, duplicated {}, unacknowledged {}, ack timeouts {}, \
         publish errors {}, max ack gap {} ms, leadership changes {}, delivered twice {}",
        f.published,
        f.acknowledged,
        f.lost,
        f.duplicated,
        f.unacknowledged,
        f.ack_timeouts,
        f.publish_errors,
        f.max_ack_gap_ms,
        f.leadership_changes,
        f.delivered_twice
    );
    assert!(f.acknowledged > 0, "{f:?}");
    assert_eq!(f.lost, 0, "acknowledged messages lost: {f:?}");
    assert_eq!(f.duplicated, 0, "messages stored twice: {f:?}");
}
