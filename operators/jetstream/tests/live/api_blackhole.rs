//! API tier + live NATS: one tenant's unreachable NATS delays only its own resources. A
//! NatsConnection points at a blackhole on loopback (a listener that accepts and never answers,
//! so every dial waits out its timeout) with some NatsStreams on it, beside 200 NatsStreams on a
//! real nats-server through another NatsConnection: every healthy stream reaches Ready, the
//! blackholed ones stay not Ready naming the failed dial. The time to all-Ready is printed with
//! the blackhole present and, in a namespace of its own, without it (figures, not assertions).

use std::time::{Duration, Instant};

use controller_kit::metrics::Metrics;
use kube::api::{Api, ListParams, PostParams};
use nats_api::jetstream::NatsStream;
use nats_api::nats::NatsConnection;
use serde_json::{Value, json};
use sim::testkit::{AbortOnDrop, apiserver_with_crds, condition, message};
use sim::topology::{Topology, TopologySpec};
use tokio::net::TcpListener;

const HEALTHY: usize = 200;
const BLACKHOLED: usize = 5;
/// Generous: all 200 streams of one namespace Ready well within it on a shared 2-core machine.
const ALL_READY: Duration = Duration::from_secs(240);

/// A listener on loopback that accepts every connection and never writes a byte; the accepted
/// sockets are held open until the task is aborted (when the guard drops).
async fn blackhole() -> (String, AbortOnDrop) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback listener");
    let addr = listener.local_addr().expect("its address");
    let task = AbortOnDrop::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (format!("nats://{addr}"), task)
}

async fn create_connection(client: &kube::Client, ns: &str, name: &str, servers: Vec<String>) {
    let conn: NatsConnection = serde_json::from_value(json!({
        "apiVersion": "nats.mikluko.io/v1beta1",
        "kind": "NatsConnection",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"servers": servers},
    }))
    .expect("a NatsConnection");
    Api::<NatsConnection>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &conn)
        .await
        .unwrap_or_else(|e| panic!("creating NatsConnection {ns}/{name}: {e}"));
}

async fn create_streams(client: &kube::Client, ns: &str, prefix: &str, conn: &str, n: usize) {
    let api: Api<NatsStream> = Api::namespaced(client.clone(), ns);
    for i in 0..n {
        let name = format!("{prefix}-{i:03}");
        let stream: NatsStream = serde_json::from_value(json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1",
            "kind": "NatsStream",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "connectionRef": {"name": conn},
                "subjects": [format!("{ns}.{name}.>")],
                "storage": "Memory",
                "replicas": 1,
                "deletionPolicy": "Delete",
            },
        }))
        .expect("a NatsStream");
        api.create(&PostParams::default(), &stream)
            .await
            .unwrap_or_else(|e| panic!("creating NatsStream {ns}/{name}: {e}"));
    }
}

/// The streams of `ns` whose name starts with `prefix`, as JSON.
async fn streams(client: &kube::Client, ns: &str, prefix: &str) -> Result<Vec<Value>, String> {
    let api: Api<NatsStream> = Api::namespaced(client.clone(), ns);
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .iter()
        .filter(|s| {
            s.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .map(|s| serde_json::to_value(s).unwrap_or_default())
        .collect())
}

fn ready(stream: &Value) -> bool {
    condition(stream, "Ready").is_some_and(|(status, _)| status == "True")
}

/// Waits until all `n` streams of `ns`/`prefix` are Ready; returns how long it took from `since`.
async fn all_ready(
    client: &kube::Client,
    ns: &str,
    prefix: &str,
    n: usize,
    since: Instant,
) -> Duration {
    sim::wait::poll(
        &format!("{n} NatsStreams of {ns} Ready"),
        ALL_READY,
        || async move {
            let all = streams(client, ns, prefix).await?;
            let ready = all.iter().filter(|s| ready(s)).count();
            if ready == n {
                Ok(Some(()))
            } else {
                let stuck = all
                    .iter()
                    .find(|s| !self::ready(s))
                    .map(|s| format!("{}: {:?}", s["metadata"]["name"], s["status"]["conditions"]));
                Err(format!("{ready} of {n} Ready; first not Ready: {stuck:?}"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    since.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_connection_delays_only_its_own_streams() {
    let api = apiserver_with_crds(&["quiet", "shared"]).await;
    let topo = Topology::start(TopologySpec::cluster(1))
        .await
        .expect("a nats-server boots");
    topo.wait_meta_leader(sim::testkit::WAIT)
        .await
        .expect("the server elects itself meta leader");
    let _controllers =
        crate::common::spawn_controller(api.client(), Duration::from_secs(30), Metrics::default());
    let client = api.client();

    // Without a blackhole: 200 streams on one healthy connection.
    let started = Instant::now();
    create_connection(&client, "quiet", "healthy", topo.client_urls()).await;
    create_streams(&client, "quiet", "q", "healthy", HEALTHY).await;
    let without = all_ready(&client, "quiet", "q", HEALTHY, started).await;
    println!(
        "{HEALTHY} healthy NatsStreams all Ready without a blackhole: {:.1} s",
        without.as_secs_f64()
    );

    // With one (the streams named apart: one server, one account): its streams created first, so their dials are in flight while the healthy ones
    // reconcile.
    let (hole, _hole) = blackhole().await;
    let started = Instant::now();
    create_connection(&client, "shared", "blackhole", vec![hole.clone()]).await;
    create_streams(&client, "shared", "dark", "blackhole", BLACKHOLED).await;
    create_connection(&client, "shared", "healthy", topo.client_urls()).await;
    create_streams(&client, "shared", "s", "healthy", HEALTHY).await;
    let with = all_ready(&client, "shared", "s", HEALTHY, started).await;
    println!(
        "{HEALTHY} healthy NatsStreams all Ready: {:.1} s without a blackhole, {:.1} s beside a \
         NatsConnection to a blackhole with {BLACKHOLED} NatsStreams on it",
        without.as_secs_f64(),
        with.as_secs_f64()
    );

    // The blackholed streams: not Ready, their condition naming the failed dial.
    let dark = sim::wait::poll(
        "the blackholed streams report ConnectFailed",
        ALL_READY,
        || async {
            let dark = streams(&client, "shared", "dark").await?;
            let failed = dark
                .iter()
                .filter(|s| {
                    condition(s, "Ready").is_some_and(|(status, reason)| {
                        status == "False" && reason == "ConnectFailed"
                    })
                })
                .count();
            if failed == BLACKHOLED {
                Ok(Some(dark))
            } else {
                Err(format!("{failed} of {BLACKHOLED} ConnectFailed: {dark:?}"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    for s in &dark {
        let m = message(s, "Ready");
        assert!(m.contains("NatsConnection shared/blackhole"), "{m}");
    }
    println!(
        "a blackholed stream's Ready: {}",
        message(&dark[0], "Ready")
    );
}
