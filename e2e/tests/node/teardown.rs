//! Teardown on real Kubernetes (issue 43, item 3), two tests on the sim's node with the chart
//! installed:
//!
//! - `kubectl_delete_namespace_of_every_nats_kind_releases_every_object_within_60s`: story 02's
//!   tenant — trust roots, the system account and its users, the controllers' system
//!   connections, a NatsCluster of three real pods with client TLS, the orders account and its
//!   users, an R3 stream, an R3 key-value bucket and a consumer with `deletionPolicy: Delete`, the
//!   `orders` NatsConnection — in one namespace, then `kubectl delete namespace` (the node's
//!   namespace controller and garbage collector at work): every Nats object but the NatsCluster
//!   is gone within 60 s, nothing edited by hand, no Event says a deletion was dropped or
//!   forced; the namespace itself is gone within 60 s plus the servers' 2m lame duck (its pods'
//!   preStop, which the namespace waits for). The servers and their claims go with the
//!   namespace, so a Delete that could not reach them goes with them (printed, not judged).
//! - `kubectl_delete_namespace_of_a_team_then_of_the_platform_with_the_operator_elsewhere`: the
//!   NATS operator's objects (NatsOperator, system account, trust, system users, the NatsCluster)
//!   in the platform's namespace, the orders account, users, connection and JetStream resources
//!   in the team's, admitted by a NatsReferenceGrant: the team's namespace deleted, its Nats
//!   objects gone within 60 s and its stream and bucket gone from the still running servers;
//!   then the platform's as above.
//!
//! The auth controller's system connection is `nats-tenant/auth` (story 02's `auth`), so it goes
//! with the namespace. What is built here is shared with the uninstall test (`uninstall.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};
use serde_json::{Value, json};
use sim::wait::poll;

use super::kit::{is_true, object_until, resource};
use e2e::conformance::fixtures::server_tls;
use e2e::conformance::issuer::Issuers;
use e2e::on_node::{Installed, NodeShape};

/// The platform's namespace (story 02's `nats-system`, which the chart's own release namespace
/// is here).
pub const PLATFORM: &str = "nats-tenant";
/// The team's namespace when the operator's objects are elsewhere.
pub const TEAM: &str = "orders";
/// Every Nats object but the NatsClusters is gone within this of the namespace's deletion.
pub const WITHIN: Duration = Duration::from_secs(60);
/// The namespace itself is gone within this: its NATS servers' pods run their preStop lame duck
/// (`lame_duck_duration` 2m, the design's, §4.4) before the kubelet removes them, and the
/// namespace waits for its pods; so [`WITHIN`] plus the lame duck plus 30 s.
pub const NAMESPACE_WITHIN: Duration = Duration::from_secs(60 + 120 + 30);
const READY: Duration = Duration::from_secs(420);

/// The chart's values: the auth controller pushes over story 02's `auth` connection.
pub const VALUES: &str = "controllers:\n  auth:\n    systemConnection: nats-tenant/auth\n";

/// Reasons of Events that say a deletion did not do what was promised, or was forced.
const DROPPED: [&str; 3] = ["DeletionPolicyNotRun", "ServersGone", "ForceDeleted"];

