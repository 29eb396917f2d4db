//! Live tier of reload and replacement under a system user: a NatsCluster under an operator
//! trust with `auth.systemCredentials` on the local server lifecycle against a real apiserver and real
//! nats-server processes. A reloadable change (a raised JetStream memory store, nothing else
//! changed) is reloaded over `$SYS` and confirmed by the `/varz` digest with no restart;
//! `replace-server` evacuates, removes, deletes and recreates the server, and the gate holds
//! until the meta leader lists it again after the removal tombstone (~5 minutes).
//!
//! The gate proves the hold with the recreated server up and ready while the meta leader does
//! not list it yet (about a minute); the nightly tier waits the tombstone out and sees the gate
//! open (docs/testing.md, "Tiers").

use std::path::Path;
use std::time::{Duration, Instant};

use cluster_controller::server_lifecycle::{ObservedServer, ServerLifecycle};
use sim::control_plane::{Host, ObjectRef, condition_of};
use sim::controlled::read_cluster;
use sim::testkit::wait_object;

const WAIT: Duration = Duration::from_secs(180);
const REPLACE: &str = "cluster.nats.mikluko.io/replace-server";

/// The trust roots and the system user's creds (signed by the sim, as its scenarios' are), and
/// the NatsCluster with `memory_store` as its JetStream memory store.
struct Trusted(sim::trust::GeneratedTrust);

impl Trusted {
    fn new() -> Self {
        Trusted(sim::trust::generate().unwrap_or_else(|e| panic!("{e}")))
    }

    fn manifest(&self, memory_store: &str) -> String {
        let text = format!(
            r#"apiVersion: v1
kind: Namespace
metadata: {{ name: nats }}
---
apiVersion: nats.mikluko.io/v1beta1
kind: NatsOperatorTrust
metadata: {{ name: live, namespace: nats }}
spec:
  operatorJWT: ${{trust.operator_jwt}}
  systemAccountJWT: ${{trust.system_account_jwt}}
---
apiVersion: v1
kind: Secret
metadata: {{ name: controller-creds, namespace: nats }}
stringData:
  user.creds: ${{trust.system_creds}}
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
"#
        );
        sim::control_plane::substitute(&text, &self.0.vars)
    }
}

