//! API tier: the cluster controller (its reconciler with the Kubernetes server lifecycle) against a
//! real kube-apiserver 1.20. There is no kubelet and no StatefulSet controller: the tests create
//! the servers' Pods themselves and write their Ready condition, and the status follows.

use std::collections::BTreeSet;
use std::time::Duration;

use cluster_controller::controller::{self, Settings};
use cluster_controller::objects::Owner;
use cluster_controller::objects::cluster::{ClusterObjects, Site, render_objects};
use cluster_controller::objects::configmap::REVISION_ANNOTATION;
use cluster_controller::objects::server_side_apply::FIELD_MANAGER;
use cluster_controller::plan::{ClusterInputs, KubernetesLayout, plan_servers};
use cluster_controller::server_lifecycle::kubernetes::{KubernetesServerLifecycle, SiteSettings};
use controller_kit::metrics::Metrics;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use nats_api::cluster::{NatsCluster, reason};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sim::apiserver::ApiServer;
use sim::control_plane::condition_of;
use sim::testkit::{AbortOnDrop, WAIT, apiserver_with, story_docs, wait_until, workspace_path};

const CONTROLLER_NS: &str = "nats-system";

pub(crate) struct Rig {
    // Field order is drop order: the controller stops before the apiserver.
    _controller: AbortOnDrop,
    pub(crate) api: ApiServer,
    /// The registry the controller exports to.
    pub(crate) metrics: Metrics,
}

impl Rig {
    pub(crate) fn client(&self) -> kube::Client {
        self.api.client()
    }
}

/// cert-manager's Certificate kind, schemaless: enough for the apiserver to store what the
/// controller renders for certManager listeners.
fn certificate_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "certificates.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io",
            "names": {"kind": "Certificate", "plural": "certificates", "singular": "certificate", "listKind": "CertificateList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .expect("a CRD")
}

pub(crate) async fn rig(namespaces: &[&str]) -> Rig {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
    let mut crds = nats_api::crds::all();
    crds.push(certificate_crd());
    let namespaces: Vec<&str> = namespaces.iter().copied().chain([CONTROLLER_NS]).collect();
    let api = apiserver_with(&crds, &namespaces).await;
    let client = api.client();
    let server_lifecycle = KubernetesServerLifecycle::new(
        client.clone(),
        SiteSettings {
            controller_namespace: CONTROLLER_NS.into(),
            cluster_domain: "cluster.local".into(),
        },
    );
    let metrics = Metrics::default();
    let ctx = controller::context(
        client,
        server_lifecycle,
        Settings {
            recheck: Duration::from_millis(500),
            ..Settings::default()
        },
        metrics.clone(),
    );
    Rig {
        _controller: AbortOnDrop::spawn(controller::run(ctx)),
        api,
        metrics,
    }
}

fn stories() -> std::path::PathBuf {
    workspace_path("docs/stories")
}

pub(crate) fn quickstart() -> Value {
    sim::testkit::story_object(
        "docs/stories/01-quickstart/01-natscluster.yaml",
        "NatsCluster",
    )
}

pub(crate) async fn create_cluster(client: &kube::Client, ns: &str, mut doc: Value) -> NatsCluster {
    doc["metadata"]["namespace"] = json!(ns);
    let c: NatsCluster = serde_json::from_value(doc).expect("a NatsCluster");
    Api::<NatsCluster>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &c)
        .await
        .unwrap_or_else(|e| panic!("NatsCluster {} refused: {e}", c.name_any()))
}

/// `c` as JSON, for the condition readers.
fn json_of(c: &NatsCluster) -> Value {
    serde_json::to_value(c).expect("a NatsCluster as JSON")
}

pub(crate) fn condition(c: &NatsCluster, type_: &str) -> Option<(String, String, String)> {
    condition_of(&json_of(c), type_)
}

/// Polls the NatsCluster until `check` holds; fails showing its last status.
pub(crate) async fn wait_cluster(
    client: &kube::Client,
    ns: &str,
    name: &str,
    what: &str,
    check: impl Fn(&NatsCluster) -> bool,
) -> NatsCluster {
    let api: Api<NatsCluster> = Api::namespaced(client.clone(), ns);
    let typed = |v: &Value| serde_json::from_value(v.clone()).expect("a NatsCluster");
    let v = sim::testkit::wait_for(&api, name, &format!("{ns}/{name}: {what}"), |v| {
        check(&typed(v))
    })
    .await;
    typed(&v)
}

pub(crate) fn is(c: &NatsCluster, type_: &str, status: &str, reason: &str) -> bool {
    sim::testkit::is(&json_of(c), type_, status, reason)
}

pub(crate) async fn names_of<K>(client: &kube::Client, ns: &str, selector: &str) -> BTreeSet<String>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(selector))
        .await
        .expect("list")
        .items
        .iter()
        .map(|o| o.name_any())
        .collect()
}

/// PodDisruptionBudgets as kube-apiserver 1.20 serves them (policy/v1beta1; the same fields).
fn pdb_api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = kube::api::ApiResource {
        group: "policy".into(),
        version: "v1beta1".into(),
        api_version: "policy/v1beta1".into(),
        kind: "PodDisruptionBudget".into(),
        plural: "poddisruptionbudgets".into(),
    };
    Api::namespaced_with(client.clone(), ns, &ar)
}

async fn pdb_names(client: &kube::Client, ns: &str, selector: &str) -> BTreeSet<String> {
    pdb_api(client, ns)
        .list(&ListParams::default().labels(selector))
        .await
        .expect("list")
        .items
        .iter()
        .map(|o| o.name_any())
        .collect()
}

/// What the pure core renders for the stored NatsCluster.
fn rendered(c: &NatsCluster) -> ClusterObjects {
    let owner = Owner::of(c).expect("owner");
    let plans = plan_servers(
        &ClusterInputs {
            name: &owner.name,
            spec: &c.spec,
            trust: None,
            account_preloads: vec![],
            leaf_remotes: vec![],
        },
        &KubernetesLayout {
            name: owner.name.clone(),
            namespace: owner.namespace.clone(),
            cluster_domain: "cluster.local".into(),
        },
    )
    .expect("plans");
    render_objects(
        &owner,
        &c.spec,
        &plans,
        Site {
            controller_namespace: CONTROLLER_NS,
            cluster_domain: "cluster.local",
        },
    )
    .expect("objects")
}

/// Every leaf of `sent` is in `got` with the same value (the apiserver adds defaults; it must
/// hold every field the controller rendered). Quantities come back canonical; strings of
/// quantities are compared loosely.
fn kept(sent: &Value, got: &Value, at: String, missing: &mut Vec<String>) {
    match (sent, got) {
        (Value::Object(s), Value::Object(g)) => {
            for (k, v) in s {
                match g.get(k) {
                    Some(gv) => kept(v, gv, format!("{at}.{k}"), missing),
                    None if v.is_null() => {}
                    None => missing.push(format!("{at}.{k}")),
                }
            }
        }
        (Value::Array(s), Value::Array(g)) => {
            if s.len() != g.len() {
                missing.push(format!("{at}: {} items, stored {}", s.len(), g.len()));
            }
            for (i, v) in s.iter().enumerate() {
                if let Some(gv) = g.get(i) {
                    kept(v, gv, format!("{at}[{i}]"), missing);
                }
            }
        }
        (Value::String(s), Value::String(g)) if s != g => {
            let quantity = |x: &str| x.chars().next().is_some_and(|c| c.is_ascii_digit());
            if !(quantity(s) && quantity(g)) {
                missing.push(format!("{at}: {s:?} stored as {g:?}"));
            }
        }
        (s, g) if s != g && !s.is_string() => missing.push(format!("{at}: {s} stored as {g}")),
        _ => {}
    }
}

