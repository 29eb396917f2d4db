//! Teardown in any order (issue 43): story 02's whole tenant — trust roots, system users, the
//! NatsCluster, the orders account and its users, an R3 stream, a key-value bucket and a consumer,
//! all three with `deletionPolicy: Delete` — deleted at once, every object of every Nats kind in
//! one sweep as an Argo CD prune issues it (or in a random order with random small delays), with
//! the three controllers running in-process, the auth controller pushing over story 02's `auth`
//! connection and the NatsCluster's servers as local processes.
//!
//! Each run must end within 60 s with every object gone and nothing edited by hand; no stream or
//! bucket left on the servers (their last JSZ answers, read until the servers stop, list none);
//! no `DeletionPolicyNotRun` Event (no Delete silently turned into a Retain) and no `ServersGone`
//! release of the guard; and the NatsCluster's servers stopped after it, within the termination
//! grace, as the garbage collector and the kubelet stop pods.
//!
//! The gate runs three runs of each variant (`teardown::..._3_times`); the nightly tier twenty
//! (`teardown::..._20_times`, filtered out of the ci profile in `.config/nextest.toml`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_controller::server_lifecycle::ServerLifecycle;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use sim::control_plane::{Host, ObjectRef, auth_controller_with_system_connection};
use sim::testkit::{wait_condition, workspace_path};

const NS: &str = "nats-system";
/// Every run ends within this.
const WITHIN: Duration = Duration::from_secs(60);
const READY: Duration = Duration::from_secs(240);

/// Story 02's tenant, with the stream's deletionPolicy Delete, a key-value bucket `carts` and a
/// consumer `worker`, both Delete, on the `orders` connection (orders-app's creds).
fn tenant() -> String {
    let mut text = String::new();
    for f in [
        "01-trust-roots.yaml",
        "02-system-users.yaml",
        "03-natscluster.yaml",
        "04-orders.yaml",
        "05-stream.yaml",
    ] {
        let path = workspace_path(format!("docs/stories/02-auth-plane/{f}"));
        let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{f}: {e}"));
        text.push_str(&body);
        text.push_str("\n---\n");
    }
    let text = text.replace("  maxAge: 72h", "  maxAge: 72h\n  deletionPolicy: Delete");
    assert!(
        text.contains("deletionPolicy: Delete"),
        "the stream's policy"
    );
    format!(
        "{text}
apiVersion: jetstream.nats.mikluko.io/v1beta1
kind: NatsKeyValue
metadata:
  name: carts
  namespace: {NS}
spec:
  connectionRef:
    name: orders
  history: 1
  storage: File
  replicas: 3
  deletionPolicy: Delete
---
apiVersion: jetstream.nats.mikluko.io/v1beta1
kind: NatsConsumer
metadata:
  name: worker
  namespace: {NS}
spec:
  streamRef:
    name: orders
  ackPolicy: Explicit
  deletionPolicy: Delete
"
    )
}

