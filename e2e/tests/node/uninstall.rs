//! `helm uninstall` before the resources (issue 43, item 4; seed 004's deadlock), on a real node:
//! story 02's tenant (every Nats kind, the Delete-policy stream, bucket and consumer; see
//! `teardown.rs`) running, then
//!
//! 1. `helm uninstall` with the chart's defaults: the pre-delete hook refuses, its message naming
//!    the resources (kind namespace/name); the uninstall fails, the controllers and every resource
//!    are as they were;
//! 2. `helm rollback` (the refused hook left the release `uninstalling`), `helm upgrade` with
//!    `uninstall.deleteResources: true`, then `helm uninstall`: the hook
//!    deletes every resource in the safe order while the controllers run and waits, the
//!    uninstall then removes the controllers; no Nats object is left, the Delete-policy stream
//!    and bucket are gone from the servers (their last answers) and no Event says a deletion was
//!    dropped or forced.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::teardown::{
    Dropped, PLATFORM, Streams, apply_and_wait, install, nats_objects, nothing_silently_kept,
    tenant,
};
use e2e::chart::{Helm, NAMESPACE, RELEASE};
use e2e::conformance::issuer::Issuers;
use e2e::on_node::Release;

/// What the deleting hook is given, and Helm's own bound above it.
const HOOK_TIMEOUT_SECONDS: u64 = 240;
const HELM_TIMEOUT_SECONDS: u64 = 330;

/// `helm uninstall` of the release: Helm's answer, and how long it took.
fn uninstall(helm: &Helm, kubeconfig: &std::path::Path) -> (Result<String, String>, f64) {
    let t0 = Instant::now();
    let kubeconfig = kubeconfig.display().to_string();
    let timeout = HELM_TIMEOUT_SECONDS.to_string();
    let out = helm
        .run_args(&[
            "uninstall",
            RELEASE,
            "--kubeconfig",
            &kubeconfig,
            "--namespace",
            NAMESPACE,
            "--timeout",
            &timeout,
        ])
        .map_err(|e| e.to_string());
    (out, t0.elapsed().as_secs_f64())
}

/// The termination messages of the hook's pods.
async fn hook_messages(client: &kube::Client) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/component=uninstall-hook"))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    list.into_iter()
        .flat_map(|p| {
            p.status
                .and_then(|s| s.container_statuses)
                .unwrap_or_default()
        })
        .filter_map(|c| c.state.and_then(|s| s.terminated).and_then(|t| t.message))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn helm_uninstall_refuses_while_nats_resources_exist_and_with_delete_resources_deletes_them()
{
    let dir = tempfile::tempdir().expect("a temp dir");
    let Some(installed) = install(dir.path()).await else {
        return;
    };
    let client = installed.node.client();
    let helm = Helm::find().expect("Helm");
    let issuers = Issuers::default();
    let ready = apply_and_wait(&installed, &tenant(&installed, &issuers, false)).await;
    eprintln!("figure: story 02's tenant applied to Ready in {ready:.1} s");
    let before = nats_objects(&client, &[PLATFORM]).await;

    // 1. Refused, naming them; nothing removed.
    let (refused, took) = uninstall(&helm, &installed.node.kubeconfig());
    eprintln!("figure: helm uninstall refused in {took:.1} s: {refused:?}");
    assert!(refused.is_err(), "the uninstall went on: {refused:?}");
    let messages = hook_messages(&client).await;
    let message = messages.join("\n");
    eprintln!("the hook said:\n{message}");
    for named in [
        "NatsCluster nats-tenant/demo",
        "NatsStream nats-tenant/orders",
        "NatsKeyValue nats-tenant/carts",
        "NatsConsumer nats-tenant/worker",
        "NatsUser nats-tenant/orders-app",
        "NatsOperator nats-tenant/demo",
    ] {
        assert!(
            message.contains(named),
            "the refusal names {named}: {message:?}"
        );
    }
    assert!(
        message.contains("uninstall.deleteResources=true"),
        "{message}"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let still = deployments
        .list(&ListParams::default())
        .await
        .expect("the Deployments");
    assert_eq!(still.items.len(), 3, "the controllers are still installed");
    let after = nats_objects(&client, &[PLATFORM]).await;
    assert_eq!(after.len(), before.len(), "every resource is still there");
    assert!(
        after.iter().all(|o| o.contains("deleting false")),
        "none is being deleted: {after:#?}"
    );

    // 2. Asked to delete them: the hook deletes in the safe order, then the uninstall goes on.
    // A failed pre-delete hook leaves the release `uninstalling`; a rollback to the installed
    // revision makes it deployed again (nothing in the cluster changes) so it can be upgraded.
    let kubeconfig = installed.node.kubeconfig().display().to_string();
    helm.run_args(&[
        "rollback",
        RELEASE,
        "--version",
        "1",
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        NAMESPACE,
    ])
    .unwrap_or_else(|e| panic!("helm rollback: {e}"));
    let release = Release::new(dir.path(), &installed.node.kubeconfig());
    release
        .upgrade(
            &client,
            Some(&format!(
                "{}uninstall:\n  deleteResources: true\n  timeoutSeconds: {HOOK_TIMEOUT_SECONDS}\n",
                super::teardown::VALUES
            )),
        )
        .await
        .unwrap_or_else(|e| panic!("helm upgrade: {e}"));
    let streams = Streams::watch(&client, PLATFORM).await;
    let dropped = Dropped::watch(&client, &[PLATFORM]);
    let (done, took) = uninstall(&helm, &installed.node.kubeconfig());
    if let Err(e) = &done {
        panic!(
            "helm uninstall with deleteResources failed after {took:.1} s: {e}\nthe hook said: {:?}\n{}",
            hook_messages(&client).await,
            nats_objects(&client, &[PLATFORM]).await.join("\n")
        );
    }
    eprintln!("figure: helm uninstall with uninstall.deleteResources done in {took:.1} s");
    let left = nats_objects(&client, &[PLATFORM]).await;
    assert!(left.is_empty(), "NATS objects left: {left:#?}");
    nothing_silently_kept(&streams, &dropped, "uninstall with deleteResources", false);
    drop((streams, dropped));
    let gone = sim::wait::poll(
        "the controllers' Deployments gone",
        Duration::from_secs(60),
        || async {
            match deployments.list(&ListParams::default()).await {
                Ok(l) if l.items.is_empty() => Ok(Some(())),
                Ok(l) => Err(format!("{} left", l.items.len())),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
    gone.unwrap_or_else(|e| panic!("{e}"));

    let left = installed.node.down().await;
    assert!(
        left.is_empty(),
        "the host differs from its baseline after down: {left:#?}"
    );
}