/// The stored object holds every field of the rendered one, and is managed by the controller.
fn assert_applied<K: serde::Serialize + Resource>(kind: &str, rendered: &K, stored: &K) {
    let name = rendered.meta().name.clone().unwrap_or_default();
    let mut missing = vec![];
    let mut sent = serde_json::to_value(rendered).expect("json");
    if let Some(m) = sent.as_object_mut() {
        m.remove("status");
    }
    kept(
        &sent,
        &serde_json::to_value(stored).expect("json"),
        String::new(),
        &mut missing,
    );
    assert!(
        missing.is_empty(),
        "{kind}/{name} as stored differs from the rendered one: {missing:?}"
    );
    let managers: Vec<String> = stored
        .meta()
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.manager.clone())
        .collect();
    assert!(
        managers.iter().any(|m| m == FIELD_MANAGER),
        "{kind}/{name} managed by {managers:?}"
    );
}

/// A server's Pod as its StatefulSet would create it (labels and the revision annotation of the
/// template), written by the test in place of the StatefulSet controller.
pub(crate) async fn create_pod(client: &kube::Client, ns: &str, sts: &StatefulSet) -> Pod {
    let template = sts.spec.clone().expect("spec").template;
    let meta = template.metadata.clone().expect("template metadata");
    let image = template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .expect("an image");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{}-0", sts.name_any()),
            "namespace": ns,
            "labels": meta.labels,
            "annotations": meta.annotations,
        },
        "spec": {"containers": [{"name": "nats", "image": image}]},
    }))
    .expect("a pod");
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created")
}

async fn set_ready(client: &kube::Client, ns: &str, pod: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch_status(
            pod,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Ready", "status": status, "lastTransitionTime": "2026-11-20T10:00:00Z"}
            ]}})),
        )
        .await
        .unwrap_or_else(|e| panic!("pod {pod} status: {e}"));
}

