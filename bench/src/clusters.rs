//! The `cluster-controller` binary with many NatsClusters, as its API-tier test runs it
//! (operators/cluster/tests/api/api_binary.rs): kube-apiserver 1.20 alone, the Kubernetes server
//! lifecycle, no kubelet, so no pod ever runs and no nats-server is reached. Each NatsCluster is
//! story 01's quickstart (3 servers); done once every one has its three StatefulSets and a status.
//! 2,000 unrelated 10 KiB Secrets in other namespaces exist before the binary starts.
//!
//! - `rss.cluster_30_natsclusters` ([`figure`]): the resident size at rest with 30; the floor is
//!   the same binary at rest with none, its watches listed.
//! - `scale.clusters_100_rendered` and `rss.cluster_100_natsclusters` ([`scale_figures`], issue
//!   40's ten times the scale, `--scale`): 100 applied at once until all are rendered, against
//!   the **work floor** — every object the controller wrote for them (StatefulSets, ConfigMaps,
//!   Services, Secrets, NetworkPolicies, PodDisruptionBudgets, as listed afterwards) created
//!   directly in another namespace, 32 at a time, in the same run — and the resident size then.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use nats_api::cluster::NatsCluster;

use crate::summary::Figure;

const NS: &str = "nats";
/// Where the work floor writes its copies.
const FLOOR_NS: &str = "floor";
const UNRELATED: [&str; 2] = ["unrelated-a", "unrelated-b"];
use crate::apply::AT_ONCE;

/// What one run measured.
struct Run {
    /// Resident size before the first NatsCluster, MiB.
    idle: f64,
    /// Resident size once all were rendered, MiB.
    loaded: f64,
    /// From the first create to every one rendered.
    took: Duration,
    /// The same writes done directly.
    floor: Duration,
    /// How many objects the floor wrote.
    objects: usize,
    /// What the rendering cost: passes and requests per NatsCluster, the apiserver's latency,
    /// when each quarter was rendered.
    notes: Vec<String>,
}

pub async fn figure(binary: &Path) -> anyhow::Result<Figure> {
    const COUNT: usize = 30;
    let run = run(binary, COUNT, Duration::from_secs(300), false).await?;
    Ok(Figure {
        name: "rss.cluster_30_natsclusters".into(),
        what: format!(
            "cluster-controller resident size at rest with {COUNT} NatsClusters, apiserver only (and 2000 unrelated 10 KiB Secrets)"
        ),
        value: run.loaded,
        unit: "MiB".into(),
        floor: run.idle,
        floor_what: "the same binary at rest with none".into(),
        goal: Some("≤ 25 MiB".into()),
        notes: vec![],
    })
}

/// Ten times the scale: 100 NatsClusters.
pub async fn scale_figures(binary: &Path) -> anyhow::Result<Vec<Figure>> {
    const COUNT: usize = 100;
    let run = run(binary, COUNT, Duration::from_secs(600), true).await?;
    Ok(vec![
        Figure {
            name: "scale.clusters_100_rendered".into(),
            what: format!(
                "{COUNT} NatsClusters applied at once until every one has its StatefulSets and a status, apiserver only"
            ),
            value: run.took.as_secs_f64(),
            unit: "s".into(),
            floor: run.floor.as_secs_f64(),
            floor_what: format!(
                "the {} objects the controller wrote for them created directly, {AT_ONCE} at a time",
                run.objects
            ),
            goal: Some("≤ 60 s".into()),
            notes: run.notes,
        },
        Figure {
            name: "rss.cluster_100_natsclusters".into(),
            what: format!(
                "cluster-controller resident size at rest with {COUNT} NatsClusters, apiserver only (and 2000 unrelated 10 KiB Secrets)"
            ),
            value: run.loaded,
            unit: "MiB".into(),
            floor: run.idle,
            floor_what: "the same binary at rest with none".into(),
            goal: Some("≤ 40 MiB".into()),
            notes: vec![],
        },
    ])
}

