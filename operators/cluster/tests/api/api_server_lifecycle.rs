//! API tier: the Kubernetes server lifecycle on its own against a real kube-apiserver 1.20 —
//! write_config writes the ConfigMap only, apply_server the ConfigMap and the StatefulSet naming
//! the revision (and nudges the server's pod to project it), observe reads StatefulSets and Pods, delete_server removes what it controls and
//! a PVC only when it is proven the claim of the server's own StatefulSet (its name, labels and
//! owners), before that StatefulSet.

use std::collections::BTreeMap;

use cluster_controller::objects::configmap::REVISION_ANNOTATION;
use cluster_controller::objects::labels;
use cluster_controller::plan::{ClusterInputs, plan_servers};
use cluster_controller::render;
use cluster_controller::server_lifecycle::config_projection::CONFIG_WRITTEN_ANNOTATION;
use cluster_controller::server_lifecycle::kubernetes::{KubernetesServerLifecycle, SiteSettings};
use cluster_controller::server_lifecycle::{DesiredServer, ServerLifecycle};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nats_api::cluster::NatsCluster;
use serde_json::json;

const NS: &str = "nats";

fn desired(server_lifecycle: &KubernetesServerLifecycle, c: &NatsCluster) -> Vec<DesiredServer> {
    let layout = server_lifecycle.layout(c);
    plan_servers(
        &ClusterInputs {
            name: "demo",
            spec: &c.spec,
            trust: None,
            account_preloads: vec![],
            leaf_remotes: vec![],
        },
        layout.as_ref(),
    )
    .expect("plans")
    .into_iter()
    .enumerate()
    .map(|(i, plan)| {
        let config = render::render(&plan);
        DesiredServer {
            ordinal: i as u32,
            revision: cluster_controller::revision::of_server(&c.spec, &config),
            config,
            plan,
            files: vec![],
        }
    })
    .collect()
}