fn revision_of(sts: &StatefulSet) -> Option<String> {
    sts.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(REVISION_ANNOTATION)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_yields_exactly_its_objects_and_status_follows_the_pods() {
    const NS: &str = "nats";
    let rig = rig(&[NS]).await;
    let client = rig.client();
    create_cluster(&client, NS, quickstart()).await;
    let selector = "app.kubernetes.io/instance=demo";

    // Exactly the objects of §4.1, and the controller's own route CA and certificate.
    let sts_names = wait_until(
        "three StatefulSets",
        WAIT,
        || names_of::<StatefulSet>(&client, NS, selector),
        |n| n.len() == 3,
    )
    .await;
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(sts_names, set(&["demo-0", "demo-1", "demo-2"]));
    assert_eq!(
        names_of::<ConfigMap>(&client, NS, selector).await,
        set(&["demo-0-config", "demo-1-config", "demo-2-config"])
    );
    assert_eq!(
        names_of::<Service>(&client, NS, selector).await,
        set(&["demo", "demo-headless"])
    );
    assert_eq!(pdb_names(&client, NS, selector).await, set(&["demo"]));
    assert_eq!(
        names_of::<NetworkPolicy>(&client, NS, selector).await,
        set(&["demo"])
    );
    assert_eq!(
        names_of::<Secret>(&client, NS, selector).await,
        set(&["demo-routes-ca", "demo-routes-tls"])
    );

    // Field by field: every object as stored holds every field the pure core renders.
    let stored = Api::<NatsCluster>::namespaced(client.clone(), NS)
        .get("demo")
        .await
        .expect("demo");
    let mut want = rendered(&stored);
    // Without a system user the route certificate's digest is part of each server's revision
    // (a rotation restarts): folded in from the Secret the controller issued, as it does.
    let routes = Api::<Secret>::namespaced(client.clone(), NS)
        .get("demo-routes-tls")
        .await
        .expect("demo-routes-tls");
    let listeners = std::collections::BTreeMap::from([(
        "routes",
        cluster_controller::controller::read::tls_files(&routes),
    )]);
    let material = cluster_controller::certificate_reload::restart_material(&listeners, false);
    assert!(material.is_some(), "route TLS is restart material here");
    let fold = |annotations: Option<&mut std::collections::BTreeMap<String, String>>| {
        if let Some(r) = annotations.and_then(|a| a.get_mut(REVISION_ANNOTATION)) {
            *r = cluster_controller::revision::with_restart_material(r, material.as_deref());
        }
    };
    for sts in &mut want.stateful_sets {
        fold(
            sts.spec
                .as_mut()
                .and_then(|s| s.template.metadata.as_mut())
                .and_then(|m| m.annotations.as_mut()),
        );
    }
    for cm in &mut want.config_maps {
        fold(cm.metadata.annotations.as_mut());
    }
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let cm_api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for (sts, cm) in want.stateful_sets.iter().zip(&want.config_maps) {
        let got = sts_api.get(&sts.name_any()).await.expect("sts");
        assert_applied("StatefulSet", sts, &got);
        assert_applied(
            "ConfigMap",
            cm,
            &cm_api.get(&cm.name_any()).await.expect("cm"),
        );
    }
    let svc: Api<Service> = Api::namespaced(client.clone(), NS);
    assert_applied(
        "Service",
        &want.client_service,
        &svc.get("demo").await.expect("svc"),
    );
    assert_applied(
        "Service",
        &want.headless_service,
        &svc.get("demo-headless").await.expect("svc"),
    );
    let pdb = pdb_api(&client, NS).get("demo").await.expect("pdb");
    let mut rendered_pdb = serde_json::to_value(&want.pod_disruption_budget).expect("json");
    rendered_pdb["apiVersion"] = json!("policy/v1beta1");
    let rendered_pdb: DynamicObject = serde_json::from_value(rendered_pdb).expect("pdb");
    assert_applied("PodDisruptionBudget", &rendered_pdb, &pdb);
    let np = Api::<NetworkPolicy>::namespaced(client.clone(), NS)
        .get("demo")
        .await
        .expect("np");
    assert_applied(
        "NetworkPolicy",
        want.network_policy.as_ref().expect("a NetworkPolicy"),
        &np,
    );

    // The story's facts, read off what the apiserver stored.
    let demo2 = serde_json::to_value(sts_api.get("demo-2").await.expect("sts")).expect("json");
    assert_eq!(demo2["spec"]["replicas"], 1);
    assert_eq!(demo2["spec"]["serviceName"], "demo-headless");
    assert_eq!(
        demo2["metadata"]["ownerReferences"][0]["kind"],
        "NatsCluster"
    );
    assert_eq!(demo2["metadata"]["ownerReferences"][0]["controller"], true);
    let pod = &demo2["spec"]["template"]["spec"];
    assert_eq!(pod["terminationGracePeriodSeconds"], 300);
    assert_eq!(pod["automountServiceAccountToken"], false);
    let images: Vec<&str> = pod["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .filter_map(|c| c["image"].as_str())
        .collect();
    assert!(
        images.iter().all(|i| i.contains("@sha256:")),
        "every image pinned by digest: {images:?}"
    );
    let cm2 = cm_api.get("demo-2-config").await.expect("cm");
    let conf = &cm2.data.as_ref().expect("data")["nats.conf"];
    assert!(
        conf.contains("server_name: demo-2") || conf.contains("server_name: \"demo-2\""),
        "{conf}"
    );
    assert_eq!(
        revision_of(&sts_api.get("demo-2").await.expect("sts")),
        cm2.annotations().get(REVISION_ANNOTATION).cloned(),
        "the pod template names its ConfigMap's revision"
    );
    assert_eq!(pdb.data["spec"]["maxUnavailable"], 1);

    // No pods yet: not Ready, nothing to progress, endpoints and one entry per server.
    let c = wait_cluster(
        &client,
        NS,
        "demo",
        "Ready=False QuorumUnavailable, UpToDate",
        |c| {
            is(c, "Ready", "False", reason::QUORUM_UNAVAILABLE)
                && is(c, "Progressing", "False", reason::UP_TO_DATE)
        },
    )
    .await;
    let st = c.status.clone().expect("status");
    assert_eq!(st.replicas, Some(3));
    assert_eq!(st.ready_replicas, Some(0));
    assert_eq!(
        st.servers
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        vec!["demo-0", "demo-1", "demo-2"]
    );
    let endpoints = st.endpoints.expect("endpoints");
    assert_eq!(
        endpoints.client.as_deref(),
        Some("nats://demo.nats.svc:4222")
    );
    assert_eq!(
        endpoints.monitor.as_deref(),
        Some("http://demo-headless.nats.svc:8222")
    );
    assert!(st.config.and_then(|c| c.revision).is_some());
    assert!(is(&c, "Settled", "False", reason::OBSERVATION_FAILED));

    // The test plays kubelet: pods with the templates' labels and revision, then Ready.
    for i in 0..3 {
        let sts = sts_api.get(&format!("demo-{i}")).await.expect("sts");
        create_pod(&client, NS, &sts).await;
        set_ready(&client, NS, &format!("demo-{i}-0"), true).await;
    }
    let c = wait_cluster(&client, NS, "demo", "Ready=True AllServersReady", |c| {
        is(c, "Ready", "True", reason::ALL_SERVERS_READY)
    })
    .await;
    let st = c.status.clone().expect("status");
    assert_eq!(st.ready_replicas, Some(3));
    for (i, s) in st.servers.iter().enumerate() {
        assert!(s.ready, "{}", s.name);
        let sts = sts_api.get(&format!("demo-{i}")).await.expect("sts");
        assert_eq!(s.config_revision, revision_of(&sts), "{}", s.name);
    }
    // Servers Ready but unreachable from here (no cluster DNS): Settled says why, not True.
    assert!(
        condition(&c, "Settled").is_some_and(|(s, _, _)| s == "False"),
        "{:?}",
        condition(&c, "Settled")
    );

    set_ready(&client, NS, "demo-2-0", false).await;
    wait_cluster(&client, NS, "demo", "Ready=True QuorumAvailable", |c| {
        is(c, "Ready", "True", reason::QUORUM_AVAILABLE)
            && c.status.as_ref().and_then(|s| s.ready_replicas) == Some(2)
    })
    .await;
    set_ready(&client, NS, "demo-1-0", false).await;
    wait_cluster(&client, NS, "demo", "Ready=False QuorumUnavailable", |c| {
        is(c, "Ready", "False", reason::QUORUM_UNAVAILABLE)
    })
    .await;

    // A change that restarts: one server at a time, highest ordinal first, only while every pod
    // is Ready.
    let before: Vec<Option<String>> = {
        let mut v = vec![];
        for i in 0..3 {
            v.push(revision_of(
                &sts_api.get(&format!("demo-{i}")).await.expect("sts"),
            ));
        }
        v
    };
    Api::<NatsCluster>::namespaced(client.clone(), NS)
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"limits": {"memory": "8Gi"}, "requests": {"memory": "8Gi"}}}})),
        )
        .await
        .expect("memory raised");
    let c = wait_cluster(
        &client,
        NS,
        "demo",
        "the rollout waiting for Ready pods",
        |c| {
            is(c, "Progressing", "True", reason::ROLLING_RESTART)
                && c.metadata.generation == c.status.as_ref().and_then(|s| s.observed_generation)
        },
    )
    .await;
    let (_, _, message) = condition(&c, "Progressing").expect("Progressing");
    assert!(
        message.contains("demo-1-0") || message.contains("demo-1"),
        "{message}"
    );
    let gate = c
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.gate.clone())
        .expect("status.rollout.gate while the step waits");
    assert!(
        gate.waiting_for
            .as_deref()
            .is_some_and(|w| w.contains("demo-1")),
        "{gate:?}"
    );
    assert!(gate.since.is_some());
    for (i, rev) in before.iter().enumerate() {
        assert_eq!(
            &revision_of(&sts_api.get(&format!("demo-{i}")).await.expect("sts")),
            rev,
            "no step while pods are not Ready"
        );
    }
    set_ready(&client, NS, "demo-1-0", true).await;
    set_ready(&client, NS, "demo-2-0", true).await;
    // Every pod Ready, but the servers cannot be asked here (no cluster DNS): the gate stays
    // closed on Settled and the revisions they do not report, and nothing steps on its own.
    let c = wait_cluster(
        &client,
        NS,
        "demo",
        "the gate closed on what is not observed",
        |c| {
            c.status
                .as_ref()
                .and_then(|s| s.rollout.as_ref())
                .and_then(|r| r.gate.as_ref())
                .and_then(|g| g.waiting_for.as_deref())
                .is_some_and(|w| !w.contains("not Ready") && w.contains("not observed"))
        },
    )
    .await;
    let since = c
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.gate.as_ref())
        .and_then(|g| g.since.clone());
    assert_eq!(
        since, gate.since,
        "the gate's since is kept while it stays closed"
    );
    for (i, rev) in before.iter().enumerate() {
        assert_eq!(
            &revision_of(&sts_api.get(&format!("demo-{i}")).await.expect("sts")),
            rev,
            "no step through a closed gate"
        );
    }

    // force-step restarts the named waiting server through the closed gate, and is cleared
    // once read.
    let clusters: Api<NatsCluster> = Api::namespaced(client.clone(), NS);
    let force = |server: &'static str| json!({"metadata": {"annotations": {nats_api::cluster::annotation::FORCE_STEP: server}}});
    clusters
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(force("demo-2")),
        )
        .await
        .expect("force-step");
    wait_until(
        "demo-2 forced first",
        WAIT,
        || async { revision_of(&sts_api.get("demo-2").await.expect("sts")) },
        |r| *r != before[2],
    )
    .await;
    wait_cluster(&client, NS, "demo", "force-step cleared", |c| {
        !c.annotations()
            .contains_key(nats_api::cluster::annotation::FORCE_STEP)
    })
    .await;
    for (i, rev) in before.iter().enumerate().take(2) {
        assert_eq!(
            &revision_of(&sts_api.get(&format!("demo-{i}")).await.expect("sts")),
            rev,
            "demo-{i} waits its turn"
        );
    }
    let c = wait_cluster(&client, NS, "demo", "status.config says how and why", |c| {
        c.status
            .as_ref()
            .and_then(|s| s.config.as_ref())
            .is_some_and(|c| c.restart_reason.is_some())
    })
    .await;
    let st = c.status.expect("status");
    let config = st.config.expect("status.config");
    assert_eq!(
        config.applied_by,
        Some(nats_api::cluster::ConfigAppliedBy::Restart)
    );
    let rollout = st.rollout.expect("rollout");
    let at = |s: &str| rollout.pending.iter().position(|p| p == s);
    assert!(
        at("demo-1").is_some() && at("demo-1") < at("demo-0"),
        "next step first: {:?}",
        rollout.pending
    );
    // The pending gauge counts the servers still off the target revision, as status.rollout does
    // (status is written before the gauge, so poll for it).
    let stepping = rollout.pending.len() + usize::from(rollout.current.is_some());
    assert!(stepping > 0, "a rollout pending: {rollout:?}");
    let series =
        r#"nats_operator_rollout_pending_servers{namespace="NS",name="demo"}"#.replace("NS", NS);
    wait_until(
        "the pending gauge exported",
        WAIT,
        || async { rig.metrics.render() },
        |text| {
            text.lines().any(|l| {
                l.strip_prefix(series.as_str())
                    .is_some_and(|v| v.trim().parse::<f64>().is_ok_and(|n| n > 0.0))
            })
        },
    )
    .await;

    // The StatefulSet controller's part, played by the test: demo-2's pod comes back on the new
    // revision; a force-step naming a server that does not wait (demo-2) steps nothing and is
    // cleared; then demo-1 forced is next.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.delete("demo-2-0", &Default::default())
        .await
        .expect("old pod deleted");
    wait_until(
        "demo-2-0 gone",
        WAIT,
        || async { pods.get_opt("demo-2-0").await.expect("read") },
        |p| p.is_none(),
    )
    .await;
    create_pod(&client, NS, &sts_api.get("demo-2").await.expect("sts")).await;
    set_ready(&client, NS, "demo-2-0", true).await;
    clusters
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(force("demo-2")),
        )
        .await
        .expect("force-step");
    wait_cluster(&client, NS, "demo", "force-step cleared", |c| {
        !c.annotations()
            .contains_key(nats_api::cluster::annotation::FORCE_STEP)
    })
    .await;
    assert_eq!(
        revision_of(&sts_api.get("demo-1").await.expect("sts")),
        before[1],
        "nothing stepped for a server that does not wait"
    );
    clusters
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(force("demo-1")),
        )
        .await
        .expect("force-step");
    wait_until(
        "demo-1 restarted second",
        WAIT,
        || async { revision_of(&sts_api.get("demo-1").await.expect("sts")) },
        |r| *r != before[1],
    )
    .await;
    assert_eq!(
        revision_of(&sts_api.get("demo-0").await.expect("sts")),
        before[0],
        "demo-0 last"
    );
}

