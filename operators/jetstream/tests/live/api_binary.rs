//! The `jetstream-controller` binary against a real kube-apiserver 1.20 and a real 3-server
//! nats-server cluster: kubeconfig from the environment, --resync and --metrics-addr; it reports
//! its NatsConnection Connected, reconciles a stream, serves /metrics, and deletes the stream when
//! its NatsStream goes (deletionPolicy Delete). One flow, run twice: as the admin, and as its
//! chart ServiceAccount with the chart installed (RBAC on, leader election on), where the server's
//! audit log then shows that not one request of it was forbidden and the binary stops on SIGTERM
//! with exit 0. Killed on drop.

use crate::common;

use std::path::Path;

use e2e::installed::{Installed, LEADER_ELECTION, stop};
use kube::api::{Api, DeleteParams, PostParams};
use nats_api::jetstream::NatsStream;
use nats_api::nats::NatsConnection;
use serde_json::json;
use sim::apiserver::ApiServer;
use sim::testkit::{
    KillOnDrop, WAIT, apiserver_with_crds, is, spawn_binary, wait_for, wait_gone, wait_metrics,
};
use sim::topology::Topology;

const NS: &str = "nats";

/// The `jetstream-controller` binary: kubeconfig from the environment, --resync and
/// --metrics-addr; it reconciles a stream and serves /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reconciles_and_serves_metrics() {
    let api = apiserver_with_crds(&[NS]).await;
    let _running = reconciles_and_serves_metrics(&api, api.kubeconfig(), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_its_chart_service_account_nothing_it_asks_is_refused() {
    let Some(chart) = Installed::cluster_wide(&[NS]).await else {
        return;
    };
    let sa = chart.identity("jetstream").await;
    let _shown = chart.show_refusals_on_panic(&sa);
    let (mut child, _topo) =
        reconciles_and_serves_metrics(&chart.api, sa.kubeconfig(), &LEADER_ELECTION).await;
    stop(&mut child, "jetstream-controller").await;
    chart.assert_nothing_refused(&sa);
}

/// Under `--watch-namespaces`, a NatsConnection and a NatsStream in a namespace not listed
/// (there before the binary starts) get no status and no finalizer, and no stream on the
/// servers, while those in the listed namespace reconcile; the audit shows no request refused,
/// so nothing was even asked of the other namespace (the chart's Roles grant nothing there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_objects_in_an_unwatched_namespace_are_left_untouched() {
    const OTHER: &str = "elsewhere";
    let Some(chart) = Installed::namespaced(&[NS], &[OTHER]).await else {
        return;
    };
    let conns: Api<NatsConnection> = Api::namespaced(chart.api.client(), OTHER);
    let conn: NatsConnection = serde_json::from_value(json!({
        "apiVersion": "nats.mikluko.io/v1beta1",
        "kind": "NatsConnection",
        "metadata": {"name": "demo", "namespace": OTHER},
        "spec": {"servers": [format!("nats://127.0.0.1:{}", sim::ports::free_port())]},
    }))
    .expect("a NatsConnection");
    conns
        .create(&PostParams::default(), &conn)
        .await
        .expect("created");
    let streams: Api<NatsStream> = Api::namespaced(chart.api.client(), OTHER);
    let stream: NatsStream = serde_json::from_value(json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1",
        "kind": "NatsStream",
        "metadata": {"name": "elsewhere", "namespace": OTHER},
        "spec": {"connectionRef": {"name": "demo"}, "subjects": ["elsewhere.>"],
                 "storage": "Memory", "replicas": 1},
    }))
    .expect("a NatsStream");
    streams
        .create(&PostParams::default(), &stream)
        .await
        .expect("created");
    let sa = chart.identity("jetstream").await;
    let _shown = chart.show_refusals_on_panic(&sa);
    let watch = format!("--watch-namespaces={NS}");
    let mut args = LEADER_ELECTION.to_vec();
    args.push(&watch);
    let (mut child, topo) = reconciles_and_serves_metrics(&chart.api, sa.kubeconfig(), &args).await;
    let conn = conns
        .get("demo")
        .await
        .expect("the unwatched NatsConnection");
    assert!(conn.status.is_none(), "{:?}", conn.status);
    let stream = streams
        .get("elsewhere")
        .await
        .expect("the unwatched NatsStream");
    assert!(stream.status.is_none(), "{:?}", stream.status);
    assert!(
        stream.metadata.finalizers.unwrap_or_default().is_empty(),
        "no finalizer on the unwatched NatsStream"
    );
    let nats = topo.connect().await.expect("a client of the APP account");
    let js = async_nats::jetstream::new(nats);
    assert!(
        js.get_stream("elsewhere").await.is_err(),
        "no stream on the servers for the unwatched NatsStream"
    );
    stop(&mut child, "jetstream-controller").await;
    chart.assert_nothing_refused(&sa);
}

/// Boots a 3-server cluster, starts the binary with `kubeconfig` and `extra` flags, and drives
/// a NatsConnection and a NatsStream through it (as the admin); returns both running.
async fn reconciles_and_serves_metrics(
    api: &ApiServer,
    kubeconfig: &Path,
    extra: &[&str],
) -> (KillOnDrop, Topology) {
    let topo = common::cluster().await;
    topo.wait_meta_leader(WAIT)
        .await
        .expect("the cluster elects a meta leader");
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
    ];
    args.extend(extra);
    let child = spawn_binary(&sim::bin_exe!("jetstream-controller"), kubeconfig, &args);
    common::create_demo_connection(api.client(), NS, topo.client_urls()).await;
    let conns: Api<NatsConnection> = Api::namespaced(api.client(), NS);
    wait_for(&conns, "demo", "NatsConnection Ready", |o| {
        is(o, "Ready", "True", "Connected")
    })
    .await;
    let streams: Api<NatsStream> = Api::namespaced(api.client(), NS);
    let stream: NatsStream = serde_json::from_value(json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1",
        "kind": "NatsStream",
        "metadata": {"name": "bin", "namespace": NS},
        "spec": {"connectionRef": {"name": "demo"}, "subjects": ["bin.>"], "storage": "Memory",
                 "replicas": 1, "deletionPolicy": "Delete"},
    }))
    .expect("a NatsStream");
    streams
        .create(&PostParams::default(), &stream)
        .await
        .unwrap_or_else(|e| panic!("creating: {e}"));
    wait_for(&streams, "bin", "bin Ready", |o| {
        is(o, "Ready", "True", "MatchesSpec")
    })
    .await;
    let text = wait_metrics(port, "/metrics answers", WAIT, |body| {
        body.contains("name=\"bin\",type=\"Ready\",reason=\"MatchesSpec\"} 1")
    })
    .await;
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");

    // Its deletion: the stream is deleted on the servers, then the finalizer released.
    streams
        .delete("bin", &DeleteParams::default())
        .await
        .expect("deleted");
    wait_gone(&streams, "bin").await;
    let nats = topo.connect().await.expect("a client of the APP account");
    let js = async_nats::jetstream::new(nats);
    assert!(
        js.get_stream("bin").await.is_err(),
        "the stream is gone from the servers"
    );
    (child, topo)
}