fn pvc(name: &str, labels: BTreeMap<String, String>) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .expect("a PVC")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_lifecycle_writes_observes_and_deletes_only_what_it_controls() {
    let api = sim::testkit::apiserver_with_crds(&[NS]).await;
    let client = api.client();
    let server_lifecycle = KubernetesServerLifecycle::new(client.clone(), SiteSettings::default());
    let c: NatsCluster = serde_json::from_value(json!({
        "apiVersion": "cluster.nats.mikluko.io/v1beta1",
        "kind": "NatsCluster",
        "metadata": {"name": "demo", "namespace": NS},
        "spec": {"version": "2.15.0", "replicas": 2, "jetstream": {"volumeClaimTemplate": {
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }}},
    }))
    .expect("a NatsCluster");
    let c = Api::<NatsCluster>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &c)
        .await
        .expect("created");
    let servers = desired(&server_lifecycle, &c);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);

    // Nothing yet: both servers absent.
    let seen = server_lifecycle.observe(&c).await.expect("observe");
    assert_eq!(
        seen.iter()
            .map(|o| (o.server_name.as_str(), o.present))
            .collect::<Vec<_>>(),
        vec![("demo-0", false), ("demo-1", false)]
    );

    // write_config: the ConfigMap only.
    let applied = server_lifecycle
        .write_config(&c, &servers[0])
        .await
        .expect("write_config");
    assert!(applied.foreign.is_empty());
    let cm = cms.get("demo-0-config").await.expect("ConfigMap written");
    assert_eq!(cm.data.expect("data")["nats.conf"], servers[0].config);
    assert_eq!(
        cm.metadata.annotations.expect("annotations")[REVISION_ANNOTATION],
        servers[0].revision
    );
    assert!(
        sets.get_opt("demo-0").await.expect("read").is_none(),
        "no workload from write_config"
    );

    // apply_server: ConfigMap and the StatefulSet naming the revision.
    for s in &servers {
        let a = server_lifecycle
            .apply_server(&c, s)
            .await
            .expect("apply_server");
        assert!(a.foreign.is_empty());
    }
    let sts = sets.get("demo-1").await.expect("StatefulSet");
    // The config is written before the workload that mounts it (etcd revisions only grow).
    let cm_rv = rv(&cms.get("demo-1-config").await.expect("ConfigMap"));
    assert!(
        cm_rv < rv(&sts),
        "ConfigMap {cm_rv} before StatefulSet {}",
        rv(&sts)
    );
    let sts_uid = sts.uid().expect("uid");
    let template = sts.spec.expect("spec").template;
    assert_eq!(
        template.metadata.expect("meta").annotations.expect("ann")[REVISION_ANNOTATION],
        servers[1].revision
    );

    // observe: present, and what the pod says once there is one.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "demo-1-0",
            "labels": labels::server("demo", "demo-1"),
            "annotations": {REVISION_ANNOTATION: servers[1].revision},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "demo-1",
                "uid": sts_uid, "controller": true,
            }],
        },
        "spec": {"containers": [{"name": "nats", "image": "nats"}]},
    }))
    .expect("pod");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    pods.patch_status(
        "demo-1-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "nats", "restartCount": 3, "ready": true, "image": "nats", "imageID": ""}],
        }})),
    )
    .await
    .expect("pod status");
    let seen = server_lifecycle.observe(&c).await.expect("observe");
    assert!(seen.iter().all(|o| o.present));
    assert!(!seen[0].ready && seen[0].revision.is_none());
    assert!(seen[1].ready);
    assert_eq!(
        seen[1].revision.as_deref(),
        Some(servers[1].revision.as_str())
    );
    assert_eq!(seen[1].restarts, 3);
    let addr = server_lifecycle.address(&c, 1);
    assert_eq!(
        addr.monitor_url,
        "http://demo-1-0.demo-headless.nats.svc.cluster.local:8222"
    );

    // write_config nudges the kubelet to project the config now: the server's pod (its
    // StatefulSet's) is annotated with the revision written, and nothing else of it changes.
    let before = pods.get("demo-1-0").await.expect("pod");
    server_lifecycle
        .write_config(&c, &servers[1])
        .await
        .expect("write_config");
    let after = pods.get("demo-1-0").await.expect("pod");
    assert_eq!(
        after.annotations().get(CONFIG_WRITTEN_ANNOTATION),
        Some(&servers[1].revision)
    );
    assert_eq!(after.spec, before.spec);
    assert_eq!(after.labels(), before.labels());
    // Written again under the same revision: the pod is left alone.
    server_lifecycle
        .write_config(&c, &servers[1])
        .await
        .expect("write_config");
    let again = pods.get("demo-1-0").await.expect("pod");
    assert_eq!(again.resource_version(), after.resource_version());

    // A server beyond replicas that is still present is observed too.
    let mut fewer = c.clone();
    fewer.spec.replicas = 1;
    let seen = server_lifecycle.observe(&fewer).await.expect("observe");
    assert_eq!(seen.len(), 2, "demo-1 is still there");

    // delete_server: the StatefulSet and ConfigMap it controls, the claim of that StatefulSet
    // (named and labelled as the StatefulSet controller makes it), nothing else.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    pvcs.create(
        &PostParams::default(),
        &pvc("data-demo-1-0", labels::server("demo", "demo-1")),
    )
    .await
    .expect("pvc");
    pvcs.create(
        &PostParams::default(),
        &pvc("data-demo-0-0", labels::server("demo", "demo-0")),
    )
    .await
    .expect("pvc");
    pvcs.create(
        &PostParams::default(),
        &pvc("unlabelled-demo-1", BTreeMap::new()),
    )
    .await
    .expect("pvc");
    // Watched from here: the revision at which each deletion lands, in order.
    let from = rv(&pvcs.get("unlabelled-demo-1").await.expect("pvc")).to_string();
    let watched = {
        let (c1, c2, c3) = (client.clone(), client.clone(), client.clone());
        let (f1, f2, f3) = (from.clone(), from.clone(), from.clone());
        tokio::spawn(async move {
            futures::join!(
                first_deletion(c1, f1, "StatefulSet"),
                first_deletion(c2, f2, "ConfigMap"),
                first_deletion(c3, f3, "PersistentVolumeClaim")
            )
        })
    };
    server_lifecycle
        .delete_server(&c, 1, true)
        .await
        .expect("delete_server");
    let (sts_at, cm_at, pvc_at) = watched.await.expect("watches");
    let (sts_at, cm_at, pvc_at) = (
        sts_at.expect("the StatefulSet deleted"),
        cm_at.expect("the ConfigMap deleted"),
        pvc_at.expect("the PVC deleted"),
    );
    assert!(
        pvc_at < sts_at && sts_at < cm_at,
        "the claim ({pvc_at}) while its StatefulSet proves it the server's, then the StatefulSet \
         ({sts_at}), then the ConfigMap ({cm_at})"
    );
    assert!(sets.get_opt("demo-1").await.expect("read").is_none());
    assert!(cms.get_opt("demo-1-config").await.expect("read").is_none());
    // Without a controller-manager nothing finalizes PVCs: a deleted one is gone or terminating.
    let gone_or_going = |p: Option<PersistentVolumeClaim>| {
        p.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
    };
    assert!(gone_or_going(
        pvcs.get_opt("data-demo-1-0").await.expect("read")
    ));
    let kept = pvcs.get_opt("data-demo-0-0").await.expect("read");
    assert!(kept.is_some_and(|p| p.metadata.deletion_timestamp.is_none()));
    let kept = pvcs.get_opt("unlabelled-demo-1").await.expect("read");
    assert!(kept.is_some_and(|p| p.metadata.deletion_timestamp.is_none()));
    assert!(sets.get_opt("demo-0").await.expect("read").is_some());

    // A ConfigMap of a server's name it does not control: named, never written nor deleted.
    let mut foreign = ConfigMap::default();
    foreign.metadata.name = Some("demo-1-config".into());
    let foreign = cms
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign");
    let a = server_lifecycle
        .apply_server(&c, &servers[1])
        .await
        .expect("apply_server");
    assert_eq!(a.foreign, vec!["ConfigMap/demo-1-config"]);
    assert!(
        sets.get_opt("demo-1").await.expect("read").is_none(),
        "no workload over a config it does not write"
    );
    server_lifecycle
        .delete_server(&c, 1, false)
        .await
        .expect("delete_server");
    let still = cms.get("demo-1-config").await.expect("still there");
    assert_eq!(still.resource_version(), foreign.resource_version());
}