/// A new image with the config unchanged is a rollout step like any restart: the servers'
/// StatefulSets keep their pod templates (on Kubernetes a changed template restarts the pod at
/// once) until a step writes one — here `force-step`, the gate being closed without cluster DNS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_image_restarts_no_server_outside_a_step() {
    const NS: &str = "nats";
    let (_rig, client, sts_api, servers) = quickstart_running(NS).await;
    let before: Vec<_> = servers
        .iter()
        .map(|sts| (revision_of(sts), image_of(sts)))
        .collect();
    let clusters: Api<NatsCluster> = Api::namespaced(client.clone(), NS);
    let digest = format!("sha256:{}", "7".repeat(64));
    clusters
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"image": {"digest": digest}}})),
        )
        .await
        .expect("a new image");
    // Every server pending under a new revision whose config part is unchanged.
    wait_cluster(&client, NS, "demo", "three servers pending", |c| {
        c.status
            .as_ref()
            .and_then(|s| s.rollout.as_ref())
            .is_some_and(|r| r.pending.len() == 3)
            && c.status.as_ref().and_then(|s| s.observed_generation) == c.metadata.generation
    })
    .await;
    for (i, (rev, image)) in before.iter().enumerate() {
        let sts = sts_api.get(&format!("demo-{i}")).await.expect("sts");
        assert_eq!(
            &revision_of(&sts),
            rev,
            "demo-{i} not restarted outside a step"
        );
        assert_eq!(
            &image_of(&sts),
            image,
            "demo-{i} keeps its image until its step"
        );
        let (config, _) = rev
            .as_deref()
            .and_then(|r| r.split_once('-'))
            .expect("<config>-<workload>");
        let cm = Api::<ConfigMap>::namespaced(client.clone(), NS)
            .get(&format!("demo-{i}-config"))
            .await
            .expect("ConfigMap");
        assert!(
            cm.annotations()[REVISION_ANNOTATION].starts_with(config),
            "the config itself is unchanged"
        );
    }
    clusters
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {nats_api::cluster::annotation::FORCE_STEP: "demo-2"}}})),
        )
        .await
        .expect("force-step");
    let stepped = wait_until(
        "demo-2 stepped onto the new image",
        WAIT,
        || async { sts_api.get("demo-2").await.expect("sts") },
        |sts| image_of(sts).is_some_and(|i| i.ends_with(&digest)),
    )
    .await;
    assert_ne!(
        revision_of(&stepped),
        before[2].0,
        "a new revision names it"
    );
    for (i, (rev, image)) in before.iter().enumerate().take(2) {
        let sts = sts_api.get(&format!("demo-{i}")).await.expect("sts");
        assert_eq!(&revision_of(&sts), rev, "demo-{i} waits its turn");
        assert_eq!(&image_of(&sts), image, "demo-{i} waits its turn");
    }
}

