//! An upgrade of the controllers restarts no NATS server (issue 42): on the node, story 01's
//! NatsCluster and an R3 stream run under the chart as installed; then `helm upgrade` with changed
//! values (the controllers' concurrency, log format and apiserver burst, so each controller's pod
//! is replaced) rolls the three controllers. Once each new controller has run a pass over what it
//! found (its own `/metrics` say so), the servers' pods are the same pods, no container restarted,
//! no StatefulSet changed, and neither the NatsCluster's nor the stream's Ready and Settled
//! conditions ever left True while it happened (a watch records every status it saw).
//!
//! What the controllers render is held offline too, for every story (the goldens of
//! `cluster_controller::objects::upgrade_goldens`); an upgrade of the CRDs under existing objects
//! is `e2e`'s `chart_install` test.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::watcher;
use nats_api::cluster::NatsCluster;
use nats_api::jetstream::NatsStream;
use sim::wait::poll;

use super::kit::{condition, is_true, object_until, resource};
use super::{NS, STREAM, STREAM_YAML, install, natscluster};

/// How long a controller's leader may take to show.
const WAIT: Duration = Duration::from_secs(120);

/// The values the upgrade changes: each one reaches the controllers' pod templates.
const CHANGED: &str = "concurrency: 16\nlogFormat: text\nkubeApi:\n  burst: 50\n";

/// Every (kind, condition, status) a watch saw of `namespace/name` of `ar`, in order.
#[derive(Clone, Default)]
struct Flaps(Arc<Mutex<Vec<String>>>);

impl Flaps {
    fn watch(
        &self,
        client: &kube::Client,
        ar: &kube::api::ApiResource,
        name: &str,
        types: &'static [&'static str],
    ) -> tokio::task::JoinHandle<()> {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, ar);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let (kind, seen) = (ar.kind.clone(), self.0.clone());
        tokio::spawn(async move {
            let mut events = watcher::watcher(api, config).boxed();
            while let Some(event) = events.next().await {
                let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = event else {
                    continue;
                };
                let Ok(value) = serde_json::to_value(&o) else {
                    continue;
                };
                for t in types {
                    let now = condition(&value, t).map(|(s, r)| format!("{s} {r}"));
                    let line = format!("{kind} {t}: {}", now.unwrap_or_else(|| "absent".into()));
                    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                    if !seen.contains(&line) {
                        seen.push(line);
                    }
                }
            }
        })
    }

    fn seen(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The NATS servers' pods: name → (uid, restarts).
async fn servers(client: &kube::Client) -> BTreeMap<String, (String, i32)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing the servers' pods: {e}"))
        .items
        .into_iter()
        .filter_map(|p| {
            let restarts = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|c| c.iter().map(|c| c.restart_count).sum())
                .unwrap_or(0);
            Some((p.metadata.name?, (p.metadata.uid?, restarts)))
        })
        .collect()
}

/// Each StatefulSet's generation and pod template revision annotation.
async fn stateful_sets(client: &kube::Client) -> BTreeMap<String, (i64, String)> {
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    sts.list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing the StatefulSets: {e}"))
        .items
        .into_iter()
        .filter_map(|s| {
            let revision = s
                .spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get("cluster.nats.mikluko.io/config-revision").cloned())
                .unwrap_or_default();
            Some((s.metadata.name?, (s.metadata.generation?, revision)))
        })
        .collect()
}