async fn run(binary: &Path, count: usize, wait: Duration, floor: bool) -> anyhow::Result<Run> {
    let mut namespaces = vec![NS, FLOOR_NS];
    namespaces.extend(UNRELATED);
    let api = sim::testkit::apiserver_with_crds(&namespaces).await;
    let client = api.client();
    for ns in UNRELATED {
        sim::testkit::memory::unrelated_secrets(&client, ns, 1000, 10 * 1024).await;
    }
    let port = sim::ports::free_port();
    let child = sim::testkit::spawn_binary(
        binary,
        api.kubeconfig(),
        &[
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--probe-addr",
            "127.0.0.1:0",
        ],
    );
    sim::testkit::wait_metrics(port, "the binary's /metrics", wait, |b| {
        b.contains("nats_operator_leader")
    })
    .await;
    let idle = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;
    let before = sim::testkit::metrics(port).await.unwrap_or_default();
    let api_before = crate::scrape::apiserver_metrics(&client).await;

    let clusters: Api<NatsCluster> = Api::namespaced(client.clone(), NS);
    let quickstart: serde_json::Value = sim::testkit::story_object(
        "docs/stories/01-quickstart/01-natscluster.yaml",
        "NatsCluster",
    );
    let start = Instant::now();
    let created: Vec<anyhow::Result<()>> = futures::stream::iter(0..count)
        .map(|i| {
            let clusters = clusters.clone();
            let mut doc = quickstart.clone();
            doc["metadata"]["name"] = format!("c{i}").into();
            async move {
                let c: NatsCluster = serde_json::from_value(doc)?;
                clusters.create(&PostParams::default(), &c).await?;
                Ok(())
            }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    created.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let quarters = std::sync::Mutex::new(Vec::<(usize, Duration)>::new());
    let (sets, clusters, quarters) = (&sets, &clusters, &quarters);
    // Every half second from the apiserver's watch cache, StatefulSets as metadata: the bench's
    // own reads stay a small part of the apiserver's work (a full list of the 300 StatefulSets
    // from etcd every 100 ms was a third of the controller's own list cost).
    let cached = ListParams::default().match_any();
    let cached = &cached;
    sim::wait::poll_every(
        "every NatsCluster's StatefulSets and status",
        wait,
        Duration::from_millis(500),
        || async move {
            let n = sets
                .list_metadata(cached)
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
            let with_status = clusters
                .list(cached)
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .filter(|c| c.status.as_ref().is_some_and(|s| !s.conditions.is_empty()))
                .count();
            let rendered = n.min(3 * with_status) / 3;
            if let Ok(mut q) = quarters.lock() {
                let next = (q.len() + 1) * count / 4;
                if q.len() < 4 && rendered >= next {
                    q.push((rendered, start.elapsed()));
                }
            }
            if n == 3 * count && with_status == count {
                Ok(Some(()))
            } else {
                Err(format!("{n} StatefulSets, {with_status} with a status"))
            }
        },
    )
    .await?;
    let took = start.elapsed();
    let after = sim::testkit::metrics(port).await.unwrap_or_default();
    let api_after = crate::scrape::apiserver_metrics(&client).await;
    let mut notes = crate::scrape::per_object(&before, &after, "NatsCluster", count, "NatsCluster");
    notes.push(crate::scrape::latency(&api_before, &api_after));
    if let Ok(q) = quarters.lock() {
        let at: Vec<String> = q
            .iter()
            .map(|(n, t)| format!("{n} at {:.0} s", t.as_secs_f64()))
            .collect();
        notes.push(format!("rendered: {}", at.join(", ")));
    }
    // At rest: read once no NatsCluster pass has run for 3 s (the passes of the clusters written
    // last still run when the last status appears, and their renders are in the heap).
    let waited = crate::scrape::at_rest(port, "NatsCluster", Duration::from_secs(3), wait).await?;
    notes.push(format!(
        "resident size read {:.1} s after the last status, once no pass had run for 3 s",
        waited.as_secs_f64()
    ));
    let loaded = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;
    drop(child);
    let (floor, objects) = if floor {
        work_floor(&client).await?
    } else {
        (Duration::ZERO, 0)
    };
    Ok(Run {
        idle,
        loaded,
        took,
        floor,
        objects,
        notes,
    })
}

/// The kinds the cluster controller writes for a NatsCluster (a kind this apiserver does not
/// serve, such as policy/v1 on 1.20, is skipped).
const KINDS: [(&str, &str, &str, &str); 6] = [
    ("", "v1", "ConfigMap", "configmaps"),
    ("", "v1", "Service", "services"),
    ("", "v1", "Secret", "secrets"),
    ("apps", "v1", "StatefulSet", "statefulsets"),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    ),
];

/// Every object a NatsCluster owns in [`NS`], copied into [`FLOOR_NS`] directly, 32 at a time:
/// the time and the count.
async fn work_floor(client: &kube::Client) -> anyhow::Result<(Duration, usize)> {
    let mut copies = Vec::new();
    for (group, version, kind, plural) in KINDS {
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
        let Ok(list) = api.list(&Default::default()).await else {
            continue;
        };
        for o in list.items {
            let owned = o
                .metadata
                .owner_references
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|r| r.kind == "NatsCluster");
            if owned {
                copies.push((ar.clone(), copy_of(o)));
            }
        }
    }
    let count = copies.len();
    let start = Instant::now();
    let written: Vec<Result<DynamicObject, kube::Error>> = futures::stream::iter(copies)
        .map(|(ar, o)| {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), FLOOR_NS, &ar);
            async move { api.create(&PostParams::default(), &o).await }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let took = start.elapsed();
    written.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok((took, count))
}