/// Without a system user to reload them, a reissued route certificate is a restart step: every
/// server pending under a revision whose config part is unchanged (the certificates' digest is
/// in the workload part), and no StatefulSet's pod template rewritten outside a step — on
/// Kubernetes that would restart every pod at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_system_user_a_reissued_route_certificate_is_a_restart_step() {
    const NS: &str = "nats";
    let (_rig, client, sts_api, servers) = quickstart_running(NS).await;
    let before: Vec<Option<String>> = servers.iter().map(revision_of).collect();
    let target_of = |c: &NatsCluster| {
        c.status
            .as_ref()
            .and_then(|s| s.rollout.as_ref())
            .and_then(|r| r.target_revision.clone())
    };
    let at_rest = wait_cluster(&client, NS, "demo", "a target revision", |c| {
        target_of(c).is_some()
    })
    .await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    age_route_certificate(&secrets).await;
    let c = wait_cluster(&client, NS, "demo", "three servers pending", |c| {
        c.status
            .as_ref()
            .and_then(|s| s.rollout.as_ref())
            .is_some_and(|r| r.pending.len() == 3)
    })
    .await;
    assert_ne!(
        target_of(&c),
        target_of(&at_rest),
        "the certificates moved the target revision"
    );
    for (i, rev) in before.iter().enumerate() {
        let sts = sts_api.get(&format!("demo-{i}")).await.expect("sts");
        assert_eq!(
            &revision_of(&sts),
            rev,
            "demo-{i} not restarted outside a step"
        );
        let cm = Api::<ConfigMap>::namespaced(client.clone(), NS)
            .get(&format!("demo-{i}-config"))
            .await
            .expect("ConfigMap");
        let (config, _) = rev
            .as_deref()
            .and_then(|r| r.split_once('-'))
            .expect("<config>-<workload>");
        assert!(
            cm.annotations()[REVISION_ANNOTATION].starts_with(config),
            "the config itself is unchanged"
        );
    }
}

/// Records the route certificate of `demo` as two thirds through its year, so the controller
/// reissues it now.
async fn age_route_certificate(secrets: &Api<Secret>) {
    let now = time::OffsetDateTime::now_utc();
    let annotations = cluster_controller::route_ca::validity_annotations(
        now - time::Duration::days(300),
        now + time::Duration::days(65),
    );
    secrets
        .patch(
            "demo-routes-tls",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .expect("validity aged");
}

/// A larger `jetstream.volumeClaimTemplate` calls for replacing every server, one step at a
/// time behind the gate (closed here: no cluster DNS to observe the servers through), and
/// never for rewriting a StatefulSet's claim template, which the apiserver would refuse: each
/// keeps the claims it was created with until its replacement recreates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_claim_template_replaces_servers_and_never_rewrites_a_statefulsets_claims() {
    const NS: &str = "nats";
    let (_rig, client, sts_api, _) = quickstart_running(NS).await;
    Api::<NatsCluster>::namespaced(client.clone(), NS)
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"jetstream": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "40Gi"}}}}}}})),
        )
        .await
        .expect("a larger volume");
    let c = wait_cluster(&client, NS, "demo", "every server pending", |c| {
        c.status.as_ref().and_then(|s| s.observed_generation) == c.metadata.generation
            && c.status
                .as_ref()
                .and_then(|s| s.rollout.as_ref())
                .is_some_and(|r| r.pending.len() == 3)
    })
    .await;
    assert!(
        !is(&c, "Ready", "False", reason::RECONCILE_FAILED),
        "no write refused: {:?}",
        condition(&c, "Ready")
    );
    for i in 0..3 {
        let sts = sts_api.get(&format!("demo-{i}")).await.expect("sts");
        let storage = sts
            .spec
            .as_ref()
            .and_then(|s| s.volume_claim_templates.as_ref())
            .and_then(|v| v.first())
            .and_then(|c| c.spec.as_ref())
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone());
        assert_eq!(
            storage.as_deref(),
            Some("20Gi"),
            "demo-{i} keeps its claims"
        );
    }
}

/// The quickstart NatsCluster in `ns` with its three StatefulSets and a Ready pod for each, as
/// the StatefulSet controller and kubelet would make them.
async fn quickstart_running(ns: &str) -> (Rig, kube::Client, Api<StatefulSet>, Vec<StatefulSet>) {
    let rig = rig(&[ns]).await;
    let client = rig.client();
    create_cluster(&client, ns, quickstart()).await;
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    wait_until(
        "three StatefulSets",
        WAIT,
        || names_of::<StatefulSet>(&client, ns, "app.kubernetes.io/instance=demo"),
        |n| n.len() == 3,
    )
    .await;
    let mut servers = vec![];
    for i in 0..3 {
        let sts = sts_api.get(&format!("demo-{i}")).await.expect("sts");
        create_pod(&client, ns, &sts).await;
        set_ready(&client, ns, &format!("demo-{i}-0"), true).await;
        servers.push(sts);
    }
    (rig, client, sts_api, servers)
}

fn image_of(sts: &StatefulSet) -> Option<String> {
    sts.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "nats")?
        .image
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_object_of_a_rendered_name_is_named_and_left_untouched() {
    const NS: &str = "foreign";
    let rig = rig(&[NS]).await;
    let client = rig.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut foreign = ConfigMap::default();
    foreign.metadata.name = Some("demo-1-config".into());
    foreign.data = Some([("keep".to_string(), "me".to_string())].into());
    let foreign = cms
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign ConfigMap");

    create_cluster(&client, NS, quickstart()).await;
    let c = wait_cluster(&client, NS, "demo", "Ready=False ReconcileFailed", |c| {
        is(c, "Ready", "False", reason::RECONCILE_FAILED)
    })
    .await;
    let (_, _, message) = condition(&c, "Ready").expect("Ready");
    assert!(message.contains("ConfigMap/demo-1-config"), "{message}");

    let after = cms.get("demo-1-config").await.expect("still there");
    assert_eq!(after.data, foreign.data, "its data untouched");
    assert!(after.owner_references().is_empty(), "not adopted");
    assert_eq!(
        after.resource_version(),
        foreign.resource_version(),
        "not written at all"
    );
    let sets = names_of::<StatefulSet>(&client, NS, "app.kubernetes.io/instance=demo").await;
    assert!(
        !sets.contains("demo-1"),
        "the server whose config is in the way is held: {sets:?}"
    );
    assert!(
        sets.contains("demo-0") && sets.contains("demo-2"),
        "{sets:?}"
    );
}

