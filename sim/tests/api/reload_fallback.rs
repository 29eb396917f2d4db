//! A reload that fails falls back to a restart (design §4.2, issue 39): a NatsCluster under an
//! operator trust whose `auth.systemCredentials` user may read the servers (`$SYS` VARZ and the
//! rest) but is denied `$SYS.REQ.SERVER.*.RELOAD` — as a system user cut down by hand would be.
//! A reloadable change (a raised JetStream memory store) is routed to a reload; each server's
//! reload request goes unanswered, so each server is restarted instead: `status.config` reads
//! `appliedBy: Restart` with the reload's failure as its `restartReason`, a `RolloutStep` Event
//! per server says "its reload failed", and every server restarted once. Real nats-server
//! processes on the local server lifecycle, a real apiserver, the cluster controller in-process.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use nats_claims::{Creds, KeyKind, NKey, Permission, UserClaims};
use sim::control_plane::{Host, ObjectRef};
use sim::controlled::read_cluster;
use sim::testkit::wait_object;

use crate::api_local_trusted_rollout::{apply, up_to_date};

const WAIT: Duration = Duration::from_secs(180);

/// The system user's creds: every `$SYS` request but a reload.
fn creds_without_reload(system: &NKey) -> String {
    let user = NKey::generate(KeyKind::User);
    let jwt = UserClaims::new(user.public_key())
        .name("cluster-controller")
        .publish(Permission {
            allow: Vec::new(),
            deny: vec!["$SYS.REQ.SERVER.*.RELOAD".into()],
        })
        .encode(system)
        .unwrap_or_else(|e| panic!("{e}"));
    Creds::render_key(&jwt, &user)
        .unwrap_or_else(|e| panic!("{e}"))
        .expose()
        .to_string()
}

fn manifest(roots: &sim::trust::Roots, creds: &str, memory_store: &str) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{ name: nats }}
---
apiVersion: nats.mikluko.io/v1beta1
kind: NatsOperatorTrust
metadata: {{ name: live, namespace: nats }}
spec:
  operatorJWT: {}
  systemAccountJWT: {}
---
apiVersion: v1
kind: Secret
metadata: {{ name: controller-creds, namespace: nats }}
stringData:
  user.creds: {}
---
apiVersion: cluster.nats.mikluko.io/v1beta1
kind: NatsCluster
metadata: {{ name: trusted, namespace: nats }}
spec:
  version: 2.15.1
  replicas: 3
  resources: {{ limits: {{ memory: 1Gi }} }}
  jetstream: {{ limits: {{ maxMemoryStore: {memory_store} }} }}
  auth:
    trustRef: {{ name: live }}
    systemCredentials:
      secretKeyRef: {{ name: controller-creds }}
"#,
        q(&roots.operator_jwt),
        q(&roots.system_jwt),
        q(creds)
    )
}

async fn restarts(host: &Host) -> Vec<(String, u32)> {
    use cluster_controller::server_lifecycle::ServerLifecycle;
    let cluster = read_cluster(host, "nats", "trusted")
        .await
        .expect("cluster");
    host.server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe")
        .into_iter()
        .map(|o| (o.server_name, o.restarts))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_the_server_does_not_answer_falls_back_to_a_restart() {
    let host = Host::start(&["nats"], &["cluster"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().expect("temp dir");
    let roots = sim::trust::Roots::sign("live").unwrap_or_else(|e| panic!("{e}"));
    let creds = creds_without_reload(&roots.system);
    apply(&host, dir.path(), &manifest(&roots, &creds, "384Mi")).await;
    let obj = ObjectRef::parse("NatsCluster/nats/trusted").expect("ref");
    wait_object(&host, &obj, "settled and up to date", WAIT, up_to_date).await;
    let before = restarts(&host).await;
    apply(&host, dir.path(), &manifest(&roots, &creds, "768Mi")).await;
    let done = wait_object(&host, &obj, "the change applied", WAIT, |v| {
        up_to_date(v)
            && v["status"]["rollout"]["updated"].as_array().map(Vec::len) == Some(3)
            && v["metadata"]["generation"] == v["status"]["observedGeneration"]
            && v["status"]["config"]["appliedBy"] == "Restart"
    })
    .await;
    let reason = done["status"]["config"]["restartReason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    println!("status.config: {}", done["status"]["config"]);
    assert!(
        reason.contains("failed, restarted instead"),
        "the restart says the reload failed: {reason}"
    );
    let after = restarts(&host).await;
    for ((name, b), (_, a)) in before.iter().zip(&after) {
        assert!(a > b, "{name} restarted: {b} -> {a}");
    }
    let events: Api<Event> = Api::namespaced(host.client(), "nats");
    let told: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RolloutStep"))
        .filter_map(|e| e.message)
        .filter(|m| m.contains("its reload failed"))
        .collect();
    println!("RolloutStep Events: {told:#?}");
    for (name, _) in &before {
        assert!(
            told.iter().any(|m| m.contains(name.as_str())),
            "a RolloutStep Event says {name}'s reload failed: {told:?}"
        );
    }
}
