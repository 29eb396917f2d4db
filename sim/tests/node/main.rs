//! The node backend against itself (docs/node.md): the node comes up, runs three nats-servers
//! as a StatefulSet the way the cluster controller renders them (routes by cluster DNS names,
//! JetStream on PVCs, non-root under a read-only root), and goes down leaving the host as it was.
//!
//! Root and the node's parts are needed (`just node-install`); without them the test says what is
//! missing and returns. Built only with `--features node` (the nightly job): the node is one per
//! machine and its build is not part of the gate's install step.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, LogParams, PostParams};
use serde_json::Value;
use sim::node::{Machine, Node, missing};
use sim::wait::poll;

const NATS_VERSION: &str = "2.15.1";

fn cache() -> PathBuf {
    std::env::var_os("NATS_OPERATORS_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/nats-operators"))
        })
        .expect("HOME or NATS_OPERATORS_CACHE")
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Every pod's phase, readiness, container states and the tail of its log: what a failed wait shows.
async fn describe(pods: &Api<Pod>) -> String {
    let mut out = String::new();
    for p in pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let name = p.metadata.name.clone().unwrap_or_default();
        let status = serde_json::to_string(&p.status).unwrap_or_default();
        let log = pods
            .logs(
                &name,
                &LogParams {
                    tail_lines: Some(20),
                    ..LogParams::default()
                },
            )
            .await
            .unwrap_or_else(|e| format!("(no log: {e})"));
        out.push_str(&format!("--- {name}\n{status}\n{log}\n"));
    }
    out
}

async fn monitor(http: &reqwest::Client, ip: &str, path: &str) -> Result<Value, String> {
    let url = format!("http://{ip}:8222{path}");
    let resp = http
        .get(&url)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    resp.json().await.map_err(|e| format!("{url}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nats_servers_run_as_a_statefulset_and_the_host_is_restored() {
    let cache = cache();
    let gaps = missing(&Machine::probe(&cache), &cache);
    if !gaps.is_empty() {
        eprintln!("skipped: the node cannot run here: {}", gaps.join("; "));
        return;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let t0 = Instant::now();
    let node = Node::up(&cache, dir.path(), 3)
        .await
        .unwrap_or_else(|e| panic!("node up: {e}"));
    eprintln!("figure: node Ready in {:.1} s", t0.elapsed().as_secs_f64());
    let binary = cache
        .join("nats-server")
        .join(NATS_VERSION)
        .join("nats-server");
    node.import_binary(
        &binary,
        "nats-server",
        NATS_VERSION,
        "docker.io/library/nats",
    )
    .unwrap_or_else(|e| panic!("importing nats-server: {e}"));

    let client = node.client();
    let ns = "node-statefulset";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut object = Namespace::default();
    object.metadata.name = Some(ns.into());
    namespaces
        .create(&PostParams::default(), &object)
        .await
        .expect("the test's namespace");
    let t1 = Instant::now();
    node.apply_in(ns, include_str!("statefulset.yaml"))
        .await
        .unwrap_or_else(|e| panic!("applying the StatefulSet: {e}"));

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let waited = poll(
        "three nats pods Ready",
        Duration::from_secs(180),
        || async {
            let list = pods
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let ips: Vec<String> = list
                .items
                .iter()
                .filter(|p| ready(p))
                .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
                .collect();
            Ok((ips.len() == 3).then_some(ips))
        },
    )
    .await;
    let ips = match waited {
        Ok(ips) => ips,
        Err(e) => panic!("{e}\n{}", describe(&pods).await),
    };
    eprintln!(
        "figure: StatefulSet applied to three pods Ready in {:.1} s",
        t1.elapsed().as_secs_f64()
    );

    // Each server routes to the two others, over the names the cluster DNS gave it.
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("an HTTP client");
    for ip in &ips {
        let routez = monitor(&http, ip, "/routez")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let routes = routez["num_routes"].as_u64().unwrap_or_default();
        assert!(routes >= 2, "{ip} has {routes} routes: {routez}");
        let jsz = monitor(&http, ip, "/jsz")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(jsz["meta_cluster"]["cluster_size"], 3, "{ip}: {jsz}");
    }

    let t2 = Instant::now();
    let left = node.down().await;
    eprintln!(
        "figure: down (drain, kill, restore) in {:.1} s",
        t2.elapsed().as_secs_f64()
    );
    assert!(
        left.is_empty(),
        "the host differs from its baseline after down: {left:#?}"
    );
}