fn spec_doc(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "cluster.nats.mikluko.io/v1beta1",
        "kind": "NatsCluster",
        "metadata": {"name": name},
        "spec": spec,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_gateway_without_tls_gateway_certificate_trust_and_ungranted_leaf_remotes() {
    const NS: &str = "refusals";
    let rig = rig(&[NS, "hubs", "closed"]).await;
    let client = rig.client();
    let gateway = |tls: Option<Value>| {
        let mut g = json!({"discovery": "Explicit", "remotes": [{"name": "west", "url": "nats://west.example:7222"}]});
        if let Some(t) = tls {
            g["tls"] = t;
        }
        g
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = |name: &str, keys: &[&str]| {
        let data: serde_json::Map<String, Value> = keys
            .iter()
            .map(|k| (k.to_string(), json!("cGVt")))
            .collect();
        serde_json::from_value::<Secret>(json!({"metadata": {"name": name}, "data": data}))
            .expect("secret")
    };
    secrets
        .create(
            &PostParams::default(),
            &secret("gw-tls", &["tls.crt", "tls.key"]),
        )
        .await
        .expect("gateway Secret without ca.crt");
    let trusts: Api<nats_api::nats::NatsOperatorTrust> = Api::namespaced(client.clone(), NS);
    trusts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "nats.mikluko.io/v1beta1",
                "kind": "NatsOperatorTrust",
                "metadata": {"name": "garbled"},
                "spec": {"operatorJWT": "not.a.jwt", "systemAccountJWT": "not.a.jwt"},
            }))
            .expect("trust"),
        )
        .await
        .expect("a literal trust holding no valid JWT");

    let base = |extra: Value| {
        let mut s = json!({"version": "2.15.0", "replicas": 1});
        if let (Some(m), Some(e)) = (s.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        s
    };
    for (name, spec) in [
        ("gw-plain", base(json!({"gateway": gateway(None)}))),
        (
            "gw-noca",
            base(json!({"gateway": gateway(Some(json!({"secretRef": {"name": "gw-tls"}})))})),
        ),
        (
            "no-trust",
            base(json!({"auth": {"trustRef": {"name": "absent"}}})),
        ),
        (
            "bad-trust",
            base(json!({"auth": {"trustRef": {"name": "garbled"}}})),
        ),
    ] {
        create_cluster(&client, NS, spec_doc(name, spec)).await;
    }

    let c = wait_cluster(&client, NS, "gw-plain", "GatewayWithoutTLS", |c| {
        is(c, "Ready", "False", reason::GATEWAY_WITHOUT_TLS)
            && is(c, "Progressing", "False", reason::GATEWAY_WITHOUT_TLS)
    })
    .await;
    assert!(
        condition(&c, "Ready").is_some_and(|(_, _, m)| m.contains("--allow-gateway-without-tls"))
    );
    let c = wait_cluster(&client, NS, "gw-noca", "GatewayCertificateNotReady", |c| {
        is(
            c,
            "Progressing",
            "True",
            reason::GATEWAY_CERTIFICATE_NOT_READY,
        )
    })
    .await;
    assert!(
        condition(&c, "Progressing")
            .is_some_and(|(_, _, m)| m.contains("gw-tls") && m.contains("ca.crt"))
    );
    let c = wait_cluster(&client, NS, "no-trust", "TrustNotFound", |c| {
        is(c, "Progressing", "True", reason::TRUST_NOT_FOUND)
    })
    .await;
    assert!(condition(&c, "Progressing").is_some_and(|(_, _, m)| m.contains("absent")));
    wait_cluster(&client, NS, "bad-trust", "TrustInvalid", |c| {
        is(c, "Progressing", "True", reason::TRUST_INVALID)
    })
    .await;

    // Nothing is rendered for a held or refused NatsCluster.
    for name in ["gw-plain", "gw-noca", "no-trust", "bad-trust"] {
        let sel = format!("app.kubernetes.io/instance={name}");
        assert!(
            names_of::<StatefulSet>(&client, NS, &sel).await.is_empty(),
            "{name}"
        );
        assert!(
            names_of::<ConfigMap>(&client, NS, &sel).await.is_empty(),
            "{name}"
        );
    }

    // Leaf remotes: one NatsConnection a grant admits (its creds projected), one no grant
    // admits — rendered out of the config and the Secret, and named by LeafnodesConnected.
    for (ns, name, url) in [
        ("hubs", "hub", "nats://hub.example:7422"),
        ("closed", "other", "nats://other.example:7422"),
    ] {
        let conn: nats_api::nats::NatsConnection = serde_json::from_value(json!({
            "apiVersion": "nats.mikluko.io/v1beta1",
            "kind": "NatsConnection",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"servers": [url], "credentials": {"secretKeyRef": {"name": format!("{name}-creds")}}},
        }))
        .expect("a NatsConnection");
        Api::<nats_api::nats::NatsConnection>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &conn)
            .await
            .expect("NatsConnection");
        let creds: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-creds")},
            "stringData": {"user.creds": format!("creds of {name}")},
        }))
        .expect("secret");
        Api::<Secret>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &creds)
            .await
            .expect("creds Secret");
    }
    let grant: nats_api::nats::NatsReferenceGrant = serde_json::from_value(json!({
        "apiVersion": "nats.mikluko.io/v1beta1",
        "kind": "NatsReferenceGrant",
        "metadata": {"name": "edges", "namespace": "hubs"},
        "spec": {
            "from": [{"group": "cluster.nats.mikluko.io", "kind": "NatsCluster", "namespace": NS}],
            "to": [{"group": "nats.mikluko.io", "kind": "NatsConnection", "name": "hub"}],
        },
    }))
    .expect("a grant");
    Api::<nats_api::nats::NatsReferenceGrant>::namespaced(client.clone(), "hubs")
        .create(&PostParams::default(), &grant)
        .await
        .expect("grant");
    create_cluster(
        &client,
        NS,
        spec_doc(
            "edge",
            base(json!({"leafRemotes": [
                {"connectionRef": {"name": "hub", "namespace": "hubs"}},
                {"connectionRef": {"name": "other", "namespace": "closed"}},
            ]})),
        ),
    )
    .await;
    let c = wait_cluster(
        &client,
        NS,
        "edge",
        "LeafnodesConnected RemoteNotPermitted",
        |c| {
            is(
                c,
                "LeafnodesConnected",
                "False",
                reason::REMOTE_NOT_PERMITTED,
            )
        },
    )
    .await;
    let (_, _, message) = condition(&c, "LeafnodesConnected").expect("LeafnodesConnected");
    assert!(message.contains("closed/other"), "{message}");
    assert!(!message.contains("hubs/hub"), "{message}");
    let leaf = wait_until(
        "the leaf remotes Secret",
        WAIT,
        || async { secrets.get_opt("edge-leaf-remotes").await.expect("read") },
        |s| s.is_some(),
    )
    .await
    .expect("Secret");
    let keys: Vec<String> = leaf.data.clone().unwrap_or_default().into_keys().collect();
    assert_eq!(
        keys,
        vec!["remote-0.creds"],
        "only the admitted remote's creds"
    );
    assert_eq!(
        leaf.data.unwrap_or_default()["remote-0.creds"].0,
        b"creds of hub".to_vec()
    );
    let conf = wait_until(
        "edge-0's config",
        WAIT,
        || async {
            Api::<ConfigMap>::namespaced(client.clone(), NS)
                .get_opt("edge-0-config")
                .await
                .expect("read")
        },
        |c| c.is_some(),
    )
    .await
    .and_then(|c| c.data)
    .expect("data")["nats.conf"]
        .clone();
    assert!(conf.contains("hub.example"), "{conf}");
    assert!(!conf.contains("other.example"), "{conf}");
    let statuses = c.status.expect("status").leaf_remotes;
    assert_eq!(
        statuses
            .iter()
            .map(|r| (
                r.connection_namespace.as_str(),
                r.connection_name.as_str(),
                r.connected
            ))
            .collect::<Vec<_>>(),
        vec![("hubs", "hub", 0), ("closed", "other", 0)]
    );

    // The gateway Secret gains its ca.crt: the servers are no longer held.
    secrets
        .patch(
            "gw-tls",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"ca.crt": "cGVt"}})),
        )
        .await
        .expect("ca.crt added");
    wait_until(
        "gw-noca's StatefulSet once the Secret holds ca.crt",
        WAIT,
        || names_of::<StatefulSet>(&client, NS, "app.kubernetes.io/instance=gw-noca"),
        |n| n.contains("gw-noca-0"),
    )
    .await;
    wait_cluster(&client, NS, "gw-noca", "no longer held", |c| {
        condition(c, "Progressing")
            .is_some_and(|(_, r, _)| r != reason::GATEWAY_CERTIFICATE_NOT_READY)
    })
    .await;
}

