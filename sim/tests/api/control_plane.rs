//! The sim's host: a real kube-apiserver with the controllers in-process. A manifest applied
//! through it reaches real NATS servers through the JetStream controller; annotations are set
//! and removed; a restarted controller picks up where the last one stopped.

use std::collections::BTreeMap;
use std::time::Duration;

use sim::control_plane::{Host, ObjectRef};
use sim::{Topology, TopologySpec};

const NS: &str = "apps";
const WAIT: Duration = Duration::from_secs(60);

const MANIFEST: &str = r#"
apiVersion: nats.mikluko.io/v1beta1
kind: NatsConnection
metadata: { name: local, namespace: apps }
spec:
  servers: ${servers}
---
apiVersion: jetstream.nats.mikluko.io/v1beta1
kind: NatsStream
metadata: { name: orders, namespace: apps }
spec:
  connectionRef: { name: local }
  name: ORDERS
  subjects: ${subjects}
  storage: Memory
  replicas: 1
"#;

async fn subjects_on_server(js: &async_nats::jetstream::Context) -> Option<Vec<String>> {
    let mut s = js.get_stream("ORDERS").await.ok()?;
    Some(s.info().await.ok()?.config.subjects.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_annotations_conditions_and_a_controller_restart() {
    let topo = Topology::start(TopologySpec::cluster(1))
        .await
        .expect("a server");
    topo.wait_meta_leader(WAIT).await.expect("JetStream up");
    let host = Host::start(&[NS], &["jetstream"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(host.controller_names(), vec!["jetstream"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("stream.yaml");
    std::fs::write(&path, MANIFEST).expect("manifest");
    let mut vars = BTreeMap::new();
    vars.insert(
        "servers".to_string(),
        serde_json::to_string(&topo.client_urls()).expect("json"),
    );
    vars.insert("subjects".to_string(), r#"["orders.>"]"#.to_string());

    let applied = host
        .apply_manifest(&path, &vars)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        applied,
        vec!["NatsConnection/apps/local", "NatsStream/apps/orders"]
    );
    let stream = ObjectRef::parse("NatsStream/apps/orders").expect("ref");
    host.wait_condition(&stream, "Ready", WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let js = async_nats::jetstream::new(topo.connect().await.expect("client"));
    assert_eq!(
        subjects_on_server(&js).await,
        Some(vec!["orders.>".to_string()])
    );

    // Annotations are set and removed.
    host.annotate(&stream, "sim.test/marker=one")
        .await
        .expect("annotate");
    let got = host.get(&stream).await.expect("get");
    assert_eq!(got["metadata"]["annotations"]["sim.test/marker"], "one");
    host.annotate(&stream, "sim.test/marker-")
        .await
        .expect("remove");
    let got = host.get(&stream).await.expect("get");
    assert!(got["metadata"]["annotations"]["sim.test/marker"].is_null());
    assert!(host.annotate(&stream, "no-equals-sign").await.is_err());

    // A condition that never holds times out naming what it last saw.
    let err = host
        .wait_condition(&stream, "Ready=False", Duration::from_secs(1))
        .await
        .expect_err("Ready stays True");
    assert!(err.to_string().contains("Ready=True"), "{err}");

    // The restarted controller reconciles a change made after the restart.
    host.restart_controller("jetstream").await.expect("restart");
    assert_eq!(host.controller_restarts("jetstream"), Some(1));
    assert!(host.controller_running("jetstream"));
    assert!(host.restart_controller("nonesuch").await.is_err());
    vars.insert(
        "subjects".to_string(),
        r#"["orders.>", "refunds.>"]"#.to_string(),
    );
    host.apply_manifest(&path, &vars).await.expect("apply");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = subjects_on_server(&js).await;
        if got.as_ref().is_some_and(|s| s.len() == 2) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the restarted controller did not update the stream: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn object_references_parse() {
    let r = ObjectRef::parse("NatsCluster/demo").expect("short");
    assert_eq!(
        (r.kind.as_str(), r.namespace.as_str(), r.name.as_str()),
        ("NatsCluster", "nats", "demo")
    );
    let r = ObjectRef::parse("NatsStream/apps/orders").expect("long");
    assert_eq!(r.to_string(), "NatsStream/apps/orders");
    for bad in ["NatsCluster", "a/b/c/d", "/x", "K//n"] {
        assert!(ObjectRef::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(
        sim::control_plane::parse_condition("Settled"),
        ("Settled".to_string(), "True".to_string(), None)
    );
    assert_eq!(
        sim::control_plane::parse_condition("Ready=False"),
        ("Ready".to_string(), "False".to_string(), None)
    );
    assert_eq!(
        sim::control_plane::parse_condition("Progressing=True/ReplacingServer"),
        (
            "Progressing".to_string(),
            "True".to_string(),
            Some("ReplacingServer".to_string())
        )
    );
}
