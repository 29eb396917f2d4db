//! API tier: only what the controller controls is deleted (issue 37, design §4.1 and §4.5). A
//! scale-down deletes the removed server's data claim — the PVC its own StatefulSet's claim
//! template names, made after it and carrying the labels the StatefulSet controller gives it —
//! and leaves every PVC that only looks like it: one carrying exactly its labels under another
//! name, and one named like a claim of that StatefulSet and owned by another object. The user is
//! told of each in a ForeignClaimKept Event. A delete goes to one object as it was judged: a PVC
//! replaced or changed after it was read is not deleted.
//!
//! The scale-down runs the reconciler on a real kube-apiserver 1.20 with the Kubernetes
//! server lifecycle's objects (StatefulSets, ConfigMaps, Services, the PVC deletes) and the sim's local
//! server lifecycle's servers (real nats-server processes under an operator trust, which the controller
//! evacuates and removes over its system user): a JetStream scale-down needs servers that answer,
//! and this apiserver has no kubelet. There is no StatefulSet controller either: the test makes
//! each server's claim from its StatefulSet as that controller does, and, as the PVC protection
//! controller does once no pod mounts it, lets the deleted claim go.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cluster_controller::controller::remove_server::FOREIGN_CLAIM_KEPT;
use cluster_controller::controller::{self, Settings};
use cluster_controller::objects::server_side_apply::delete_as_read;
use cluster_controller::plan::Layout;
use cluster_controller::render::ServerPlan;
use cluster_controller::server_lifecycle::kubernetes::{KubernetesServerLifecycle, SiteSettings};
use cluster_controller::server_lifecycle::{
    Applied, DesiredServer, ObservedServer, ServerAddress, ServerLifecycle, ServerLifecycleError,
};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use nats_api::cluster::{Endpoints, NatsCluster};
use serde_json::json;
use sim::control_plane::{Host, ObjectRef, condition_of};
use sim::local::LocalServerLifecycle;
use sim::testkit::{wait_object, wait_until};

const NS: &str = "nats";
const WAIT: Duration = Duration::from_secs(180);

/// The Kubernetes server lifecycle's objects, the local server lifecycle's servers: every object the
/// controller writes or deletes is the Kubernetes one's, every server it dials the local one's.
#[derive(Clone)]
struct KubeObjectsLocalServers {
    kube: KubernetesServerLifecycle,
    local: LocalServerLifecycle,
}

impl ServerLifecycle for KubeObjectsLocalServers {
    fn layout(&self, cluster: &NatsCluster) -> Box<dyn Layout + Send + Sync> {
        self.local.layout(cluster)
    }

    async fn apply_shared(
        &self,
        cluster: &NatsCluster,
        plans: &[ServerPlan],
    ) -> Result<Applied, ServerLifecycleError> {
        let mut a = self.kube.apply_shared(cluster, plans).await?;
        a.foreign
            .extend(self.local.apply_shared(cluster, plans).await?.foreign);
        Ok(a)
    }

