//! API tier: the `cluster-controller` binary against a real kube-apiserver 1.20 — its flags
//! reach what it renders (`--controller-namespace` in the NetworkPolicy,
//! `--allow-gateway-without-tls`), it reconciles, and it serves /metrics. One flow, run twice: as
//! the admin, and as its chart ServiceAccount with the chart installed (RBAC on, leader election
//! on), where the server's audit log then shows that not one request of it was forbidden and the
//! binary stops on SIGTERM with exit 0 (its Lease released). Run namespaced too, with
//! `--watch-namespaces`, where a NatsCluster in a namespace not listed is left untouched.

use std::path::Path;
use std::time::Duration;

use e2e::installed::{Installed, LEADER_ELECTION, serves_watch_namespaces, stop};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, PostParams};
use nats_api::cluster::{NatsCluster, reason};
use nats_api::nats::NatsReferenceGrant;
use serde_json::json;
use sim::apiserver::ApiServer;
use sim::testkit::{KillOnDrop, spawn_binary, wait_metrics, wait_until};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "nats";

fn quickstart() -> serde_json::Value {
    sim::testkit::story_object(
        "docs/stories/01-quickstart/01-natscluster.yaml",
        "NatsCluster",
    )
}

fn binary() -> std::path::PathBuf {
    sim::bin_exe!("cluster-controller")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reconciles_with_its_flags_and_serves_metrics() {
    let api = sim::testkit::apiserver_with_crds(&[NS]).await;
    let _child = reconciles_with_its_flags(&api, api.kubeconfig(), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_its_chart_service_account_nothing_it_asks_is_refused() {
    let Some(chart) = Installed::cluster_wide(&[NS]).await else {
        return;
    };
    as_its_service_account(&chart, &LEADER_ELECTION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_as_its_chart_service_account_nothing_it_asks_is_refused() {
    if !serves_watch_namespaces(&binary()) {
        return;
    }
    let Some(chart) = Installed::namespaced(&[NS], &[]).await else {
        return;
    };
    let watch = format!("--watch-namespaces={NS}");
    let mut args = LEADER_ELECTION.to_vec();
    args.push(&watch);
    as_its_service_account(&chart, &args).await;
}

/// Under `--watch-namespaces`, a NatsCluster in a namespace not listed (there before the binary
/// starts) gets no status, no finalizer and no StatefulSet, while the one in the listed
/// namespace reconciles; the audit shows no request refused, so nothing was even asked of the
/// other namespace (its chart Roles grant nothing there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_a_natscluster_in_an_unwatched_namespace_is_left_untouched() {
    const OTHER: &str = "elsewhere";
    let Some(chart) = Installed::namespaced(&[NS], &[OTHER]).await else {
        return;
    };
    let other: Api<NatsCluster> = Api::namespaced(chart.api.client(), OTHER);
    let mut c: NatsCluster = serde_json::from_value(quickstart()).expect("a NatsCluster");
    c.metadata.namespace = Some(OTHER.into());
    other
        .create(&PostParams::default(), &c)
        .await
        .expect("created");
    let sa = chart.identity("cluster").await;
    let _shown = chart.show_refusals_on_panic(&sa);
    let watch = format!("--watch-namespaces={NS}");
    let mut args = LEADER_ELECTION.to_vec();
    args.push(&watch);
    let mut child = reconciles_with_its_flags(&chart.api, sa.kubeconfig(), &args).await;
    let watched = Api::<NatsCluster>::namespaced(chart.api.client(), NS)
        .get("demo")
        .await
        .expect("the watched NatsCluster");
    assert!(watched.status.is_some(), "the watched one has a status");
    let untouched = other.get("demo").await.expect("the unwatched NatsCluster");
    assert!(untouched.status.is_none(), "{:?}", untouched.status);
    assert!(
        untouched.metadata.finalizers.unwrap_or_default().is_empty(),
        "no finalizer on the unwatched one"
    );
    let sets = Api::<StatefulSet>::namespaced(chart.api.client(), OTHER)
        .list(&Default::default())
        .await
        .expect("listed");
    assert!(sets.items.is_empty(), "no StatefulSet in {OTHER}");
    stop(&mut child, "cluster-controller").await;
    chart.assert_nothing_refused(&sa);
}

/// A leaf remote's grant withdrawn, as the chart's ServiceAccount: the credentials the grant
/// handed to the NatsCluster's namespace (copied into `<name>-leaf-remotes`) leave it,
/// LeafnodesConnected names the remote refused, and not one request was refused — the Secret is
/// emptied by a patch, since the chart grants no `delete` on Secrets (docs/security.md, attack
/// table). (The config without the remote reaches each server by a rollout step, which waits on
/// Ready pods this apiserver has no kubelet for.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_its_chart_service_account_a_withdrawn_leaf_grant_takes_the_copied_creds_back() {
    const HUBS: &str = "hubs";
    let Some(chart) = Installed::cluster_wide(&[NS, HUBS]).await else {
        return;
    };
    let admin = chart.api.client();
    for doc in [
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "hub-creds", "namespace": HUBS},
               "stringData": {"user.creds": "creds of hub"}}),
        json!({"apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
               "metadata": {"name": "hub", "namespace": HUBS},
               "spec": {"servers": ["nats://hub.example:7422"],
                        "credentials": {"secretKeyRef": {"name": "hub-creds"}}}}),
        json!({"apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsReferenceGrant",
               "metadata": {"name": "edges", "namespace": HUBS},
               "spec": {"from": [{"group": "cluster.nats.mikluko.io", "kind": "NatsCluster", "namespace": NS}],
                        "to": [{"group": "nats.mikluko.io", "kind": "NatsConnection", "name": "hub"}]}}),
    ] {
        sim::testkit::apply(&admin, &doc)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let sa = chart.identity("cluster").await;
    let _shown = chart.show_refusals_on_panic(&sa);
    let port = sim::ports::free_port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let mut args = vec![
        "--metrics-addr",
        &metrics_addr,
        "--probe-addr",
        "127.0.0.1:0",
    ];
    args.extend(LEADER_ELECTION);
    let mut child = spawn_binary(&binary(), sa.kubeconfig(), &args);
    let mut doc = quickstart();
    doc["metadata"]["name"] = json!("edge");
    doc["spec"]["leafRemotes"] = json!([{"connectionRef": {"name": "hub", "namespace": HUBS}}]);
    let c: NatsCluster = serde_json::from_value(doc).expect("a NatsCluster");
    Api::<NatsCluster>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &c)
        .await
        .expect("created");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let files = || async {
        secrets
            .get_opt("edge-leaf-remotes")
            .await
            .expect("read")
            .map(|s| s.data.unwrap_or_default())
    };
    let copied = wait_until("the remote's creds copied", WAIT, files, |d| {
        d.as_ref().is_some_and(|d| !d.is_empty())
    })
    .await
    .unwrap_or_default();
    assert_eq!(copied["remote-0.creds"].0, b"creds of hub".to_vec());

    Api::<NatsReferenceGrant>::namespaced(admin.clone(), HUBS)
        .delete("edges", &Default::default())
        .await
        .expect("grant deleted");
    // The copy leaves the namespace: the Secret stays (the NatsCluster owns it), with no file.
    wait_until(
        "the withdrawn creds gone from edge-leaf-remotes",
        WAIT,
        files,
        |d| d.as_ref().is_some_and(|d| d.is_empty()),
    )
    .await;
    let clusters: Api<NatsCluster> = Api::namespaced(admin.clone(), NS);
    let edge = sim::testkit::wait_for(
        &clusters,
        "edge",
        "LeafnodesConnected RemoteNotPermitted",
        |c| {
            sim::testkit::is(
                c,
                "LeafnodesConnected",
                "False",
                reason::REMOTE_NOT_PERMITTED,
            )
        },
    )
    .await;
    assert!(
        sim::testkit::message(&edge, "LeafnodesConnected").contains("hubs/hub"),
        "{}",
        edge["status"]
    );
    stop(&mut child, "cluster-controller").await;
    chart.assert_nothing_refused(&sa);
}