/// A host running the three controllers as `sim up` does, the Service names resolved.
async fn host(dir: &std::path::Path) -> Host {
    let host = Host::start_in(dir, &[], &["cluster", "jetstream"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    host.add_controller("auth", auth_controller_with_system_connection(NS, "auth"));
    nats_wire::names::resolve_names_with(host.server_lifecycle().service_names())
        .unwrap_or_else(|e| panic!("{e}"));
    host
}

/// Every object of every Nats kind in `NS`, as (kind, name, uid), in the order of the CRDs.
async fn tenant_objects(host: &Host) -> Vec<(String, String, String, kube::core::ApiResource)> {
    let mut out = Vec::new();
    for crd in nats_api::crds::all() {
        let ar = sim::apiserver::crd_api_resource(&crd);
        let api: Api<DynamicObject> = Api::namespaced_with(host.client(), NS, &ar);
        let Ok(list) = api.list(&ListParams::default()).await else {
            continue;
        };
        for o in list.items {
            out.push((
                crd.spec.names.kind.clone(),
                o.metadata.name.clone().unwrap_or_default(),
                o.metadata.uid.clone().unwrap_or_default(),
                ar.clone(),
            ));
        }
    }
    out
}

/// Applies the tenant and waits until it serves: the NatsCluster Ready, the stream, the bucket
/// and the consumer Ready. The client TLS Secret is issued as `sim up` issues it.
async fn apply_tenant(host: &Host, pki: &mut sim::up::platform_pki::Pki) {
    host.apply_text(std::path::Path::new("tenant"), &tenant())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let clusters: Api<nats_api::cluster::NatsCluster> = Api::namespaced(host.client(), NS);
    let demo = clusters.get("demo").await.expect("NatsCluster demo");
    let dynamic: DynamicObject =
        serde_json::from_value(serde_json::to_value(&demo).expect("json")).expect("dynamic");
    pki.issue_missing(&host.client(), &[dynamic]).await;
    for (object, condition) in [
        ("NatsCluster/nats-system/demo", "Ready"),
        ("NatsStream/nats-system/orders", "Ready"),
        ("NatsKeyValue/nats-system/carts", "Ready"),
        ("NatsConsumer/nats-system/worker", "Ready"),
    ] {
        let o = ObjectRef::parse(object).expect("ref");
        wait_condition(host, &o, condition, READY).await;
    }
}

/// Reads each server's JSZ every 200 ms, keeping each one's last answer, until aborted.
fn watch_streams(
    monitors: Vec<String>,
) -> (Arc<Mutex<BTreeMap<String, u64>>>, sim::testkit::AbortOnDrop) {
    let last = Arc::new(Mutex::new(BTreeMap::new()));
    let sink = last.clone();
    let task = sim::testkit::AbortOnDrop::spawn(async move {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .build()
            .expect("http");
        loop {
            for m in &monitors {
                let url = format!("{m}/jsz?accounts=true&streams=true");
                if let Ok(r) = http.get(&url).send().await
                    && let Ok(v) = r.json::<serde_json::Value>().await
                    && let Some(n) = v["streams"].as_u64()
                {
                    sink.lock().expect("last").insert(m.clone(), n);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    (last, task)
}

/// Whether the servers of NatsCluster `ns/demo` are stopped as the kubelet stops a deleted pod:
/// the server lifecycle runs none, each of `pids` has exited, and their files are gone.
fn servers_stopped(host: &Host, ns: &str, pids: &[u32]) -> bool {
    !host
        .server_lifecycle()
        .clusters()
        .contains(&format!("{ns}/demo"))
        && !host.server_lifecycle().cluster_root(ns, "demo").exists()
        && pids
            .iter()
            .all(|p| nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p as i32), None).is_err())
}

/// A small PRNG (xorshift), seeded and printed so a failing order can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// One run: the tenant applied, then deleted all at once (`shuffle`: in a random order with
/// random delays of up to 300 ms), every check of the module doc; returns the seconds it took.
async fn run(host: &Host, pki: &mut sim::up::platform_pki::Pki, shuffle: Option<&mut Rng>) -> f64 {
    apply_tenant(host, pki).await;
    let cluster = sim::controlled::read_cluster(host, NS, "demo")
        .await
        .expect("cluster");
    let monitors: Vec<String> = (0..3)
        .map(|i| host.server_lifecycle().address(&cluster, i).monitor_url)
        .collect();
    let pids: Vec<u32> = (0..3)
        .filter_map(|i| host.server_lifecycle().pid(NS, "demo", i))
        .collect();
    let (last_jsz, watcher) = watch_streams(monitors);
    let mut objects = tenant_objects(host).await;
    let uids: BTreeSet<String> = objects.iter().map(|o| o.2.clone()).collect();
    let mut delays = vec![0u64; objects.len()];
    if let Some(rng) = shuffle {
        for i in (1..objects.len()).rev() {
            let j = (rng.next() % (i as u64 + 1)) as usize;
            objects.swap(i, j);
        }
        for d in delays.iter_mut() {
            *d = rng.next() % 300;
        }
    }
    let order: Vec<String> = objects.iter().map(|o| format!("{}/{}", o.0, o.1)).collect();
    println!("deleting, in this order: {}", order.join(", "));
    let start = Instant::now();
    for ((_, name, _, ar), delay) in objects.iter().zip(&delays) {
        if *delay > 0 {
            tokio::time::sleep(Duration::from_millis(*delay)).await;
        }
        let api: Api<DynamicObject> = Api::namespaced_with(host.client(), NS, ar);
        api.delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    }
    // When each object went, for the report.
    let went: Mutex<BTreeMap<String, f64>> = Mutex::new(BTreeMap::new());
    let gone = sim::wait::poll("every object of the tenant gone", WITHIN, || async {
        let left: BTreeSet<String> = tenant_objects(host)
            .await
            .iter()
            .map(|o| format!("{}/{}", o.0, o.1))
            .collect();
        let mut w = went.lock().expect("went");
        for o in &order {
            if !left.contains(o) && !w.contains_key(o) {
                w.insert(o.clone(), start.elapsed().as_secs_f64());
            }
        }
        Ok(left.is_empty().then_some(()))
    })
    .await;
    let took = start.elapsed();
    let mut went: Vec<(String, f64)> = went.into_inner().expect("went").into_iter().collect();
    went.sort_by(|a, b| a.1.total_cmp(&b.1));
    let went: Vec<String> = went.iter().map(|(o, t)| format!("{o} {t:.1}s")).collect();
    println!("gone: {}", went.join(", "));
    let left = tenant_objects(host).await;
    let mut held = Vec::new();
    for (kind, name, _, ar) in &left {
        let api: Api<DynamicObject> = Api::namespaced_with(host.client(), NS, ar);
        if let Ok(o) = api.get(name).await {
            held.push(format!(
                "{kind}/{name} finalizers {:?} conditions {}",
                o.metadata.finalizers,
                o.data
                    .pointer("/status/conditions")
                    .cloned()
                    .unwrap_or_default()
            ));
        }
    }
    assert!(
        gone.is_ok(),
        "not every object gone within {WITHIN:?}; held:\n{}",
        held.join("\n")
    );
    // The servers stop after the NatsCluster, within the pods' termination grace.
    sim::wait::poll(
        "the NatsCluster's servers stopped",
        sim::local::collect::TERMINATION_GRACE,
        || async { Ok(servers_stopped(host, NS, &pids).then_some(())) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    drop(watcher);
    let last = last_jsz.lock().expect("last").clone();
    assert_eq!(last.len(), 3, "every server answered JSZ: {last:?}");
    assert!(
        last.values().all(|n| *n == 0),
        "streams left on the servers when they stopped: {last:?}"
    );
    let events: Api<Event> = Api::namespaced(host.client(), NS);
    let telling: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object
                .uid
                .as_ref()
                .is_some_and(|u| uids.contains(u))
                && matches!(
                    e.reason.as_deref(),
                    Some("DeletionPolicyNotRun" | "ServersGone" | "ForceDeleted")
                )
        })
        .map(|e| format!("{:?}: {:?}", e.reason, e.message))
        .collect();
    assert!(telling.is_empty(), "a Delete did not run: {telling:?}");
    took.as_secs_f64()
}

/// `runs` runs on one host; prints each run's time.
async fn runs(runs: usize, random: bool) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let host = host(tmp.path()).await;
    let mut pki = sim::up::platform_pki::Pki::new().expect("pki");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    let mut rng = Rng(seed);
    if random {
        println!("seed {seed}");
    }
    let mut times = Vec::new();
    for i in 0..runs {
        let took = run(&host, &mut pki, random.then_some(&mut rng)).await;
        println!("run {}/{runs}: every object gone in {took:.1} s", i + 1);
        times.push(took);
    }
    let max = times.iter().cloned().fold(0.0, f64::max);
    println!("{runs} runs, each within {WITHIN:?}; slowest {max:.1} s; all: {times:.1?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_02s_tenant_deleted_all_at_once_3_times() {
    runs(3, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_02s_tenant_deleted_in_a_random_order_3_times() {
    runs(3, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_02s_tenant_deleted_all_at_once_20_times() {
    runs(20, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_02s_tenant_deleted_in_a_random_order_20_times() {
    runs(20, true).await;
}

/// Item 5: a NatsCluster deleted under the local server lifecycle (what `sim up` runs) has its
/// nats-server processes stopped within the pods' termination grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_natsclusters_servers_stop_within_the_termination_grace() {
    let host = Host::start(&["nats"], &["cluster"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    host.apply_manifest(
        &workspace_path("docs/stories/01-quickstart/01-natscluster.yaml"),
        &BTreeMap::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let demo = ObjectRef::parse("NatsCluster/nats/demo").expect("ref");
    wait_condition(&host, &demo, "Ready", READY).await;
    let pids: Vec<u32> = (0..3)
        .filter_map(|i| host.server_lifecycle().pid("nats", "demo", i))
        .collect();
    assert_eq!(pids.len(), 3, "three servers run");
    host.delete(&demo).await.unwrap_or_else(|e| panic!("{e}"));
    let start = Instant::now();
    sim::wait::poll("the NatsCluster gone", WITHIN, || async {
        Ok((!host.exists(&demo).await.unwrap_or(true)).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let gone = start.elapsed();
    sim::wait::poll(
        "its three nats-server processes gone, and their files",
        sim::local::collect::TERMINATION_GRACE,
        || async { Ok(servers_stopped(&host, "nats", &pids).then_some(())) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "NatsCluster gone in {gone:?}, its servers {:?} after",
        start.elapsed() - gone
    );
}

/// The enforced order, said in status: the `orders` NatsConnection and the `orders-app` NatsUser
/// deleted alone while the bucket, stream and consumer with deletionPolicy Delete still need them
/// wait — the connection `Deleting=True InUse` naming them, the user Ready False
/// `CredentialsInUse` naming the connection, unrevoked (the bucket still answers through it) —
/// and both go once those resources are deleted, their streams removed from the servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_and_its_user_wait_for_the_delete_resources_that_need_them() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let host = host(tmp.path()).await;
    let mut pki = sim::up::platform_pki::Pki::new().expect("pki");
    apply_tenant(&host, &mut pki).await;
    let conn = ObjectRef::parse("NatsConnection/nats-system/orders").expect("ref");
    let user = ObjectRef::parse("NatsUser/nats-system/orders-app").expect("ref");
    host.delete(&conn).await.unwrap_or_else(|e| panic!("{e}"));
    host.delete(&user).await.unwrap_or_else(|e| panic!("{e}"));
    let held = host
        .wait_condition_saying(&conn, "Deleting=True/InUse", None, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let said = sim::testkit::message(&held, "Deleting");
    for o in [
        "NatsKeyValue nats-system/carts",
        "NatsStream nats-system/orders",
    ] {
        assert!(said.contains(o), "the connection names {o}: {said}");
    }
    let held = host
        .wait_condition_saying(
            &user,
            "Ready=False/CredentialsInUse",
            None,
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let said = sim::testkit::message(&held, "Ready");
    assert!(
        said.contains("NatsConnection nats-system/orders"),
        "the user names the connection: {said}"
    );
    // Both held (their holds were written after the deletion), the bucket still served.
    assert!(host.exists(&conn).await.expect("read"));
    assert!(host.exists(&user).await.expect("read"));
    let carts = ObjectRef::parse("NatsKeyValue/nats-system/carts").expect("ref");
    wait_condition(&host, &carts, "Ready", Duration::from_secs(10)).await;
    let cluster = sim::controlled::read_cluster(&host, NS, "demo")
        .await
        .expect("cluster");
    let monitor = host.server_lifecycle().address(&cluster, 0).monitor_url;
    for o in [
        "NatsConsumer/nats-system/worker",
        "NatsKeyValue/nats-system/carts",
        "NatsStream/nats-system/orders",
    ] {
        host.delete(&ObjectRef::parse(o).expect("ref"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    sim::wait::poll("the connection and the user gone", WITHIN, || async {
        let left =
            host.exists(&conn).await.unwrap_or(true) || host.exists(&user).await.unwrap_or(true);
        Ok((!left).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let jsz: serde_json::Value = reqwest::get(format!("{monitor}/jsz"))
        .await
        .expect("jsz")
        .json()
        .await
        .expect("json");
    assert_eq!(jsz["streams"], 0, "the Delete resources ran first: {jsz}");
}

/// The order seed 1796502784380164853 found (a gate run of the random order): the NatsStream
/// deleted first runs its Delete (the stream, and the `worker` consumer with it, leave the
/// servers) and stays for the consumer bound to it; with the bucket gone too, no data keeps the
/// NatsCluster's guard, so the NatsCluster goes and its servers stop. The consumer deleted after
/// that must still go: its stream says `Deleting=True DeletedOnServer`, so its Delete needs no
/// server. Without that it held for ever, dialing servers that no longer run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_deleted_after_its_stream_and_servers_went_goes() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let host = host(tmp.path()).await;
    let mut pki = sim::up::platform_pki::Pki::new().expect("pki");
    apply_tenant(&host, &mut pki).await;
    let stream = ObjectRef::parse("NatsStream/nats-system/orders").expect("ref");
    let consumer = ObjectRef::parse("NatsConsumer/nats-system/worker").expect("ref");
    let demo = ObjectRef::parse("NatsCluster/nats-system/demo").expect("ref");
    let pids: Vec<u32> = (0..3)
        .filter_map(|i| host.server_lifecycle().pid(NS, "demo", i))
        .collect();
    assert_eq!(pids.len(), 3, "three servers run");
    for o in [
        "NatsStream/nats-system/orders",
        "NatsKeyValue/nats-system/carts",
    ] {
        host.delete(&ObjectRef::parse(o).expect("ref"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let said = host
        .wait_condition_saying(
            &stream,
            "Deleting=True/DeletedOnServer",
            None,
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    println!("the stream: {}", sim::testkit::message(&said, "Deleting"));
    host.delete(&demo).await.unwrap_or_else(|e| panic!("{e}"));
    sim::wait::poll("the NatsCluster's servers stopped", WITHIN, || async {
        let gone = !host.exists(&demo).await.unwrap_or(true);
        Ok((gone && servers_stopped(&host, NS, &pids)).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        host.exists(&stream).await.expect("read"),
        "the stream stays for its consumer"
    );
    host.delete(&consumer)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    sim::wait::poll("the consumer and its stream gone", WITHIN, || async {
        let left = host.exists(&consumer).await.unwrap_or(true)
            || host.exists(&stream).await.unwrap_or(true);
        Ok((!left).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}