/// Writes `text` into `dir` and applies it, its ports reserved (`reload_fallback` too).
pub(crate) async fn apply(host: &Host, dir: &Path, text: &str) {
    let path = dir.join("trusted.yaml");
    std::fs::write(&path, text).expect("manifest");
    let mut vars = std::collections::BTreeMap::new();
    for (_, v) in sim::controlled::reserve(host, &path).expect("reserve") {
        vars.extend(v);
    }
    host.apply_manifest(&path, &vars)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Progressing False UpToDate and Settled True (`reload_fallback` too).
pub(crate) fn up_to_date(v: &serde_json::Value) -> bool {
    let (s, r, _) = condition_of(v, "Progressing").unwrap_or_default();
    s == "False"
        && r == "UpToDate"
        && condition_of(v, "Settled").is_some_and(|(s, _, _)| s == "True")
}

async fn boot(memory_store: &str) -> (Host, tempfile::TempDir, Trusted, ObjectRef) {
    let host = Host::start(&["nats"], &["cluster"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().expect("temp dir");
    let trusted = Trusted::new();
    apply(&host, dir.path(), &trusted.manifest(memory_store)).await;
    let obj = ObjectRef::parse("NatsCluster/nats/trusted").expect("ref");
    wait_object(&host, &obj, "settled and up to date", WAIT, up_to_date).await;
    (host, dir, trusted, obj)
}

async fn observe(host: &Host) -> Vec<ObservedServer> {
    let cluster = read_cluster(host, "nats", "trusted")
        .await
        .expect("cluster");
    host.server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_memory_store_reloads_every_server_with_no_restart() {
    let (host, dir, trusted, obj) = boot("384Mi").await;
    let before = observe(&host).await;
    apply(&host, dir.path(), &trusted.manifest("768Mi")).await;
    let done = wait_object(&host, &obj, "reloaded", WAIT, |v| {
        v["status"]["config"]["appliedBy"] == "Reload"
            && up_to_date(v)
            && v["status"]["rollout"]["updated"].as_array().map(Vec::len) == Some(3)
            && v["metadata"]["generation"] == v["status"]["observedGeneration"]
    })
    .await;
    assert!(
        done["status"]["config"]["restartReason"].is_null(),
        "{}",
        done["status"]
    );
    let after = observe(&host).await;
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(
            a.restarts, b.restarts,
            "{} not restarted by a reload: {b:?} -> {a:?}",
            a.server_name
        );
    }
    assert_eq!(
        done["status"]["jetstream"]["limits"]["maxMemoryStore"], "768Mi",
        "{}",
        done["status"]
    );
}

/// The gate tier's replacement: evacuated, removed, deleted and recreated under the same name,
/// the server runs and is ready — and the gate still holds, since the meta leader lists it again
/// only after the removal tombstone. The same status the controller writes says both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_server_holds_the_gate_while_the_recreated_server_is_ready_but_unlisted() {
    let (host, _dir, _trusted, obj) = boot("384Mi").await;
    host.annotate(&obj, &format!("{REPLACE}=trusted-1"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let held = wait_object(
        &host,
        &obj,
        "trusted-1 rejoining, ready, the gate holding on it",
        WAIT,
        |v| {
            let (s, r, m) = condition_of(v, "Progressing").unwrap_or_default();
            let rejoining = v["status"]["removals"].as_array().is_some_and(|r| {
                r.iter()
                    .any(|e| e["name"] == "trusted-1" && e["phase"] == "Rejoining")
            });
            rejoining
                && v["status"]["readyReplicas"] == 3
                && s == "True"
                && r == "ReplacingServer"
                && m.contains("trusted-1")
                && m.contains("does not list it yet")
        },
    )
    .await;
    println!(
        "held {:?} after the annotation, with all three ready: {}",
        started.elapsed(),
        condition_of(&held, "Progressing").unwrap_or_default().2
    );
    assert!(
        held["metadata"]["annotations"][REPLACE].is_null(),
        "cleared once read"
    );
    let servers = observe(&host).await;
    assert!(servers.iter().all(|s| s.present && s.ready), "{servers:?}");
    assert!(
        held["status"]["rollout"]["current"].is_null()
            || held["status"]["rollout"]["current"] == "trusted-1",
        "no other server is stepped while the gate holds: {}",
        held["status"]
    );
}

/// Nightly tier (about six minutes): the gate holds through the tombstone and opens once the
/// meta leader lists the recreated server again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_server_holds_the_gate_until_the_meta_leader_lists_the_server_again() {
    let (host, _dir, _trusted, obj) = boot("384Mi").await;
    let started = Instant::now();
    host.annotate(&obj, &format!("{REPLACE}=trusted-1"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let rejoining = wait_object(&host, &obj, "trusted-1 rejoining", WAIT, |v| {
        v["status"]["removals"]
            .as_array()
            .is_some_and(|r| r.iter().any(|e| e["phase"] == "Rejoining"))
    })
    .await;
    assert!(
        rejoining["metadata"]["annotations"][REPLACE].is_null(),
        "cleared once read"
    );
    let recreated = Instant::now();
    let held = wait_object(&host, &obj, "the gate holding on the rejoin", WAIT, |v| {
        let (s, r, m) = condition_of(v, "Progressing").unwrap_or_default();
        s == "True" && r == "ReplacingServer" && m.contains("trusted-1")
    })
    .await;
    println!(
        "held: {}",
        condition_of(&held, "Progressing").unwrap_or_default().2
    );
    // The tombstone lapses after ~5 minutes; then the meta leader lists it and the removal ends.
    let done = wait_object(
        &host,
        &obj,
        "replacement done",
        Duration::from_secs(480),
        |v| up_to_date(v) && v["status"]["removals"].as_array().is_none_or(Vec::is_empty),
    )
    .await;
    let in_gate = recreated.elapsed();
    println!(
        "replacement took {:?}, {:?} of it rejoining",
        started.elapsed(),
        in_gate
    );
    assert!(
        in_gate >= Duration::from_secs(120),
        "the gate held through the tombstone, not {in_gate:?}: {}",
        done["status"]
    );
    let servers = observe(&host).await;
    assert!(servers.iter().all(|s| s.present && s.ready), "{servers:?}");
}
