//! The `cluster-controller` binary's resident size at rest with 30 NatsClusters, as its API-tier
//! test runs it (operators/cluster/tests/api/api_binary.rs): kube-apiserver 1.20 alone, the
//! Kubernetes server lifecycle, no kubelet, so no pod ever runs and no nats-server is reached. Each
//! NatsCluster is story 01's quickstart (3 servers); at rest once every one has its three
//! StatefulSets and a status. The floor: the same binary at rest with none, its watches listed.
//! 2,000 unrelated 10 KiB Secrets in other namespaces exist before the binary starts.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::{Api, PostParams};
use nats_api::cluster::NatsCluster;

use crate::summary::Figure;

const COUNT: usize = 30;
const NS: &str = "nats";
const UNRELATED: [&str; 2] = ["unrelated-a", "unrelated-b"];
const WAIT: Duration = Duration::from_secs(300);

pub async fn figure(binary: &Path) -> anyhow::Result<Figure> {
    let mut namespaces = vec![NS];
    namespaces.extend(UNRELATED);
    let api = sim::testkit::apiserver_with_crds(&namespaces).await;
    let client = api.client();
    for ns in UNRELATED {
        sim::testkit::memory::unrelated_secrets(&client, ns, 1000, 10 * 1024).await;
    }
    let port = sim::ports::free_port();
    let child = sim::testkit::spawn_binary(
        &binary.display().to_string(),
        api.kubeconfig(),
        &[
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--probe-addr",
            "127.0.0.1:0",
        ],
    );
    sim::testkit::wait_metrics(port, "the binary's /metrics", WAIT, |b| {
        b.contains("nats_operator_leader")
    })
    .await;
    let idle = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;

    let clusters: Api<NatsCluster> = Api::namespaced(client.clone(), NS);
    let quickstart: serde_json::Value = sim::testkit::story_object(
        "docs/stories/01-quickstart/01-natscluster.yaml",
        "NatsCluster",
    );
    for i in 0..COUNT {
        let mut doc = quickstart.clone();
        doc["metadata"]["name"] = format!("c{i}").into();
        let c: NatsCluster = serde_json::from_value(doc)?;
        clusters.create(&PostParams::default(), &c).await?;
    }
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let (sets, clusters) = (&sets, &clusters);
    sim::wait::poll(
        "every NatsCluster's StatefulSets and status",
        WAIT,
        || async move {
            let n = sets
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
            let with_status = clusters
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .filter(|c| c.status.as_ref().is_some_and(|s| !s.conditions.is_empty()))
                .count();
            if n == 3 * COUNT && with_status == COUNT {
                Ok(Some(()))
            } else {
                Err(format!("{n} StatefulSets, {with_status} with a status"))
            }
        },
    )
    .await?;
    let loaded = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;
    drop(child);
    Ok(Figure {
        name: "rss.cluster_30_natsclusters".into(),
        what: format!(
            "cluster-controller resident size at rest with {COUNT} NatsClusters, apiserver only (and 2000 unrelated 10 KiB Secrets)"
        ),
        value: loaded,
        unit: "MiB".into(),
        floor: idle,
        floor_what: "the same binary at rest with none".into(),
        goal: Some("≤ 25 MiB".into()),
        notes: vec![],
    })
}