/// An object's resourceVersion as a number (kube-apiserver's come from etcd and only grow).
fn rv<K: kube::Resource>(obj: &K) -> u64 {
    rv_of(obj.meta().resource_version.as_deref())
}

fn rv_of(v: Option<&str>) -> u64 {
    v.and_then(|v| v.parse().ok())
        .expect("a numeric resourceVersion")
}

/// The lowest revision at which an object of `kind` named for demo-1 was deleted or marked for
/// deletion, watched from `from` for five seconds.
async fn first_deletion(client: kube::Client, from: String, kind: &'static str) -> Option<u64> {
    let ar = match kind {
        "StatefulSet" => kube::api::ApiResource::erase::<StatefulSet>(&()),
        "ConfigMap" => kube::api::ApiResource::erase::<ConfigMap>(&()),
        _ => kube::api::ApiResource::erase::<PersistentVolumeClaim>(&()),
    };
    let api = Api::<kube::api::DynamicObject>::namespaced_with(client, NS, &ar);
    let events = api
        .watch(&kube::api::WatchParams::default().timeout(5), &from)
        .await
        .expect("watch");
    let mut events = std::pin::pin!(events);
    let mut seen = vec![];
    while let Some(Ok(e)) = futures::StreamExt::next(&mut events).await {
        let deleted = match &e {
            kube::api::WatchEvent::Deleted(o) => Some(o),
            kube::api::WatchEvent::Modified(o) if o.metadata.deletion_timestamp.is_some() => {
                Some(o)
            }
            _ => None,
        };
        if let Some(o) = deleted
            && o.name_any().contains("demo-1")
        {
            seen.push(rv_of(o.metadata.resource_version.as_deref()));
        }
    }
    seen.into_iter().min()
}