/// The reasons a story NatsCluster may be held by here, where no auth controller mirrors trusts
/// or writes system users' creds, and no cert-manager issues certificates.
const HOLDS: &[&str] = &[
    reason::TRUST_NOT_FOUND,
    reason::TRUST_NOT_READY,
    reason::TRUST_INVALID,
    reason::ACCOUNT_TRUST_NOT_READY,
    reason::ACCOUNT_TRUST_INVALID,
    reason::GATEWAY_CERTIFICATE_NOT_READY,
    reason::UNSUPPORTED_SPEC,
    reason::SECRET_NOT_FOUND,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_story_natscluster_yields_its_objects_or_names_what_holds_it() {
    // Each story file's NatsClusters, with the trusts, Secrets, connections and grants of its
    // whole story beside them, under namespaces of their own (`s<i>-<namespace>`, references
    // rewritten alike), so names shared between stories and files do not collide.
    let mut files = vec![];
    for dir in std::fs::read_dir(stories()).expect("stories").flatten() {
        for f in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = f.path();
            if p.extension().and_then(|e| e.to_str()) == Some("yaml")
                && story_docs(&p)
                    .iter()
                    .any(|d| d["kind"] == "NatsCluster" && d.get("spec").is_some())
            {
                files.push(p);
            }
        }
    }
    files.sort();
    const SUPPORTING: &[&str] = &[
        "NatsOperatorTrust",
        "NatsAccountTrust",
        "Secret",
        "NatsConnection",
        "NatsReferenceGrant",
    ];
    fn renamespace(v: &mut Value, prefix: &str) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    match x {
                        Value::String(ns) if k == "namespace" => *ns = format!("{prefix}-{ns}"),
                        _ => renamespace(x, prefix),
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| renamespace(x, prefix)),
            _ => {}
        }
    }
    let mut plan: Vec<(std::path::PathBuf, Vec<Value>)> = vec![];
    let mut namespaces = BTreeSet::new();
    for (i, f) in files.iter().enumerate() {
        let prefix = format!("s{i}");
        let dir = f.parent().expect("a story directory");
        let mut siblings: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
            .expect("story")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("yaml"))
            .collect();
        siblings.sort();
        // The file's own supporting documents last: where a story names one object twice (the
        // same trust in two Kubernetes clusters), the one beside this NatsCluster wins.
        let mut docs: Vec<Value> = siblings
            .iter()
            .filter(|p| *p != f)
            .chain(std::iter::once(f))
            .flat_map(story_docs)
            .filter(|d| SUPPORTING.contains(&d["kind"].as_str().unwrap_or_default()))
            .collect();
        let key = |d: &Value| {
            format!(
                "{}/{}/{}",
                d["kind"], d["metadata"]["namespace"], d["metadata"]["name"]
            )
        };
        let mut seen = BTreeSet::new();
        docs.reverse();
        docs.retain(|d| seen.insert(key(d)));
        docs.reverse();
        docs.extend(
            story_docs(f)
                .into_iter()
                .filter(|d| d["kind"] == "NatsCluster" && d.get("spec").is_some()),
        );
        for d in docs.iter_mut() {
            if d["metadata"].get("namespace").is_none() {
                d["metadata"]["namespace"] = json!("default");
            }
            renamespace(d, &prefix);
            namespaces.insert(
                d["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        plan.push((f.clone(), docs));
    }
    let ns_refs: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    let rig = rig(&ns_refs).await;
    let client = rig.client();
    let mut clusters = vec![];
    for (f, docs) in plan {
        for doc in docs {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            let ns = doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let name = doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if kind == "NatsCluster" {
                // cert-manager's part: the gateway certificate's Secret, with its CA. Issued
                // before the NatsCluster exists, so no first pass is held for it and a held
                // status below is the story's own.
                let c: NatsCluster = serde_json::from_value(doc.clone()).expect("NatsCluster");
                if let Some(tls) = c.spec.gateway.as_ref().and_then(|g| g.tls.as_ref()) {
                    let secret =
                        cluster_controller::objects::tls_secret_name(&name, "gateway", Some(tls));
                    let issued: Secret = serde_json::from_value(json!({
                        "metadata": {"name": secret},
                        "stringData": {"tls.crt": "pem", "tls.key": "pem", "ca.crt": "pem"},
                    }))
                    .expect("secret");
                    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
                    if secrets.get_opt(&secret).await.expect("read").is_none() {
                        secrets
                            .create(&PostParams::default(), &issued)
                            .await
                            .expect("gateway Secret");
                    }
                }
            }
            if kind == "NatsCluster" {
                // The auth controller's part: the system user's creds Secret (never dialed here:
                // no server runs), so a held status below is the story's own.
                let c: NatsCluster = serde_json::from_value(doc.clone()).expect("NatsCluster");
                if let Some(creds) = c
                    .spec
                    .auth
                    .as_ref()
                    .and_then(|a| a.system_credentials.as_ref())
                {
                    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
                    let name = &creds.secret_key_ref.name;
                    if secrets.get_opt(name).await.expect("read").is_none() {
                        let written: Secret = serde_json::from_value(json!({
                            "metadata": {"name": name},
                            "stringData": {"user.creds": "creds"},
                        }))
                        .expect("secret");
                        secrets
                            .create(&PostParams::default(), &written)
                            .await
                            .expect("system creds Secret");
                    }
                }
            }
            sim::testkit::apply(&client, &doc)
                .await
                .unwrap_or_else(|e| panic!("{f:?} {ns}: {e}"));
            if kind == "NatsCluster" {
                clusters.push((f.clone(), ns, name));
            }
        }
    }
    assert!(
        clusters.len() >= 5,
        "only {} story NatsClusters",
        clusters.len()
    );

    let mut rendered_count = 0;
    let mut held_by = vec![];
    for (f, ns, name) in &clusters {
        let c = wait_cluster(
            &client,
            ns,
            name,
            "a status with Ready and Progressing",
            |c| condition(c, "Ready").is_some() && condition(c, "Progressing").is_some(),
        )
        .await;
        let (p_status, p_reason, p_message) = condition(&c, "Progressing").expect("Progressing");
        let sel = format!("app.kubernetes.io/instance={name}");
        if HOLDS.contains(&p_reason.as_str()) {
            assert_eq!(p_status, "True", "{f:?} {name}: {p_reason} {p_message}");
            assert!(
                names_of::<StatefulSet>(&client, ns, &sel).await.is_empty(),
                "{f:?} {name} held by {p_reason} yet has StatefulSets"
            );
            held_by.push(format!("{name}: {p_reason}"));
            continue;
        }
        rendered_count += 1;
        let want = rendered(&c);
        let mut want_names: BTreeSet<String> = want
            .names()
            .into_iter()
            .map(|(k, n)| format!("{k}/{n}"))
            .collect();
        let have = wait_until(
            &format!("{f:?} {name}: every rendered object"),
            WAIT,
            || async {
                let mut have = BTreeSet::new();
                for n in names_of::<ConfigMap>(&client, ns, &sel).await {
                    have.insert(format!("ConfigMap/{n}"));
                }
                for n in names_of::<StatefulSet>(&client, ns, &sel).await {
                    have.insert(format!("StatefulSet/{n}"));
                }
                for n in names_of::<Service>(&client, ns, &sel).await {
                    have.insert(format!("Service/{n}"));
                }
                for n in pdb_names(&client, ns, &sel).await {
                    have.insert(format!("PodDisruptionBudget/{n}"));
                }
                for n in names_of::<NetworkPolicy>(&client, ns, &sel).await {
                    have.insert(format!("NetworkPolicy/{n}"));
                }
                let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                    "cert-manager.io",
                    "v1",
                    "Certificate",
                ));
                let certs: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
                for o in certs
                    .list(&ListParams::default().labels(&sel))
                    .await
                    .expect("list")
                    .items
                {
                    have.insert(format!("Certificate/{}", o.name_any()));
                }
                have
            },
            |have| *have == want_names,
        )
        .await;
        want_names.clear();
        assert_eq!(
            have.iter()
                .filter(|n| n.starts_with("StatefulSet/"))
                .count(),
            c.spec.replicas as usize,
            "{f:?} {name}"
        );
        for sts in &want.stateful_sets {
            let got = Api::<StatefulSet>::namespaced(client.clone(), ns)
                .get(&sts.name_any())
                .await
                .expect("sts");
            assert_eq!(got.spec.as_ref().and_then(|s| s.replicas), Some(1));
            assert_eq!(
                got.owner_references().first().map(|r| r.name.as_str()),
                Some(name.as_str())
            );
        }
    }
    eprintln!(
        "{rendered_count} of {} story NatsClusters rendered; held: {held_by:?}",
        clusters.len()
    );
    assert!(
        rendered_count >= 3,
        "only {rendered_count} story NatsClusters rendered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_certificate_is_reissued_under_the_same_ca_key_once_a_third_remains() {
    const NS: &str = "routes";
    let rig = rig(&[NS]).await;
    let client = rig.client();
    create_cluster(&client, NS, quickstart()).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let key = |s: &Secret, k: &str| s.data.as_ref().and_then(|d| d.get(k)).map(|b| b.0.clone());
    let first = wait_until(
        "demo-routes-tls",
        WAIT,
        || async { secrets.get_opt("demo-routes-tls").await.expect("read") },
        |s| s.is_some(),
    )
    .await
    .expect("Secret");
    let ca = secrets.get("demo-routes-ca").await.expect("the route CA");
    assert_eq!(key(&first, "ca.crt"), key(&ca, "ca.crt"));
    assert!(
        key(&ca, "ca.key").is_some(),
        "the CA key is kept in <name>-routes-ca"
    );

    // Two thirds of the year gone by: the controller reissues.
    age_route_certificate(&secrets).await;
    let reissued = wait_until(
        "a reissued route certificate",
        WAIT,
        || async { secrets.get("demo-routes-tls").await.expect("read") },
        |s| key(s, "tls.crt") != key(&first, "tls.crt"),
    )
    .await;
    assert_eq!(
        key(&reissued, "ca.crt"),
        key(&ca, "ca.crt"),
        "under the same CA"
    );
    let ca_after = secrets.get("demo-routes-ca").await.expect("the route CA");
    assert_eq!(
        key(&ca_after, "ca.key"),
        key(&ca, "ca.key"),
        "the same CA key"
    );
    let (nb, na) = cluster_controller::route_ca::recorded_validity(&reissued).expect("validity");
    assert!(na - nb >= time::Duration::days(364), "a year again");
}

