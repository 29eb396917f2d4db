//! API tier, in process: the JetStream controller confined to two namespaces of three
//! (`Scope`, as `--watch-namespaces=a,b`). Both listed namespaces' NatsConnections are
//! reconciled from one store fed by two watches, including one created after the first lists;
//! the third namespace's is never given a status.

use std::collections::BTreeSet;
use std::time::Duration;

use controller_kit::metrics::Metrics;
use controller_kit::scope::{Namespaces, Scope};
use jetstream_controller::controller::Settings;
use kube::api::{Api, PostParams};
use nats_api::nats::NatsConnection;
use serde_json::json;
use sim::testkit::{apiserver_with_crds, is, wait_for};

/// A NatsConnection to a loopback port nothing listens on: its pass writes ConnectFailed.
async fn create(client: &kube::Client, ns: &str, name: &str) {
    let conn: NatsConnection = serde_json::from_value(json!({
        "apiVersion": "nats.mikluko.io/v1beta1",
        "kind": "NatsConnection",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"servers": [format!("nats://127.0.0.1:{}", sim::ports::free_port())]},
    }))
    .expect("a NatsConnection");
    Api::<NatsConnection>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &conn)
        .await
        .unwrap_or_else(|e| panic!("creating {ns}/{name}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_watched_namespaces_reconcile_and_a_third_is_left_alone() {
    let api = apiserver_with_crds(&["a", "b", "c"]).await;
    let client = api.client();
    for ns in ["a", "b", "c"] {
        create(&client, ns, "early").await;
    }
    let scope = Scope {
        namespaces: Namespaces::Only(BTreeSet::from(["a".to_string(), "b".to_string()])),
        ..Scope::default()
    };
    let settings = Settings {
        resync: Duration::from_secs(30),
        scope,
    };
    let (_, _controllers) =
        crate::common::spawn_controller_with(client.clone(), settings, Metrics::default());
    let failed = |o: &serde_json::Value| is(o, "Ready", "False", "ConnectFailed");
    for ns in ["a", "b"] {
        let conns = Api::<NatsConnection>::namespaced(client.clone(), ns);
        wait_for(&conns, "early", "listed first", failed).await;
    }
    // Created once the first lists are in (c's first): the watches' events reach the one
    // store, and by the time b's is reconciled c's would have been too, were c watched.
    create(&client, "c", "late").await;
    create(&client, "b", "late").await;
    let conns = Api::<NatsConnection>::namespaced(client.clone(), "b");
    wait_for(&conns, "late", "watched after the lists", failed).await;
    let other = Api::<NatsConnection>::namespaced(client.clone(), "c");
    for name in ["early", "late"] {
        let got = other.get(name).await.expect("read");
        assert!(got.status.is_none(), "c/{name}: {:?}", got.status);
    }
}
