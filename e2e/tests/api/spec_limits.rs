//! Limits on what a spec may ask, at apply on kube-apiserver 1.20: a NatsCluster asking for
//! 100,000 servers is refused by the CRD's schema (its `maximum`), with a message naming
//! spec.replicas, while the largest allowed (64) is accepted.

use kube::api::{Api, PostParams};
use nats_api::cluster::NatsCluster;
use serde_json::Value;
use sim::testkit::{api_error, apiserver_with_crds, story_object};

/// Story 01's NatsCluster asking for `replicas` servers.
fn cluster(replicas: i64) -> NatsCluster {
    let mut doc: Value = story_object(
        "docs/stories/01-quickstart/01-natscluster.yaml",
        "NatsCluster",
    );
    doc["spec"]["replicas"] = replicas.into();
    serde_json::from_value(doc).expect("a NatsCluster")
}

#[tokio::test]
async fn a_natscluster_of_a_hundred_thousand_servers_is_refused_at_apply() {
    let api = apiserver_with_crds(&["nats"]).await;
    let clusters: Api<NatsCluster> = Api::namespaced(api.client(), "nats");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    let refused = clusters
        .create(&PostParams::default(), &cluster(100_000))
        .await
        .map(|_| ())
        .expect_err("replicas: 100000 is refused");
    let why = api_error(&refused);
    assert!(why.starts_with("422 Invalid"), "{why}");
    assert!(
        why.contains("spec.replicas") && why.contains("64"),
        "the refusal names the field and its bound: {why}"
    );
    println!("replicas: 100000 refused at apply: {why}");

    clusters
        .create(&dry_run, &cluster(64))
        .await
        .unwrap_or_else(|e| panic!("replicas: 64 is accepted: {}", api_error(&e)));
    let refused = clusters
        .create(&dry_run, &cluster(65))
        .await
        .map(|_| ())
        .expect_err("replicas: 65 is refused");
    assert!(
        api_error(&refused).contains("spec.replicas"),
        "{}",
        api_error(&refused)
    );
}