/// The deletion guard's Kubernetes side: a NatsCluster with JetStream carries the finalizer and,
/// deleted while its NATS cluster cannot be asked (no server answers here), waits with
/// Deleting=True ObservationFailed until `force-delete` overrides it (while its StatefulSets
/// remain: see api_deletion for when they are gone); one without JetStream carries no finalizer
/// and goes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deletion_guard_holds_a_jetstream_cluster_until_force_delete_and_never_one_without() {
    const NS: &str = "guard";
    let rig = rig(&[NS]).await;
    let client = rig.client();
    let api: Api<NatsCluster> = Api::namespaced(client.clone(), NS);
    let finalizer = cluster_controller::controller::deletion::FINALIZER;

    create_cluster(&client, NS, quickstart()).await;
    wait_cluster(&client, NS, "demo", "the finalizer added", |c| {
        c.finalizers().iter().any(|f| f == finalizer)
    })
    .await;
    // Its servers' StatefulSets written: with none left, the guard would let it go at once.
    wait_until(
        "the servers' StatefulSets",
        WAIT,
        || async { names_of::<StatefulSet>(&client, NS, "app.kubernetes.io/instance=demo").await },
        |n| n.len() == 3,
    )
    .await;
    api.delete("demo", &Default::default())
        .await
        .expect("delete requested");
    let held = wait_cluster(
        &client,
        NS,
        "demo",
        "Deleting=True ObservationFailed",
        |c| is(c, "Deleting", "True", reason::OBSERVATION_FAILED),
    )
    .await;
    assert!(held.metadata.deletion_timestamp.is_some());
    let (_, _, message) = condition(&held, "Deleting").expect("Deleting");
    assert!(message.contains("force-delete"), "{message}");
    // Held, not gone: two more passes (demo is the only NatsCluster) change nothing.
    let passes = rig.metrics.reconciles("NatsCluster");
    wait_until(
        "two more passes of demo",
        WAIT,
        || async { rig.metrics.reconciles("NatsCluster") },
        |n| *n >= passes + 2,
    )
    .await;
    assert!(api.get_opt("demo").await.expect("read").is_some(), "held");

    api.patch(
        "demo",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            nats_api::cluster::annotation::FORCE_DELETE: "true"
        }}})),
    )
    .await
    .expect("force-delete");
    wait_until(
        "demo deleted after force-delete",
        WAIT,
        || async {
            api.get_opt("demo")
                .await
                .expect("read")
                .map(|c| c.name_any())
        },
        Option::is_none,
    )
    .await;

    let mut plain = quickstart();
    plain["metadata"]["name"] = json!("plain");
    if let Some(spec) = plain["spec"].as_object_mut() {
        spec.remove("jetstream");
    }
    create_cluster(&client, NS, plain).await;
    wait_cluster(&client, NS, "plain", "status written", |c| {
        c.status.is_some()
    })
    .await;
    let c = api.get("plain").await.expect("read");
    assert!(
        !c.finalizers().iter().any(|f| f == finalizer),
        "no finalizer without JetStream: {:?}",
        c.finalizers()
    );
    api.delete("plain", &Default::default())
        .await
        .expect("delete requested");
    wait_until(
        "plain deleted at once",
        WAIT,
        || async {
            api.get_opt("plain")
                .await
                .expect("read")
                .map(|c| c.name_any())
        },
        Option::is_none,
    )
    .await;
}