/// The node with the chart installed as [`VALUES`] ask; None (after saying why) without a node.
pub async fn install(dir: &std::path::Path) -> Option<Installed> {
    if let Some(why) = e2e::on_node::unavailable() {
        eprintln!("SKIPPED: the node cannot run here: {why}");
        return None;
    }
    let shape = NodeShape {
        values: Some(VALUES.into()),
        ..NodeShape::default()
    };
    let mut say = |line: &str| eprintln!("figure: {line}");
    Some(
        e2e::on_node::install_shaped(dir, &shape, &mut say)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

/// Story 02's files 01–05 with `nats-system` replaced by [`PLATFORM`], the stream with
/// `deletionPolicy: Delete`, a bucket `carts` and a consumer `worker` (both Delete); with
/// `team`, the orders account, its users, the `orders` connection and the JetStream resources
/// in [`TEAM`], admitted by a NatsReferenceGrant, the client CA copied there.
pub fn tenant(installed: &Installed, issuers: &Issuers, team: bool) -> Vec<Value> {
    let mut text = String::new();
    for f in [
        "01-trust-roots.yaml",
        "02-system-users.yaml",
        "03-natscluster.yaml",
        "04-orders.yaml",
        "05-stream.yaml",
    ] {
        let path = e2e::chart::workspace_root().join(format!("docs/stories/02-auth-plane/{f}"));
        let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{f}: {e}"));
        text.push_str(&body);
        text.push_str("\n---\n");
    }
    let text = text
        .replace("nats-system", PLATFORM)
        .replace("  maxAge: 72h", "  maxAge: 72h\n  deletionPolicy: Delete");
    let mut docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .filter_map(|d| serde::Deserialize::deserialize(d).ok())
        .filter(|v: &Value| v.is_object())
        .collect();
    docs.push(json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsKeyValue",
        "metadata": {"name": "carts", "namespace": PLATFORM},
        "spec": {"connectionRef": {"name": "orders"}, "history": 1, "storage": "File",
                 "replicas": 3, "deletionPolicy": "Delete"},
    }));
    docs.push(json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsConsumer",
        "metadata": {"name": "worker", "namespace": PLATFORM},
        "spec": {"streamRef": {"name": "orders"}, "ackPolicy": "Explicit", "deletionPolicy": "Delete"},
    }));
    let tls = server_tls(issuers, "platform", "demo-client-tls", PLATFORM, "demo")
        .unwrap_or_else(|e| panic!("the client TLS Secret: {e}"));
    let mut out = vec![tls.clone()];
    let fit = installed.fit();
    for mut doc in docs {
        if doc["kind"] == "NatsCluster" {
            let mut obj: DynamicObject = serde_json::from_value(doc).expect("a NatsCluster");
            fit.nats_cluster(&mut obj)
                .unwrap_or_else(|e| panic!("fitting the NatsCluster: {e}"));
            doc = serde_json::to_value(&obj).expect("json");
        }
        out.push(doc);
    }
    if !team {
        return namespaces_first(out);
    }
    let moves = |d: &Value| {
        let name = d["metadata"]["name"].as_str().unwrap_or_default();
        match d["kind"].as_str().unwrap_or_default() {
            "NatsAccount" => name == "orders",
            "NatsUser" => name.starts_with("orders-"),
            "NatsConnection" => name == "orders",
            "NatsStream" | "NatsKeyValue" | "NatsConsumer" => true,
            _ => false,
        }
    };
    for d in &mut out {
        if moves(d) {
            d["metadata"]["namespace"] = json!(TEAM);
        }
        if d["kind"] == "NatsAccount" {
            d["spec"]["operatorRef"]["namespace"] = json!(PLATFORM);
        }
    }
    let mut ca = tls;
    ca["metadata"]["namespace"] = json!(TEAM);
    let mut team_docs = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}}),
        ca,
        json!({
            "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsReferenceGrant",
            "metadata": {"name": "orders-accounts", "namespace": PLATFORM},
            "spec": {"from": [{"group": "auth.nats.mikluko.io", "kind": "NatsAccount", "namespace": TEAM}],
                     "to": [{"group": "auth.nats.mikluko.io", "kind": "NatsOperator", "name": "demo"}]},
        }),
    ];
    out.append(&mut team_docs);
    namespaces_first(out)
}

/// `docs` with the Namespaces first, the rest in their order.
fn namespaces_first(mut docs: Vec<Value>) -> Vec<Value> {
    docs.sort_by_key(|d| d["kind"] != "Namespace");
    docs
}

