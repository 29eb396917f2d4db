//! API tier: the objects a story NatsCluster renders are accepted by a real kube-apiserver as
//! written (no field refused or pruned away), owned by the NatsCluster; and an existing object of
//! a rendered name that the NatsCluster does not control is named by the ReconcileFailed refusal.

use cluster_controller::objects::Owner;
use cluster_controller::objects::cluster::{Site, render_objects};
use cluster_controller::plan::{ClusterInputs, KubernetesLayout, plan_servers};
use cluster_controller::refusals::{ObservedObject, foreign_objects};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use nats_api::cluster::{NatsCluster, reason};
use serde::de::DeserializeOwned;

const NS: &str = "nats";

fn quickstart() -> NatsCluster {
    sim::testkit::story_object(
        "docs/stories/01-quickstart/01-natscluster.yaml",
        "NatsCluster",
    )
}

/// Creates `obj` and checks that what the apiserver stored keeps every field we wrote.
async fn create_kept<K>(api: Api<K>, obj: &K)
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let created = api
        .create(&PostParams::default(), obj)
        .await
        .unwrap_or_else(|e| panic!("{} refused: {e}", obj.name_any()));
    let sent = serde_json::to_value(obj).expect("json");
    let got = serde_json::to_value(&created).expect("json");
    let mut missing = vec![];
    kept(&sent, &got, String::new(), &mut missing);
    assert!(
        missing.is_empty(),
        "{} lost fields at apply: {missing:?}",
        obj.name_any()
    );
}

/// Every leaf of `sent` is in `got` (the server adds defaults; it must drop nothing).
fn kept(sent: &serde_json::Value, got: &serde_json::Value, at: String, missing: &mut Vec<String>) {
    use serde_json::Value;
    match (sent, got) {
        (Value::Object(s), Value::Object(g)) => {
            for (k, v) in s {
                match g.get(k) {
                    Some(gv) => kept(v, gv, format!("{at}.{k}"), missing),
                    None => missing.push(format!("{at}.{k}")),
                }
            }
        }
        (Value::Array(s), Value::Array(g)) => {
            for (i, v) in s.iter().enumerate() {
                match g.get(i) {
                    Some(gv) => kept(v, gv, format!("{at}[{i}]"), missing),
                    None => missing.push(format!("{at}[{i}]")),
                }
            }
        }
        // Quantities come back canonical; compare them as text loosely.
        (s, g) if s != g && !(s.is_string() && g.is_string()) => missing.push(format!("{at}={s}")),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_story_natscluster_renders_objects_the_apiserver_accepts_and_foreign_ones_are_named() {
    let api = sim::testkit::apiserver_with_crds(&[NS]).await;
    let client = api.client();

    let manifest = quickstart();
    let clusters: Api<NatsCluster> = Api::namespaced(client.clone(), NS);
    let cluster = clusters
        .create(&PostParams::default(), &manifest)
        .await
        .expect("the quickstart NatsCluster is admitted");
    let owner = Owner::of(&cluster).expect("owner");
    let plans = plan_servers(
        &ClusterInputs {
            name: &owner.name,
            spec: &cluster.spec,
            trust: None,
            account_preloads: vec![],
            leaf_remotes: vec![],
        },
        &KubernetesLayout {
            name: owner.name.clone(),
            namespace: NS.into(),
            cluster_domain: "cluster.local".into(),
        },
    )
    .expect("plans");
    let objects = render_objects(
        &owner,
        &cluster.spec,
        &plans,
        Site {
            controller_namespace: "nats-system",
            cluster_domain: "cluster.local",
        },
    )
    .expect("objects");

    // A foreign ConfigMap already holds server 1's name.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut foreign = ConfigMap::default();
    foreign.metadata.name = Some("demo-1-config".into());
    cms.create(&PostParams::default(), &foreign)
        .await
        .expect("foreign ConfigMap");

    for cm in &objects.config_maps {
        if cm.metadata.name.as_deref() == Some("demo-1-config") {
            continue;
        }
        create_kept(cms.clone(), cm).await;
    }
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    for s in &objects.stateful_sets {
        create_kept(sts.clone(), s).await;
    }
    let svcs: Api<Service> = Api::namespaced(client.clone(), NS);
    create_kept(svcs.clone(), &objects.client_service).await;
    create_kept(svcs.clone(), &objects.headless_service).await;
    let nps: Api<NetworkPolicy> = Api::namespaced(client.clone(), NS);
    create_kept(nps, objects.network_policy.as_ref().expect("policy")).await;
    // kube-apiserver 1.20 serves PodDisruptionBudget only as policy/v1beta1; policy/v1 is
    // checked structurally in the unit tests.

    // Observe every rendered ConfigMap and StatefulSet by name and decide.
    let mut observed = vec![];
    for (kind, name) in objects.names() {
        let refs = match kind {
            "ConfigMap" => cms
                .get_opt(&name)
                .await
                .expect("get")
                .map(|o| o.owner_references().to_vec()),
            "StatefulSet" => sts
                .get_opt(&name)
                .await
                .expect("get")
                .map(|o| o.owner_references().to_vec()),
            "Service" => svcs
                .get_opt(&name)
                .await
                .expect("get")
                .map(|o| o.owner_references().to_vec()),
            _ => None,
        };
        if let Some(owner_references) = refs {
            observed.push(ObservedObject {
                kind: kind.into(),
                name,
                owner_references,
            });
        }
    }
    assert!(observed.len() >= 8, "{observed:?}");
    let uid = cluster.uid().expect("uid");
    let refusal = foreign_objects(&observed, &uid).expect("the foreign ConfigMap is named");
    assert_eq!(refusal.reason, reason::RECONCILE_FAILED);
    assert!(
        refusal.message.ends_with("ConfigMap demo-1-config"),
        "{}",
        refusal.message
    );
}