/// The flow as the chart's `cluster` ServiceAccount, then SIGTERM, then the audit's verdict.
async fn as_its_service_account(chart: &Installed, args: &[&str]) {
    let sa = chart.identity("cluster").await;
    let _shown = chart.show_refusals_on_panic(&sa);
    let mut child = reconciles_with_its_flags(&chart.api, sa.kubeconfig(), args).await;
    stop(&mut child, "cluster-controller").await;
    chart.assert_nothing_refused(&sa);
}

/// Starts the binary with `kubeconfig` and `extra` flags, has it reconcile a gateway cluster,
/// checks its flags reached what it rendered and its /metrics; returns it running.
async fn reconciles_with_its_flags(
    api: &ApiServer,
    kubeconfig: &Path,
    extra: &[&str],
) -> KillOnDrop {
    let port = sim::ports::free_port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let mut args = vec![
        "--metrics-addr",
        &metrics_addr,
        // Any free port: the default 8081 would clash between tests run at once.
        "--probe-addr",
        "127.0.0.1:0",
        "--controller-namespace",
        "ops",
        "--cluster-domain",
        "example.internal",
        "--allow-gateway-without-tls",
    ];
    args.extend(extra);
    let child = spawn_binary(&binary(), kubeconfig, &args);
    let clusters: Api<NatsCluster> = Api::namespaced(api.client(), NS);
    let mut doc = quickstart();
    doc["spec"]["gateway"] = json!({
        "discovery": "Explicit",
        "remotes": [{"name": "west", "url": "nats://west.example:7222"}],
    });
    let c: NatsCluster = serde_json::from_value(doc).expect("a NatsCluster");
    clusters
        .create(&PostParams::default(), &c)
        .await
        .expect("created");

    let sets: Api<StatefulSet> = Api::namespaced(api.client(), NS);
    sim::wait::poll("the three StatefulSets", WAIT, || {
        let sets = sets.clone();
        async move {
            let mut n = 0;
            for i in 0..3 {
                n += usize::from(
                    sets.get_opt(&format!("demo-{i}"))
                        .await
                        .map_err(|e| e.to_string())?
                        .is_some(),
                );
            }
            Ok((n == 3).then_some(()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // --controller-namespace: the only namespace admitted to the monitoring port.
    let np = Api::<NetworkPolicy>::namespaced(api.client(), NS)
        .get("demo")
        .await
        .expect("the NetworkPolicy");
    let text = serde_json::to_string(&np).expect("json");
    assert!(text.contains("\"ops\""), "{text}");
    assert!(!text.contains("nats-system"), "{text}");
    // --cluster-domain: the routes dial the pods under it.
    let cm = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(api.client(), NS)
        .get("demo-0-config")
        .await
        .expect("ConfigMap");
    let conf = &cm.data.expect("data")["nats.conf"];
    assert!(
        conf.contains("demo-1-0.demo-headless.nats.svc.example.internal"),
        "{conf}"
    );
    // --allow-gateway-without-tls: the gateway is rendered instead of refused.
    assert!(conf.contains("gateway"), "{conf}");

    let body = wait_metrics(port, "/metrics with demo's conditions", WAIT, |body| {
        // The pass counter is bumped once the pass returns, just after its status is written.
        body.contains("name=\"demo\"")
            && body.contains("type=\"Ready\"")
            && body.contains("nats_operator_reconcile_total{controller=\"NatsCluster\"}")
    })
    .await;
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    assert!(!body.contains("GatewayWithoutTLS"), "{body}");
    child
}

/// Story 12: given a serving certificate, /metrics is served over TLS only — a client trusting
/// the CA reads it, a plain-HTTP request gets no answer — and a certificate that does not load
/// stops the binary naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_over_tls_when_a_serving_certificate_is_given() {
    use cluster_controller::route_ca::RouteCa;
    let api = sim::testkit::apiserver_with_crds(&[NS]).await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let ca = RouteCa::generate("metrics", time::OffsetDateTime::now_utc()).expect("a CA");
    let issued = sim::testkit::localhost_cert(&ca);
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &issued.cert_pem).expect("write");
    std::fs::write(&key, &issued.key_pem).expect("write");
    let port = sim::ports::free_port();
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let _child = spawn_binary(
        &binary(),
        api.kubeconfig(),
        &[
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--probe-addr",
            "127.0.0.1:0",
            "--metrics-tls-cert",
            &cert_arg,
            "--metrics-tls-key",
            &key_arg,
        ],
    );
    let https = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(issued.ca_pem.as_bytes()).expect("the CA"),
        )
        .build()
        .expect("a client");
    let url = format!("https://localhost:{port}/metrics");
    let body = sim::wait::poll("/metrics over TLS", WAIT, || {
        let (https, url) = (https.clone(), url.clone());
        async move {
            let r = https.get(&url).send().await.map_err(|e| e.to_string())?;
            Ok(Some((
                r.status(),
                r.text().await.map_err(|e| e.to_string())?,
            )))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(body.0, reqwest::StatusCode::OK);
    assert!(body.1.contains("nats_operator_leader{"), "{}", body.1);
    // In the clear: the TLS listener answers no HTTP.
    let plain = sim::testkit::metrics(port).await.unwrap_or_default();
    assert!(!plain.starts_with("HTTP/1.1 200"), "{plain}");

    let out = std::process::Command::new(binary())
        .env("KUBECONFIG", api.kubeconfig())
        .args([
            "--metrics-tls-cert",
            &key_arg,
            "--metrics-tls-key",
            &key_arg,
        ])
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&key_arg) && stderr.contains("--metrics-tls-cert"),
        "{stderr}"
    );
    let out = std::process::Command::new(binary())
        .args(["--metrics-tls-cert", &cert_arg])
        .output()
        .expect("the binary runs");
    assert_eq!(
        out.status.code(),
        Some(2),
        "a cert without its key is a usage error"
    );
}

/// Memory: the binary's resident size with the quickstart NatsCluster reconciled and 2,000
/// Secrets of 10 KiB in a namespace it has nothing in (a shared cluster's), printed as a figure
/// (the hardening issue's before/after; no bound asserted in the gate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resident_size_with_two_thousand_unrelated_secrets() {
    let crds = nats_api::crds::all();
    let api = ApiServer::start_seeded(&std::env::temp_dir(), &crds)
        .await
        .expect("kube-apiserver");
    api.install_crds(&crds).await.expect("CRDs");
    for ns in [NS, "elsewhere"] {
        api.create_namespace(ns).await.expect("namespace");
    }
    sim::testkit::memory::unrelated_secrets(&api.client(), "elsewhere", 2000, 10 * 1024).await;
    let child = reconciles_with_its_flags(&api, api.kubeconfig(), &[]).await;
    let rss = sim::testkit::memory::rss_kib(child.0.id()).expect("the binary's VmRSS");
    eprintln!(
        "cluster-controller RSS with the quickstart NatsCluster and 2,000 unrelated 10 KiB Secrets: {:.1} MiB",
        rss as f64 / 1024.0
    );
}