/// Applies `docs` and waits until the tenant serves: the NatsCluster, the stream, the bucket and
/// the consumer Ready. Returns the seconds it took.
pub async fn apply_and_wait(installed: &Installed, docs: &[Value]) -> f64 {
    let t0 = Instant::now();
    let client = installed.node.client();
    for d in docs {
        let yaml = serde_yaml::to_string(d).expect("yaml");
        installed
            .node
            .apply(&yaml)
            .await
            .unwrap_or_else(|e| panic!("applying {}: {e}", d["metadata"]["name"]));
    }
    let at = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .and_then(|d| d["metadata"]["namespace"].as_str())
            .unwrap_or(PLATFORM)
            .to_string()
    };
    for (ar, kind, name) in [
        (
            resource::<nats_api::cluster::NatsCluster>(),
            "NatsCluster",
            "demo",
        ),
        (
            resource::<nats_api::jetstream::NatsStream>(),
            "NatsStream",
            "orders",
        ),
        (
            resource::<nats_api::jetstream::NatsKeyValue>(),
            "NatsKeyValue",
            "carts",
        ),
        (
            resource::<nats_api::jetstream::NatsConsumer>(),
            "NatsConsumer",
            "worker",
        ),
    ] {
        let ns = at(kind, name);
        object_until(
            &client,
            &ar,
            &ns,
            name,
            &format!("{kind} {ns}/{name} Ready"),
            READY,
            |o| is_true(o, "Ready"),
        )
        .await;
    }
    t0.elapsed().as_secs_f64()
}

/// Every Nats kind's API resource.
pub fn nats_kinds() -> Vec<ApiResource> {
    nats_api::crds::all()
        .iter()
        .map(sim::apiserver::crd_api_resource)
        .collect()
}

/// Every object of a Nats kind in `namespaces`, as `Kind ns/name`, with finalizers and status,
/// for a failure's message.
pub async fn nats_objects(client: &kube::Client, namespaces: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for ar in nats_kinds() {
        for ns in namespaces {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
            let list = match api.list(&ListParams::default()).await {
                Ok(l) => l,
                Err(e) => {
                    out.push(format!("{} in {ns}: not listed: {e}", ar.kind));
                    continue;
                }
            };
            for o in list.items {
                let status = o.data.get("status").cloned().unwrap_or_default();
                out.push(format!(
                    "{} {ns}/{}: finalizers {:?}, deleting {}, status {status}",
                    ar.kind,
                    o.metadata.name.clone().unwrap_or_default(),
                    o.metadata.finalizers.clone().unwrap_or_default(),
                    o.metadata.deletion_timestamp.is_some()
                ));
            }
        }
    }
    out
}