/// `o` as a new object for another namespace: its name, labels, annotations and body; nothing
/// the apiserver assigned (uid, versions, owners, status, a Service's cluster IP).
fn copy_of(mut o: DynamicObject) -> DynamicObject {
    let meta = kube::api::ObjectMeta {
        name: o.metadata.name.take(),
        labels: o.metadata.labels.take(),
        annotations: o.metadata.annotations.take(),
        ..Default::default()
    };
    o.metadata = meta;
    if let Some(map) = o.data.as_object_mut() {
        map.remove("status");
    }
    if let Some(spec) = o.data.get_mut("spec").and_then(|s| s.as_object_mut())
        && spec.get("clusterIP").and_then(|v| v.as_str()) != Some("None")
    {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_keeps_the_body_and_drops_what_the_apiserver_assigned() {
        let o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "c0", "namespace": "nats", "uid": "u", "resourceVersion": "7",
                "labels": {"a": "b"},
                "ownerReferences": [{"apiVersion": "cluster.nats.mikluko.io/v1beta1",
                    "kind": "NatsCluster", "name": "c0", "uid": "x"}]
            },
            "spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "ports": [{"port": 4222}]},
            "status": {"loadBalancer": {}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let c = serde_json::to_value(copy_of(o)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c["metadata"]["name"], "c0");
        assert_eq!(c["metadata"]["labels"]["a"], "b");
        for gone in ["uid", "resourceVersion", "ownerReferences", "namespace"] {
            assert!(c["metadata"].get(gone).is_none(), "{gone}: {c}");
        }
        assert!(c.get("status").is_none());
        assert!(c["spec"].get("clusterIP").is_none());
        assert_eq!(c["spec"]["ports"][0]["port"], 4222);
    }

    #[test]
    fn a_headless_service_stays_headless() {
        let o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "h"},
            "spec": {"clusterIP": "None"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let c = serde_json::to_value(copy_of(o)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c["spec"]["clusterIP"], "None");
    }
}
