//! API tier, on kube-apiserver 1.20 (no garbage collector, no namespace controller, no
//! StatefulSet controller: the test does their part, saying so): a NatsCluster deleted together
//! with its namespace finishes deleting without force-delete once its StatefulSets and volume
//! claims are gone, and one deleted alone proceeds the same way with a ServersGone Event.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nats_api::cluster::{NatsCluster, reason};
use serde_json::json;
use sim::testkit::{WAIT, wait_until};

use crate::api_cluster::{create_cluster, is, names_of, quickstart, rig, wait_cluster};

const SELECTOR: &str = "app.kubernetes.io/instance=demo";

/// The quickstart NatsCluster (JetStream: it carries the deletion guard's finalizer) with its
/// StatefulSets written, and for each the volume claim the StatefulSet controller would make
/// (named `data-<pod>`, labelled with the set's selector), written by the test in its place.
async fn running_quickstart(client: &kube::Client, ns: &str) {
    create_cluster(client, ns, quickstart()).await;
    let finalizer = cluster_controller::controller::deletion::FINALIZER;
    wait_cluster(client, ns, "demo", "the finalizer added", |c| {
        c.finalizers().iter().any(|f| f == finalizer)
    })
    .await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let names = wait_until(
        "the servers' StatefulSets",
        WAIT,
        || async { names_of::<StatefulSet>(client, ns, SELECTOR).await },
        |n| n.len() == 3,
    )
    .await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    for name in names {
        let sts = sets.get(&name).await.expect("the StatefulSet");
        let labels = sts.spec.as_ref().map(|s| s.selector.match_labels.clone());
        let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": format!("data-{name}-0"), "namespace": ns, "labels": labels},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "20Gi"}},
            },
        }))
        .expect("a PVC");
        pvcs.create(&PostParams::default(), &pvc)
            .await
            .expect("the PVC created");
    }
}

/// Deletes every StatefulSet and labelled PVC of demo, as the garbage collector (the sets are
/// owned by the NatsCluster) and the namespace controller would; a PVC's protection finalizer
/// is cleared as its controller does once no pod uses the claim (no pod exists here).
async fn remove_servers_and_claims(client: &kube::Client, ns: &str) {
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    for name in names_of::<StatefulSet>(client, ns, SELECTOR).await {
        sets.delete(&name, &DeleteParams::background())
            .await
            .expect("StatefulSet deleted");
    }
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    for name in names_of::<PersistentVolumeClaim>(client, ns, SELECTOR).await {
        pvcs.delete(&name, &DeleteParams::background())
            .await
            .expect("PVC deleted");
        if pvcs.get_opt(&name).await.expect("read PVC").is_some() {
            pvcs.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .expect("the protection finalizer cleared");
        }
    }
}

async fn wait_gone(api: &Api<NatsCluster>, what: &str) {
    wait_until(
        what,
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
}

/// Held with ObservationFailed while the servers' objects remain (no server is Ready), not gone.
async fn held_while_servers_remain(client: &kube::Client, ns: &str) {
    let held = wait_cluster(client, ns, "demo", "Deleting=True ObservationFailed", |c| {
        is(c, "Deleting", "True", reason::OBSERVATION_FAILED)
    })
    .await;
    assert!(held.metadata.deletion_timestamp.is_some());
    // The deletion bumped the generation; the status that says Deleting observed it.
    assert_eq!(
        held.status.as_ref().and_then(|s| s.observed_generation),
        held.metadata.generation,
        "status.observedGeneration is the deletion's generation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natscluster_whose_servers_and_claims_are_gone_finishes_deleting_without_force_delete() {
    const ALONE: &str = "alone";
    const DOOMED: &str = "doomed";
    let rig = rig(&[ALONE, DOOMED]).await;
    let client = rig.client();

    // Deleted alone: held while its servers remain; once they and their claims are gone, it
    // goes, and an Event says why.
    running_quickstart(&client, ALONE).await;
    let api: Api<NatsCluster> = Api::namespaced(client.clone(), ALONE);
    api.delete("demo", &DeleteParams::default())
        .await
        .expect("delete requested");
    held_while_servers_remain(&client, ALONE).await;
    remove_servers_and_claims(&client, ALONE).await;
    wait_gone(&api, "demo deleted once its servers and claims are gone").await;
    let events: Api<Event> = Api::namespaced(client.clone(), ALONE);
    let notes: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(cluster_controller::controller::deletion::SERVERS_GONE)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("demo")
        })
        .filter_map(|e| e.note)
        .collect();
    assert_eq!(notes.len(), 1, "one ServersGone Event: {notes:?}");
    assert!(
        notes[0].contains("StatefulSets and volume claims are gone"),
        "{notes:?}"
    );

    // Deleted with its namespace: the apiserver marks the namespace Terminating; what the
    // namespace controller then does (delete every object in it) the test does, NatsCluster
    // first, as it lists kinds in no order of ours.
    running_quickstart(&client, DOOMED).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(DOOMED, &DeleteParams::default())
        .await
        .expect("namespace delete requested");
    let api: Api<NatsCluster> = Api::namespaced(client.clone(), DOOMED);
    api.delete("demo", &DeleteParams::default())
        .await
        .expect("delete requested");
    held_while_servers_remain(&client, DOOMED).await;
    remove_servers_and_claims(&client, DOOMED).await;
    wait_gone(
        &api,
        "demo deleted with its namespace, without force-delete",
    )
    .await;
    let c = namespaces.get(DOOMED).await.expect("the namespace");
    assert!(
        c.metadata.deletion_timestamp.is_some(),
        "Terminating all along"
    );
}