/// The streams each server of NatsCluster `ns/demo` last said it holds (JSZ by pod IP), read
/// every 300 ms until the watch is dropped.
pub struct Streams {
    last: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Streams {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Streams {
    pub async fn watch(client: &kube::Client, ns: &str) -> Self {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let mut ips = Vec::new();
        for i in 0..3 {
            let pod = pods
                .get(&format!("demo-{i}-0"))
                .await
                .unwrap_or_else(|e| panic!("pod demo-{i}-0: {e}"));
            let ip = pod.status.and_then(|s| s.pod_ip).expect("a pod IP");
            ips.push((format!("demo-{i}"), ip));
        }
        let last = Arc::new(Mutex::new(BTreeMap::new()));
        let sink = last.clone();
        let task = tokio::spawn(async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(1))
                .build()
                .expect("http");
            loop {
                for (server, ip) in &ips {
                    let url = format!("http://{ip}:8222/jsz?accounts=true&streams=true");
                    if let Ok(r) = http.get(&url).send().await
                        && let Ok(v) = r.json::<Value>().await
                    {
                        let names = stream_names(&v);
                        sink.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(server.clone(), names);
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        Self { last, task }
    }

    /// Every stream some server last listed.
    pub fn left(&self) -> BTreeSet<String> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.values().flatten().cloned().collect()
    }

    /// How many servers answered at least once.
    pub fn answered(&self) -> usize {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The stream names of a JSZ answer with account and stream details.
fn stream_names(jsz: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for a in jsz["account_details"].as_array().into_iter().flatten() {
        for s in a["stream_detail"].as_array().into_iter().flatten() {
            if let Some(n) = s["name"].as_str() {
                out.insert(n.to_string());
            }
        }
    }
    out
}

/// The Events of `namespaces` with a [`DROPPED`] reason, read every 500 ms (a deleted
/// namespace takes its Events with it) until dropped: `reason: note`.
pub struct Dropped {
    seen: Arc<Mutex<BTreeSet<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Dropped {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Dropped {
    pub fn watch(client: &kube::Client, namespaces: &[&str]) -> Self {
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let sink = seen.clone();
        let apis: Vec<Api<Event>> = namespaces
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect();
        let task = tokio::spawn(async move {
            loop {
                for api in &apis {
                    if let Ok(list) = api.list(&ListParams::default()).await {
                        let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
                        for e in list.items {
                            let reason = e.reason.clone().unwrap_or_default();
                            if DROPPED.contains(&reason.as_str()) {
                                s.insert(format!("{reason}: {}", e.note.unwrap_or_default()));
                            }
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        Self { seen, task }
    }

    pub fn seen(&self) -> BTreeSet<String> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The Delete-policy stream and bucket of the tenant, as the servers name them.
pub const DELETED_STREAMS: [&str; 2] = ["ORDERS", "KV_carts"];

/// Checks that no Delete-policy stream is left on the servers unless an Event says so, and that
/// no Event says a deletion was dropped or forced (the servers' answers and the Events read
/// until now). `torn_down`: the servers were deleted with their namespace, claims included (the
/// namespace is gone), and a Delete that could not reach them went with them
/// (`torn_down::goes_with_servers`; the terminating namespace takes no Event): what their last
/// answers listed is printed, not judged.
pub fn nothing_silently_kept(streams: &Streams, dropped: &Dropped, what: &str, torn_down: bool) {
    assert_eq!(streams.answered(), 3, "{what}: every server answered JSZ");
    let left = streams.left();
    let events = dropped.seen();
    if torn_down {
        eprintln!(
            "figure: {what}: the servers' last answers listed {left:?}; their claims went with the namespace"
        );
        assert!(
            events.is_empty(),
            "{what}: a deletion was dropped or forced: {events:?}"
        );
        return;
    }
    for s in DELETED_STREAMS {
        if left.contains(s) {
            assert!(
                events
                    .iter()
                    .any(|e| e.starts_with("DeletionPolicyNotRun") && e.contains(s)),
                "{what}: {s} (deletionPolicy Delete) left on the servers with no Event saying so; \
                 events {events:?}"
            );
        }
    }
    assert!(
        events.is_empty(),
        "{what}: a deletion was dropped or forced: {events:?}"
    );
}

/// Deletes namespace `ns` as `kubectl delete namespace` does and waits until every Nats object
/// in it but the NatsClusters is gone, at most [`WITHIN`], then the namespace, at most
/// [`NAMESPACE_WITHIN`]; returns both times in seconds, or panics naming what is left.
pub async fn delete_namespace(client: &kube::Client, ns: &str, also: &[&str]) -> (f64, f64) {
    let api: Api<Namespace> = Api::all(client.clone());
    let t0 = Instant::now();
    api.delete(ns, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting namespace {ns}: {e}"));
    let objects = poll(
        &format!("the Nats objects of {ns} gone"),
        WITHIN,
        || async {
            let left: Vec<String> = nats_objects(client, &[ns])
                .await
                .into_iter()
                .filter(|o| !o.starts_with("NatsCluster "))
                .collect();
            if left.is_empty() {
                Ok(Some(()))
            } else {
                Err(left.join("\n"))
            }
        },
    )
    .await;
    let objects_took = t0.elapsed().as_secs_f64();
    if let Err(e) = objects {
        panic!(
            "{e}\n{}",
            e2e::on_node::describe(client, e2e::chart::NAMESPACE).await
        );
    }
    // When the pods (the servers', their lame duck in the preStop) are gone, beside the namespace:
    // the namespace controller does not watch pods, it looks again after its estimate of their
    // graceful termination.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    let pods_gone = poll(
        &format!("the pods of {ns} gone"),
        NAMESPACE_WITHIN,
        || async {
            match pods.list(&Default::default()).await {
                Ok(l) if l.items.is_empty() => Ok(Some(())),
                Ok(l) => Err(format!("{} pods left", l.items.len())),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
    eprintln!(
        "figure: {ns}: its pods gone in {:.1} s ({})",
        t0.elapsed().as_secs_f64(),
        if pods_gone.is_ok() { "all" } else { "not all" }
    );
    let gone = poll(
        &format!("namespace {ns} gone"),
        NAMESPACE_WITHIN,
        || async {
            match api.get_opt(ns).await {
                Ok(None) => Ok(Some(())),
                Ok(Some(n)) => Err(format!(
                    "still there: {:?}",
                    n.status.and_then(|s| s.conditions)
                )),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
    let took = t0.elapsed().as_secs_f64();
    if let Err(e) = gone {
        let mut spaces = vec![ns];
        spaces.extend_from_slice(also);
        panic!(
            "{e}\nNATS objects left after {took:.1} s:\n{}\n{}",
            nats_objects(client, &spaces).await.join("\n"),
            e2e::on_node::describe(client, e2e::chart::NAMESPACE).await
        );
    }
    (objects_took, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_delete_namespace_of_every_nats_kind_releases_every_object_within_60s() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let Some(installed) = install(dir.path()).await else {
        return;
    };
    let client = installed.node.client();
    let issuers = Issuers::default();
    let ready = apply_and_wait(&installed, &tenant(&installed, &issuers, false)).await;
    eprintln!("figure: story 02's tenant (one namespace) applied to Ready in {ready:.1} s");
    let streams = Streams::watch(&client, PLATFORM).await;
    let dropped = Dropped::watch(&client, &[PLATFORM]);
    let (objects, took) = delete_namespace(&client, PLATFORM, &[]).await;
    eprintln!(
        "figure: kubectl delete namespace {PLATFORM} (every kind): Nats objects but the NatsCluster gone in {objects:.1} s, the namespace in {took:.1} s"
    );
    nothing_silently_kept(&streams, &dropped, "one namespace", true);
    drop((streams, dropped));

    let left = installed.node.down().await;
    assert!(
        left.is_empty(),
        "the host differs from its baseline after down: {left:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_delete_namespace_of_a_team_then_of_the_platform_with_the_operator_elsewhere() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let Some(installed) = install(dir.path()).await else {
        return;
    };
    let client = installed.node.client();
    let issuers = Issuers::default();

    // The operator's objects in the platform's namespace, the team's in its own.
    let ready = apply_and_wait(&installed, &tenant(&installed, &issuers, true)).await;
    eprintln!("figure: the platform and team namespaces applied to Ready in {ready:.1} s");
    let streams = Streams::watch(&client, PLATFORM).await;
    let dropped = Dropped::watch(&client, &[PLATFORM, TEAM]);
    let (objects, took) = delete_namespace(&client, TEAM, &[PLATFORM]).await;
    eprintln!(
        "figure: kubectl delete namespace {TEAM} (account, users, connection, JetStream): Nats objects gone in {objects:.1} s, the namespace in {took:.1} s"
    );
    // The servers still run: their current answers list neither stream nor bucket.
    let cleared = poll(
        "the team's streams gone from the servers",
        Duration::from_secs(10),
        || async {
            let left = streams.left();
            if DELETED_STREAMS.iter().any(|s| left.contains(*s)) {
                Err(format!("left: {left:?}"))
            } else {
                Ok(Some(()))
            }
        },
    )
    .await;
    if cleared.is_err() {
        nothing_silently_kept(&streams, &dropped, "the team's namespace", false);
    }
    let (objects, took) = delete_namespace(&client, PLATFORM, &[]).await;
    eprintln!(
        "figure: kubectl delete namespace {PLATFORM} (operator, system account, NatsCluster): Nats objects but the NatsCluster gone in {objects:.1} s, the namespace in {took:.1} s"
    );
    nothing_silently_kept(&streams, &dropped, "team, then platform", true);
    drop((streams, dropped));

    let left = installed.node.down().await;
    assert!(
        left.is_empty(),
        "the host differs from its baseline after down: {left:#?}"
    );
}
