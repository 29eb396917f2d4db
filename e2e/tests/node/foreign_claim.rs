//! Only what the controller controls is deleted, on a real node (issue 37): three servers under
//! an operator trust the test signs (so the controller has a system user to evacuate with), each
//! with a real claim the node's StatefulSet controller made. Two PVCs that only look like
//! `demo-2`'s claim are added — its labels exactly under another name, and under a name its
//! StatefulSet could give a claim (`data-demo-2-1`) — and the NatsCluster is scaled to two:
//! `demo-2` is evacuated, removed and deleted with its claim `data-demo-2-0`, the foreign PVCs
//! stay as they were, and a ForeignClaimKept Event names each.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use nats_api::cluster::NatsCluster;
use serde_json::json;
use sim::wait::poll;

use super::kit::{condition, is_true, object_until, resource};
use super::{NS, install};
use e2e::on_node::NATS_VERSION;

/// The reason of the Event naming a PVC left because it only looks like a server's claim
/// (`cluster_controller::controller::remove_server::FOREIGN_CLAIM_KEPT`, which the e2e crate
/// does not link).
const FOREIGN_CLAIM_KEPT: &str = "ForeignClaimKept";

fn manifest(trust: &sim::trust::GeneratedTrust, digest: &str, replicas: u32) -> String {
    let text = format!(
        "apiVersion: nats.mikluko.io/v1beta1
kind: NatsOperatorTrust
metadata: {{name: node, namespace: {NS}}}
spec:
  operatorJWT: ${{trust.operator_jwt}}
  systemAccountJWT: ${{trust.system_account_jwt}}
---
apiVersion: v1
kind: Secret
metadata: {{name: controller-creds, namespace: {NS}}}
stringData:
  user.creds: ${{trust.system_creds}}
---
apiVersion: cluster.nats.mikluko.io/v1beta1
kind: NatsCluster
metadata: {{name: demo, namespace: {NS}}}
spec:
  version: {NATS_VERSION}
  image: {{repository: docker.io/library/nats, digest: '{digest}'}}
  replicas: {replicas}
  resources:
    requests: {{cpu: 100m, memory: 512Mi}}
    limits: {{memory: 512Mi}}
  exporter: {{enabled: false}}
  jetstream:
    volumeClaimTemplate:
      spec:
        accessModes: [ReadWriteOnce]
        resources: {{requests: {{storage: 1Gi}}}}
  auth:
    trustRef: {{name: node}}
    systemCredentials:
      secretKeyRef: {{name: controller-creds}}
"
    );
    sim::control_plane::substitute(&text, &trust.vars)
}

/// A PVC of `name` carrying `labels`, asking the node's one class (it stays Pending: the class
/// binds at a pod's first use, and no pod uses it).
fn foreign(
    name: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .expect("a PVC")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scale_down_on_the_node_leaves_a_foreign_pvc_labelled_like_the_servers_claim() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let Some((node, digest)) = install(dir.path()).await else {
        return;
    };
    let client = node.client();
    let cluster_ar = resource::<NatsCluster>();
    let trust = sim::trust::generate().unwrap_or_else(|e| panic!("{e}"));

    let t0 = Instant::now();
    node.apply(&manifest(&trust, &digest, 3))
        .await
        .unwrap_or_else(|e| panic!("applying the NatsCluster: {e}"));
    object_until(
        &client,
        &cluster_ar,
        NS,
        "demo",
        "NatsCluster demo Ready and Settled on three servers",
        Duration::from_secs(300),
        |o| is_true(o, "Ready") && is_true(o, "Settled") && o["status"]["readyReplicas"] == 3,
    )
    .await;
    eprintln!(
        "figure: NatsCluster applied to Ready and Settled in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    // demo-2's claim as the node's StatefulSet controller made it; two foreign PVCs like it.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let real = pvcs
        .get("data-demo-2-0")
        .await
        .unwrap_or_else(|e| panic!("demo-2's claim data-demo-2-0: {e}"));
    let labels = real.labels().clone();
    let mut kept = vec![];
    for name in ["imposter-demo-2", "data-demo-2-1"] {
        let made = pvcs
            .create(&PostParams::default(), &foreign(name, &labels))
            .await
            .unwrap_or_else(|e| panic!("the foreign PVC {name}: {e}"));
        kept.push(made);
    }

    // Scaled to two: demo-2 evacuated, removed, deleted with its claim.
    let t1 = Instant::now();
    node.apply(&manifest(&trust, &digest, 2))
        .await
        .unwrap_or_else(|e| panic!("applying the scale-down: {e}"));
    object_until(
        &client,
        &cluster_ar,
        NS,
        "demo",
        "the scale-down done: two servers Ready, no removal left, Progressing False",
        Duration::from_secs(600),
        |o| {
            o["status"]["observedGeneration"] == o["metadata"]["generation"]
                && o["status"]["readyReplicas"] == 2
                && o["status"]["removals"].as_array().is_none_or(Vec::is_empty)
                && condition(o, "Progressing").is_some_and(|(s, _)| s == "False")
        },
    )
    .await;
    let gone = poll("data-demo-2-0 gone", Duration::from_secs(120), || async {
        match pvcs.get_opt("data-demo-2-0").await {
            Ok(None) => Ok(Some(())),
            Ok(Some(p)) if p.uid() != real.uid() => Ok(Some(())),
            Ok(Some(p)) => Err(format!(
                "still there, deletion {:?}",
                p.metadata.deletion_timestamp
            )),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    if let Err(e) = gone {
        panic!("{e}\n{}", e2e::on_node::describe(&client, NS).await);
    }
    eprintln!(
        "figure: scale-down 3 -> 2 with the claim deleted in {:.1} s",
        t1.elapsed().as_secs_f64()
    );

    // The foreign PVCs are as they were, and the user is told of each.
    for before in &kept {
        let name = before.name_any();
        let now = pvcs
            .get_opt(&name)
            .await
            .unwrap_or_else(|e| panic!("reading {name}: {e}"))
            .unwrap_or_else(|| panic!("the foreign PVC {name} was deleted"));
        assert!(
            now.metadata.deletion_timestamp.is_none(),
            "the foreign PVC {name} is being deleted"
        );
        assert_eq!(now.uid(), before.uid(), "{name} is the same PVC");
    }
    let notes: Vec<String> = Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("the Events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(FOREIGN_CLAIM_KEPT))
        .filter_map(|e| e.note)
        .collect();
    for before in &kept {
        let name = before.name_any();
        assert!(
            notes
                .iter()
                .any(|n| n.contains(&format!("PersistentVolumeClaim/{name}:"))),
            "a {FOREIGN_CLAIM_KEPT} Event names {name}: {notes:?}"
        );
    }

    let left = node.down().await;
    assert!(
        left.is_empty(),
        "the host differs from its baseline after down: {left:#?}"
    );
}
