//! The `auth-controller` binary against a real kube-apiserver 1.20: kubeconfig from the
//! environment, --resync, --metrics-addr and --system-connection; it signs story 02's trust roots
//! and serves /metrics with their conditions, signs its orders users and writes their creds, and
//! holds a user's deletion (nothing reachable to revoke it on) until force-delete releases it. One flow, run twice: as the admin, and as its chart
//! ServiceAccount with the chart installed (RBAC on, leader election on), where the server's
//! audit log then shows that not one request of it was forbidden and the binary stops on SIGTERM
//! with exit 0. A malformed --system-connection exits 2. Killed on drop.

use crate::apirig;

use std::path::Path;

use apirig::{Rig, wait_ready};
use e2e::installed::{Installed, LEADER_ELECTION, stop};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use nats_api::auth::{NatsOperator, NatsSystemAccount, NatsUser};
use serde_json::json;
use sim::apiserver::ApiServer;
use sim::testkit::{KillOnDrop, WAIT, is, spawn_binary, wait_for, wait_gone, wait_metrics};

const NS: &str = "nats-system";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_signs_and_serves_metrics() {
    let rig = Rig::bare(&[NS]).await;
    let _child = signs_and_serves_metrics(&rig.api, rig.api.kubeconfig(), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_its_chart_service_account_nothing_it_asks_is_refused() {
    // The release namespace is story 02's namespace too.
    let Some(chart) = Installed::cluster_wide(&[NS]).await else {
        return;
    };
    let sa = chart.identity("auth").await;
    let _shown = chart.show_refusals_on_panic(&sa);
    let mut child = signs_and_serves_metrics(&chart.api, sa.kubeconfig(), &LEADER_ELECTION).await;
    stop(&mut child, "auth-controller").await;
    chart.assert_nothing_refused(&sa);
}

/// Under `--watch-namespaces`, story 02's trust roots applied into a namespace not listed (before
/// the binary starts) get no status, no finalizer and no key Secrets, while those in the listed
/// namespace are signed; the audit shows no request refused, so nothing was even asked of the
/// other namespace (the chart's Roles grant nothing there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_trust_roots_in_an_unwatched_namespace_are_left_untouched() {
    const OTHER: &str = "elsewhere";
    let Some(chart) = Installed::namespaced(&[NS], &[OTHER]).await else {
        return;
    };
    for mut doc in sim::testkit::story_docs("docs/stories/02-auth-plane/01-trust-roots.yaml") {
        if doc["kind"] == "Namespace" {
            continue;
        }
        doc["metadata"]["namespace"] = json!(OTHER);
        sim::testkit::apply(&chart.api.client(), &doc)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let sa = chart.identity("auth").await;
    let _shown = chart.show_refusals_on_panic(&sa);
    let watch = format!("--watch-namespaces={NS}");
    let mut args = LEADER_ELECTION.to_vec();
    args.push(&watch);
    let mut child = signs_and_serves_metrics(&chart.api, sa.kubeconfig(), &args).await;
    let operator = Api::<NatsOperator>::namespaced(chart.api.client(), OTHER)
        .get("demo")
        .await
        .expect("the unwatched NatsOperator");
    assert!(operator.status.is_none(), "{:?}", operator.status);
    assert!(
        operator.metadata.finalizers.unwrap_or_default().is_empty(),
        "no finalizer on the unwatched NatsOperator"
    );
    let system = Api::<NatsSystemAccount>::namespaced(chart.api.client(), OTHER)
        .get("system")
        .await
        .expect("the unwatched NatsSystemAccount");
    assert!(system.status.is_none(), "{:?}", system.status);
    let secrets = Api::<Secret>::namespaced(chart.api.client(), OTHER)
        .list(&Default::default())
        .await
        .expect("listed");
    assert!(
        secrets.items.is_empty(),
        "no key Secret in {OTHER}: {:?}",
        secrets
            .items
            .iter()
            .map(|s| s.metadata.name.clone())
            .collect::<Vec<_>>()
    );
    stop(&mut child, "auth-controller").await;
    chart.assert_nothing_refused(&sa);
}

#[test]
fn a_system_connection_outside_the_watched_namespaces_exits_2() {
    let out = std::process::Command::new(sim::bin_exe!("auth-controller"))
        .args([
            "--system-connection",
            "nats-system/auth",
            "--watch-namespaces",
            "tenants",
        ])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not in --watch-namespaces"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts the binary with `kubeconfig` and `extra` flags, applies story 02's trust roots (as the
/// admin), waits until they are signed and the metrics say so; then story 02's orders users,
/// and deletes one; returns it running.
async fn signs_and_serves_metrics(
    api: &ApiServer,
    kubeconfig: &Path,
    extra: &[&str],
) -> KillOnDrop {
    let port = sim::ports::free_port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let mut args = vec![
        "--resync",
        "10s",
        "--metrics-addr",
        &metrics_addr,
        // Any free port: the default 8081 would clash between tests run at once.
        "--probe-addr",
        "127.0.0.1:0",
        "--system-connection",
        "nats-system/auth",
    ];
    args.extend(extra);
    let child = spawn_binary(&sim::bin_exe!("auth-controller"), kubeconfig, &args);
    for doc in sim::testkit::story_docs("docs/stories/02-auth-plane/01-trust-roots.yaml") {
        sim::testkit::apply(&api.client(), &doc)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    wait_ready(
        &Api::<NatsOperator>::namespaced(api.client(), NS),
        "demo",
        "True",
        "Signed",
    )
    .await;
    // The NatsConnection it names does not exist: nothing can be pushed, and it says why.
    wait_for(
        &Api::<NatsSystemAccount>::namespaced(api.client(), NS),
        "system",
        "system Unreachable",
        |o| is(o, "Ready", "True", "Signed") && is(o, "Distributed", "False", "Unreachable"),
    )
    .await;
    let text = wait_metrics(port, "/metrics answers", WAIT, |body| {
        body.contains("name=\"demo\",type=\"Ready\",reason=\"Signed\"} 1")
    })
    .await;
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");

    // Story 02's orders account and its users: each user signed, its creds Secret written.
    for doc in sim::testkit::story_docs("docs/stories/02-auth-plane/04-orders.yaml") {
        sim::testkit::apply(&api.client(), &doc)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let users = Api::<NatsUser>::namespaced(api.client(), NS);
    wait_ready(&users, "orders-app", "True", "Signed").await;
    let secrets = Api::<Secret>::namespaced(api.client(), NS);
    assert!(
        secrets
            .get_opt("orders-app-creds")
            .await
            .expect("get")
            .is_some(),
        "the creds Secret is written before the user is Ready"
    );
    // A user's deletion is held while its revocation cannot be distributed (the system
    // connection names nothing), until force-delete releases it; its creds Secret goes with it.
    users
        .delete("orders-app", &DeleteParams::default())
        .await
        .expect("deleted");
    wait_ready(&users, "orders-app", "False", "Distributing").await;
    users
        .patch(
            "orders-app",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                nats_api::auth::annotation::FORCE_DELETE: "",
            }}})),
        )
        .await
        .expect("force-delete set");
    wait_gone(&users, "orders-app").await;
    sim::wait::poll("orders-app-creds deleted with its user", WAIT, || {
        let secrets = secrets.clone();
        async move {
            let left = secrets
                .get_opt("orders-app-creds")
                .await
                .map_err(|e| e.to_string())?;
            Ok(left.is_none().then_some(()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    child
}

#[test]
fn a_malformed_system_connection_exits_2() {
    let out = std::process::Command::new(sim::bin_exe!("auth-controller"))
        .args(["--system-connection", "no-namespace"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("namespace/name"));
}