/// The controller of `component` as its pods serve it: the uid of the replica that leads (its
/// `nats_operator_leader` at 1) and its `/metrics` count of passes over `kind`, and every running
/// replica's uid. The chart runs each controller as replicas under leader election, and only the
/// leader passes.
async fn passes(
    client: &kube::Client,
    component: &str,
    kind: &str,
) -> Result<(String, f64, Vec<String>), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), e2e::chart::NAMESPACE);
    let selector = format!("app.kubernetes.io/component={component}-controller");
    let listed = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| format!("listing {component}'s pods: {e}"))?
        .items;
    let running: Vec<&Pod> = listed
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let uids: Vec<String> = running
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    for pod in running.iter().filter(|p| sim::node::servers::pod_ready(p)) {
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
            continue;
        };
        let Ok(text) = scrape(&ip).await else {
            continue;
        };
        let leads = text
            .lines()
            .any(|l| l.starts_with("nats_operator_leader{") && l.ends_with(" 1"));
        if !leads {
            continue;
        }
        let count = text
            .lines()
            .filter(|l| {
                l.starts_with("nats_operator_reconcile_total{")
                    && l.contains(&format!("controller=\"{kind}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        return Ok((pod.metadata.uid.clone().unwrap_or_default(), count, uids));
    }
    Err(format!(
        "no ready replica of {component} leads ({} running)",
        running.len()
    ))
}

/// One `/metrics` of a controller pod at `ip`.
async fn scrape(ip: &str) -> Result<String, String> {
    reqwest::Client::new()
        .get(format!("http://{ip}:8080/metrics"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .text()
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_helm_upgrade_of_the_controllers_restarts_no_nats_server() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let Some((node, digest)) = install(dir.path()).await else {
        return;
    };
    let client = node.client();
    let (cluster_ar, stream_ar) = (resource::<NatsCluster>(), resource::<NatsStream>());

    node.apply(&natscluster(&digest, "512Mi"))
        .await
        .unwrap_or_else(|e| panic!("applying the NatsCluster: {e}"));
    object_until(
        &client,
        &cluster_ar,
        NS,
        "demo",
        "NatsCluster demo Ready and Settled",
        Duration::from_secs(300),
        |o| is_true(o, "Ready") && is_true(o, "Settled") && o["status"]["readyReplicas"] == 3,
    )
    .await;
    node.apply(STREAM_YAML)
        .await
        .unwrap_or_else(|e| panic!("applying the stream: {e}"));
    object_until(
        &client,
        &stream_ar,
        NS,
        STREAM,
        "NatsStream orders Ready",
        Duration::from_secs(120),
        |o| is_true(o, "Ready"),
    )
    .await;

    let servers_before = servers(&client).await;
    let sets_before = stateful_sets(&client).await;
    assert_eq!(servers_before.len(), 3, "{servers_before:?}");
    let (_, _, cluster_uids) = poll("the cluster controller's leader", WAIT, || async {
        passes(&client, "cluster", "NatsCluster").await.map(Some)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let (_, _, jetstream_uids) = poll("the JetStream controller's leader", WAIT, || async {
        passes(&client, "jetstream", "NatsStream").await.map(Some)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let flaps = Flaps::default();
    let watches = [
        flaps.watch(&client, &cluster_ar, "demo", &["Ready", "Settled"]),
        flaps.watch(&client, &stream_ar, STREAM, &["Ready"]),
    ];

    let t0 = Instant::now();
    let release = e2e::on_node::Release::new(dir.path(), &node.kubeconfig());
    release
        .upgrade(&client, Some(CHANGED))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "figure: helm upgrade to every controller rolled out in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    // Each new controller has passed over what it found: a new pod, its passes counted.
    for (component, kind, old) in [
        ("cluster", "NatsCluster", &cluster_uids),
        ("jetstream", "NatsStream", &jetstream_uids),
    ] {
        poll(
            &format!("the new {component} controller's first pass over a {kind}"),
            Duration::from_secs(180),
            || async {
                let (uid, count, _) = passes(&client, component, kind).await?;
                if old.contains(&uid) {
                    return Err(format!(
                        "{component}'s leader is still a pod of before the upgrade"
                    ));
                }
                Ok((count >= 1.0).then_some(()))
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
    eprintln!(
        "figure: upgrade to both new controllers' first passes in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    // And as the new controllers left it.
    object_until(
        &client,
        &cluster_ar,
        NS,
        "demo",
        "NatsCluster demo still Ready and Settled",
        Duration::from_secs(30),
        |o| is_true(o, "Ready") && is_true(o, "Settled") && o["status"]["readyReplicas"] == 3,
    )
    .await;
    for w in watches {
        w.abort();
    }

    let servers_after = servers(&client).await;
    assert_eq!(
        servers_after, servers_before,
        "the servers' pods (uid, restarts) are the same"
    );
    assert!(
        servers_after.values().all(|(_, r)| *r == 0),
        "{servers_after:?}"
    );
    assert_eq!(
        stateful_sets(&client).await,
        sets_before,
        "no StatefulSet changed"
    );
    let seen = flaps.seen();
    let left: Vec<&String> = seen.iter().filter(|l| !l.contains(": True ")).collect();
    assert!(
        left.is_empty(),
        "a condition left True during the upgrade: {seen:#?}"
    );
    eprintln!("figure: conditions seen during the upgrade: {seen:?}");
    let left = node.down().await;
    assert!(
        left.is_empty(),
        "the host differs from its baseline after down: {left:#?}"
    );
}