    async fn write_config(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> Result<Applied, ServerLifecycleError> {
        let a = self.kube.write_config(cluster, server).await?;
        if !a.foreign.is_empty() {
            return Ok(a);
        }
        self.local.write_config(cluster, server).await
    }

    async fn apply_server(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> Result<Applied, ServerLifecycleError> {
        let a = self.kube.apply_server(cluster, server).await?;
        if !a.foreign.is_empty() {
            return Ok(a);
        }
        self.local.apply_server(cluster, server).await
    }

    async fn delete_server(
        &self,
        cluster: &NatsCluster,
        ordinal: u32,
        remove_storage: bool,
    ) -> Result<Applied, ServerLifecycleError> {
        let a = self
            .kube
            .delete_server(cluster, ordinal, remove_storage)
            .await?;
        self.local
            .delete_server(cluster, ordinal, remove_storage)
            .await?;
        Ok(a)
    }

    /// The servers as the processes say, each with its claim as the apiserver holds it; a
    /// server whose process is gone is still listed while a PVC of its claim's name is.
    async fn observe(
        &self,
        cluster: &NatsCluster,
    ) -> Result<Vec<ObservedServer>, ServerLifecycleError> {
        let kube = self.kube.observe(cluster).await?;
        let mut out = self.local.observe(cluster).await?;
        for o in &mut out {
            o.claim = kube
                .iter()
                .find(|k| k.ordinal == o.ordinal)
                .and_then(|k| k.claim.clone());
        }
        for k in kube {
            if k.claim.is_some() && !out.iter().any(|o| o.ordinal == k.ordinal) {
                out.push(ObservedServer {
                    present: false,
                    ready: false,
                    ..k
                });
            }
        }
        out.sort_by_key(|o| o.ordinal);
        Ok(out)
    }

    async fn stored_plan(
        &self,
        cluster: &NatsCluster,
        ordinal: u32,
        revision: &str,
    ) -> Option<ServerPlan> {
        self.local.stored_plan(cluster, ordinal, revision).await
    }

    fn address(&self, cluster: &NatsCluster, ordinal: u32) -> ServerAddress {
        self.local.address(cluster, ordinal)
    }

    fn endpoints(&self, cluster: &NatsCluster, plan: &ServerPlan) -> Endpoints {
        self.local.endpoints(cluster, plan)
    }
}

fn manifest(trust: &sim::trust::GeneratedTrust, replicas: u32) -> String {
    let text = format!(
        r#"apiVersion: nats.mikluko.io/v1beta1
kind: NatsOperatorTrust
metadata: {{ name: live, namespace: {NS} }}
spec:
  operatorJWT: ${{trust.operator_jwt}}
  systemAccountJWT: ${{trust.system_account_jwt}}
---
apiVersion: v1
kind: Secret
metadata: {{ name: controller-creds, namespace: {NS} }}
stringData:
  user.creds: ${{trust.system_creds}}
---
apiVersion: cluster.nats.mikluko.io/v1beta1
kind: NatsCluster
metadata: {{ name: demo, namespace: {NS} }}
spec:
  version: 2.15.1
  replicas: {replicas}
  resources: {{ limits: {{ memory: 1Gi }} }}
  jetstream:
    volumeClaimTemplate:
      spec:
        accessModes: [ReadWriteOnce]
        resources: {{ requests: {{ storage: 1Gi }} }}
  auth:
    trustRef: {{ name: live }}
    systemCredentials:
      secretKeyRef: {{ name: controller-creds }}
"#
    );
    sim::control_plane::substitute(&text, &trust.vars)
}

/// The PVC the StatefulSet controller makes for `sts`'s pod: named `<template>-<sts>-0`, the
/// template's labels and the StatefulSet's selector, no owner.
fn claim_of(sts: &StatefulSet) -> PersistentVolumeClaim {
    let spec = sts.spec.as_ref().expect("spec");
    let template = spec
        .volume_claim_templates
        .as_ref()
        .and_then(|t| t.first())
        .expect("a claim template");
    let mut labels = template.metadata.labels.clone().unwrap_or_default();
    labels.extend(spec.selector.match_labels.clone().unwrap_or_default());
    let mut pvc = template.clone();
    pvc.metadata = Default::default();
    pvc.metadata.name = Some(format!(
        "{}-{}-0",
        template.metadata.name.as_deref().unwrap_or_default(),
        sts.name_any()
    ));
    pvc.metadata.labels = Some(labels);
    pvc
}

fn pvc(
    name: &str,
    labels: &BTreeMap<String, String>,
    owner: Option<&ConfigMap>,
) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": labels,
            "ownerReferences": owner.map(|o| json!([{
                "apiVersion": "v1", "kind": "ConfigMap", "name": o.name_any(),
                "uid": o.uid(), "controller": true,
            }])),
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .expect("a PVC")
}

fn up_to_date(v: &serde_json::Value, servers: u64) -> bool {
    condition_of(v, "Progressing").is_some_and(|(s, r, _)| s == "False" && r == "UpToDate")
        && condition_of(v, "Settled").is_some_and(|(s, _, _)| s == "True")
        && v["status"]["readyReplicas"] == servers
        && v["status"]["removals"].as_array().is_none_or(Vec::is_empty)
        && v["metadata"]["generation"] == v["status"]["observedGeneration"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_deletes_the_servers_claim_and_leaves_pvcs_that_only_look_like_it() {
    let host = Host::start(&[NS], &[])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    host.add_controller(
        "cluster",
        Arc::new(|client: kube::Client, local: LocalServerLifecycle| {
            Box::pin(async move {
                let kube = KubernetesServerLifecycle::new(client.clone(), SiteSettings::default());
                let ctx = controller::context(
                    client,
                    KubeObjectsLocalServers { kube, local },
                    Settings {
                        recheck: Duration::from_secs(2),
                        ..Settings::default()
                    },
                    controller_kit::metrics::Metrics::default(),
                );
                controller::run(ctx).await;
            })
        }),
    );
    let client = host.client();
    let trust = sim::trust::generate().unwrap_or_else(|e| panic!("{e}"));
    host.apply_text(Path::new("inline"), &manifest(&trust, 3))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let demo = ObjectRef::parse("NatsCluster/nats/demo").expect("ref");
    wait_object(&host, &demo, "three servers up to date", WAIT, |v| {
        up_to_date(v, 3)
    })
    .await;

    // Each server's claim, as the StatefulSet controller makes it.
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let mut claims = BTreeMap::new();
    for i in 0..3 {
        let sts = sets.get(&format!("demo-{i}")).await.expect("StatefulSet");
        let made = pvcs
            .create(&PostParams::default(), &claim_of(&sts))
            .await
            .expect("the claim");
        claims.insert(i, made);
    }
    let real = claims[&2].clone();
    assert_eq!(real.name_any(), "data-demo-2-0");
    let labels = real.labels().clone();

    // Two PVCs that only look like demo-2's claim: its labels exactly under another name, and
    // a name its StatefulSet could give a claim, owned by another object.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut keeper = ConfigMap::default();
    keeper.metadata.name = Some("keeper".into());
    let keeper = cms
        .create(&PostParams::default(), &keeper)
        .await
        .expect("keeper");
    let imposter = pvcs
        .create(&PostParams::default(), &pvc("imposter", &labels, None))
        .await
        .expect("imposter");
    let owned = pvcs
        .create(
            &PostParams::default(),
            &pvc("data-demo-2-1", &labels, Some(&keeper)),
        )
        .await
        .expect("owned elsewhere");

    host.apply_text(Path::new("inline"), &manifest(&trust, 2))
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // The real claim is deleted (no PVC protection controller here lets it go: the test does).
    let deleted = wait_until(
        "data-demo-2-0 deleted",
        WAIT,
        || async {
            pvcs.get_opt("data-demo-2-0")
                .await
                .expect("read the claim")
                .map(|p| p.metadata.deletion_timestamp.is_some())
        },
        |p| p.is_none_or(|deleting| deleting),
    )
    .await;
    if deleted.is_some() {
        pvcs.patch(
            "data-demo-2-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("the claim's finalizers released");
    }
    let done = wait_object(&host, &demo, "two servers up to date", WAIT, |v| {
        up_to_date(v, 2)
    })
    .await;
    assert!(
        condition_of(&done, "Ready").is_some_and(|(s, _, _)| s == "True"),
        "a look-alike is no leftover of the removal: {}",
        done["status"]
    );
    assert!(sets.get_opt("demo-2").await.expect("read").is_none());
    assert!(pvcs.get_opt("data-demo-2-0").await.expect("read").is_none());

    // Everything else is as it was: not deleted, not written.
    for (what, before) in [
        ("imposter", &imposter),
        ("data-demo-2-1", &owned),
        ("data-demo-0-0", &claims[&0]),
        ("data-demo-1-0", &claims[&1]),
    ] {
        let now = pvcs.get_opt(what).await.expect("read").unwrap_or_else(|| {
            panic!("{what} deleted");
        });
        assert!(now.metadata.deletion_timestamp.is_none(), "{what} deleted");
        assert_eq!(now.uid(), before.uid(), "{what} the same PVC");
        assert_eq!(
            now.resource_version(),
            before.resource_version(),
            "{what} untouched"
        );
    }

    // The user is told of each look-alike left.
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let notes: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(FOREIGN_CLAIM_KEPT)
                && e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("demo")
        })
        .filter_map(|e| e.note)
        .collect();
    for name in ["imposter", "data-demo-2-1"] {
        assert!(
            notes
                .iter()
                .any(|n| n.contains(&format!("PersistentVolumeClaim/{name}:"))),
            "a ForeignClaimKept Event names {name}: {notes:?}"
        );
    }
    assert!(
        notes
            .iter()
            .any(|n| n.contains("owned by ConfigMap/keeper")),
        "{notes:?}"
    );
    assert!(
        !notes
            .iter()
            .any(|n| n.contains("PersistentVolumeClaim/data-demo-2-0")),
        "the real claim is no look-alike: {notes:?}"
    );
}

/// A delete carries the uid and resourceVersion the PVC was judged at: one deleted and made again
/// under the same name, or changed, since it was read is not deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pvc_replaced_or_changed_after_it_was_judged_is_not_deleted() {
    let api = sim::testkit::apiserver_with_crds(&[NS]).await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(api.client(), NS);
    let labels = BTreeMap::from([("app".to_string(), "x".to_string())]);
    let judged = pvcs
        .create(&PostParams::default(), &pvc("data-demo-2-0", &labels, None))
        .await
        .expect("created");

    // Changed since: a label added.
    pvcs.patch(
        "data-demo-2-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"changed": "yes"}}})),
    )
    .await
    .expect("changed");
    let deleted = delete_as_read(&pvcs, "PersistentVolumeClaim", &judged.metadata)
        .await
        .expect("no error");
    assert!(!deleted, "a PVC changed since it was judged is not deleted");
    let now = pvcs.get("data-demo-2-0").await.expect("still there");
    assert!(now.metadata.deletion_timestamp.is_none());

    // Replaced since: deleted and made again under the same name (the same labels).
    pvcs.patch(
        "data-demo-2-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("finalizers released");
    pvcs.delete("data-demo-2-0", &Default::default())
        .await
        .expect("deleted");
    wait_until(
        "the first PVC gone",
        WAIT,
        || async { pvcs.get_opt("data-demo-2-0").await.expect("read") },
        |p| p.as_ref().is_none_or(|p| p.uid() != judged.uid()),
    )
    .await;
    let swapped = pvcs
        .create(&PostParams::default(), &pvc("data-demo-2-0", &labels, None))
        .await
        .expect("made again");
    // The uid alone tells them apart.
    let mut stale = now.metadata.clone();
    stale.resource_version = None;
    let deleted = delete_as_read(&pvcs, "PersistentVolumeClaim", &stale)
        .await
        .expect("no error");
    assert!(
        !deleted,
        "a PVC swapped in after the judgement is not deleted"
    );
    let kept = pvcs.get("data-demo-2-0").await.expect("still there");
    assert_eq!(kept.uid(), swapped.uid());
    assert!(kept.metadata.deletion_timestamp.is_none());

    // As read: deleted.
    let deleted = delete_as_read(&pvcs, "PersistentVolumeClaim", &kept.metadata)
        .await
        .expect("no error");
    assert!(deleted);
    let going = pvcs.get_opt("data-demo-2-0").await.expect("read");
    assert!(going.is_none_or(|p| p.metadata.deletion_timestamp.is_some()));
}
