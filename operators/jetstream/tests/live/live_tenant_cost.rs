//! API tier + live NATS, issue 37 item 3: what one tenant's balancer costs the controller and
//! the apiserver is bounded.
//!
//! - A NatsBalancer stored with `interval: 1ns` (as a cluster before Kubernetes 1.25, which
//!   ignores the CRD's CEL floor, stores it: the CRDs go in unjudged) is paced at the floor
//!   (5 s): its passes over a 12 s window are counted, its Ready message and an IntervalRaised
//!   Event say so.
//! - A NatsBalancer's and a NatsSystemBalancer's passes read the NatsStreams they judge from the
//!   controller's index, never the apiserver: the controller runs as a ServiceAccount, and the
//!   apiserver's own audit log shows no LIST of NatsStream, NatsKeyValue or NatsObjectStore
//!   across several passes of each, beside the controller's own count of the requests each
//!   pass made (`nats_operator_pass_apiserver_requests_total{kind,verb,resource}`), whose
//!   `list` series stay empty. The figures (requests and milliseconds per pass) are printed:
//!   they are what the floor is argued from.

use std::time::{Duration, Instant};

use controller_kit::metrics::Metrics;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::Api;
use nats_api::jetstream::{NatsBalancer, NatsStream, NatsSystemBalancer, metric};
use serde_json::{Value, json};
use sim::testkit::{apiserver_with_crds, apiserver_with_crds_unjudged};

use crate::common::{self, create, status_of};
use crate::live_balancer::{condition, events};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "nats";

/// The sum of the series of `name` in `metrics` whose labels include every one of `want`.
pub(crate) fn counter(metrics: &Metrics, name: &str, want: &[(&str, &str)]) -> f64 {
    metrics
        .render()
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| {
            want.iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The mean pass duration of `kind` so far, in milliseconds (the reconcile histogram).
fn mean_pass_ms(metrics: &Metrics, kind: &str) -> f64 {
    let of = |suffix: &str| {
        counter(
            metrics,
            &format!("{}{suffix}", controller_kit::metrics::RECONCILE_DURATION),
            &[("controller", kind)],
        )
    };
    let (sum, count) = (of("_sum"), of("_count"));
    if count > 0.0 { sum / count * 1e3 } else { 0.0 }
}

/// Three NatsStreams of APP over `demo`: two labelled tier=hot, one not.
async fn three_streams(client: kube::Client) {
    let streams: Api<NatsStream> = Api::namespaced(client, NS);
    for (s, labels) in [
        ("H1", json!({"tier": "hot"})),
        ("H2", json!({"tier": "hot"})),
        ("D1", json!({})),
    ] {
        create(
            &streams,
            json!({
                "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsStream",
                "metadata": {"name": s.to_lowercase(), "namespace": NS, "labels": labels},
                "spec": {"name": s, "connectionRef": {"name": "demo"},
                         "subjects": [format!("{s}.>")], "replicas": 3},
            }),
        )
        .await;
    }
}

fn balancer(interval: &str) -> Value {
    json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsBalancer",
        "metadata": {"name": "orders", "namespace": NS},
        "spec": {"connectionRef": {"name": "demo"}, "interval": interval,
                 "pools": [{"name": "hot", "selector": {"matchLabels": {"tier": "hot"}}}]},
    })
}

/// Waits until the balancer `orders` reads Ready True and its pools count `hot` 2 and
/// `default` 1 (the labels came from the index); its status.
async fn pools_judged(api: &Api<NatsBalancer>) -> Value {
    sim::wait::poll(
        "balancer Ready with hot 2, default 1",
        WAIT,
        || async move {
            let s = status_of(api, "orders").await?;
            let ready = condition(&s, "Ready").is_some_and(|c| c["status"] == "True");
            let count = |pool: &str| {
                s["pools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["name"] == pool)
                    .and_then(|p| p["streams"].as_u64())
            };
            if ready && count("hot") == Some(2) && count("default") == Some(1) {
                Ok(Some(s))
            } else {
                Err(format!("status: {s}"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_balancer_stored_with_a_1ns_interval_is_paced_at_the_floor() {
    // Unjudged: the CRD's CEL floor is not applied, as on a cluster before 1.25.
    let api = apiserver_with_crds_unjudged(&[NS]).await;
    let topo = common::cluster().await;
    topo.wait_meta_leader(WAIT).await.expect("a meta leader");
    let metrics = Metrics::default();
    let _controllers =
        common::spawn_controller(api.client(), Duration::from_secs(10), metrics.clone());
    common::create_demo_connection(api.client(), NS, topo.client_urls()).await;
    three_streams(api.client()).await;
    let balancers: Api<NatsBalancer> = Api::namespaced(api.client(), NS);
    create(&balancers, balancer("1ns")).await;
    let stored = balancers.get("orders").await.expect("stored");
    assert_eq!(
        stored.spec.interval.as_str(),
        "1ns",
        "stored below the floor"
    );

    let status = pools_judged(&balancers).await;
    let ready = condition(&status, "Ready").cloned().unwrap_or_default();
    assert!(
        ready["message"]
            .as_str()
            .is_some_and(|m| m.contains("below the floor of 5s")),
        "Ready says the interval was raised: {ready}"
    );
    let c = api.client();
    let told = sim::wait::poll("an IntervalRaised Event", WAIT, || {
        let c = c.clone();
        async move {
            let n = events(c, "orders", "IntervalRaised").await;
            if n > 0 {
                Ok(Some(n))
            } else {
                Err("none yet".to_string())
            }
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // Settled: passes now come every interval. Counted over a window of 12 s: at the floor
    // at most four — one per 5 s, plus the two the window may catch at its start: the pass that
    // raised the interval (its Event is seen before its status write ends, on a loaded machine)
    // and the one its status write wakes; at 1ns, hundreds.
    let window = Duration::from_secs(12);
    let before = metrics.reconciles("NatsBalancer");
    let started = Instant::now();
    let m = &metrics;
    sim::wait::poll(
        "the window to end",
        window + Duration::from_secs(5),
        || async move {
            if started.elapsed() >= window {
                Ok(Some(()))
            } else {
                // Read the count while waiting: a hot loop shows long before the window ends.
                let n = m.reconciles("NatsBalancer") - before;
                if n > 50 {
                    return Ok(Some(()));
                }
                Err(format!("{n} passes so far"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let passes = metrics.reconciles("NatsBalancer") - before;
    let elapsed = started.elapsed();
    println!(
        "figure: NatsBalancer at interval 1ns: {passes} passes in {:.1} s (floor 5 s); \
         {told} IntervalRaised Event(s); mean pass {:.1} ms",
        elapsed.as_secs_f64(),
        mean_pass_ms(&metrics, "NatsBalancer")
    );
    let most = elapsed.as_secs() / 5 + 2;
    assert!(
        passes <= most,
        "{passes} passes in {elapsed:?}: more than one per 5 s floor (at most {most})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_balancer_passes_list_no_stream_backed_kind_across_namespaces() {
    let api = apiserver_with_crds(&[NS]).await;
    // The controller runs as a ServiceAccount (cluster-admin: RBAC is not what is tested), so
    // the apiserver's audit log records every request it makes.
    let admin = api.client();
    create(
        &Api::<ServiceAccount>::namespaced(admin.clone(), NS),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "jetstream", "namespace": NS}}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "jetstream-cost"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "cluster-admin"},
               "subjects": [{"kind": "ServiceAccount", "name": "jetstream", "namespace": NS}]}),
    )
    .await;
    let identity = api
        .service_account_identity(NS, "jetstream")
        .await
        .expect("a token for the ServiceAccount");
    let user = identity.username();

    let topo = common::cluster().await;
    topo.wait_meta_leader(WAIT).await.expect("a meta leader");
    let metrics = Metrics::default();
    let _controllers =
        common::spawn_controller(identity.client(), Duration::from_secs(10), metrics.clone());
    common::create_demo_connection(admin.clone(), NS, topo.client_urls()).await;
    crate::live_placement::create_system_connection(admin.clone(), topo.client_urls()).await;
    three_streams(admin.clone()).await;
    let balancers: Api<NatsBalancer> = Api::namespaced(admin.clone(), NS);
    create(&balancers, balancer("5s")).await;
    let system: Api<NatsSystemBalancer> = Api::namespaced(admin.clone(), NS);
    create(
        &system,
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsSystemBalancer",
            "metadata": {"name": "system", "namespace": NS},
            "spec": {"connectionRef": {"name": "system"}, "interval": "5s"},
        }),
    )
    .await;
    pools_judged(&balancers).await;

    let lists = || -> usize { pass_lists(&api.audit_of(&user).expect("the audit log")) };
    let lists_before = lists();
    let passes_before = (
        metrics.reconciles("NatsBalancer"),
        metrics.reconciles("NatsSystemBalancer"),
    );
    // At least three more passes of each (about 15 s at the 5 s floor).
    let m = &metrics;
    sim::wait::poll("three more passes of each balancer", WAIT, || async move {
        let b = m.reconciles("NatsBalancer") - passes_before.0;
        let s = m.reconciles("NatsSystemBalancer") - passes_before.1;
        if b >= 3 && s >= 3 {
            Ok(Some(()))
        } else {
            Err(format!(
                "{b} NatsBalancer and {s} NatsSystemBalancer passes"
            ))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let lists_after = lists();
    assert_eq!(
        lists_after, lists_before,
        "the audit log holds a LIST of a stream-backed kind made during the balancer passes"
    );

    // The controller's own count agrees: no pass listed anything; each counted its requests.
    for kind in ["NatsBalancer", "NatsSystemBalancer"] {
        let listed = counter(
            &metrics,
            metric::PASS_APISERVER_REQUESTS,
            &[("kind", kind), ("verb", "list")],
        );
        assert_eq!(
            listed,
            0.0,
            "{kind} passes listed something:\n{}",
            metrics.render()
        );
        let all = counter(&metrics, metric::PASS_APISERVER_REQUESTS, &[("kind", kind)]);
        let passes = metrics.reconciles(kind) as f64;
        assert!(all > 0.0, "{kind}'s requests are counted");
        println!(
            "figure: {kind}: {:.1} apiserver requests per pass ({all} over {passes} passes), \
             mean pass {:.1} ms",
            all / passes,
            mean_pass_ms(&metrics, kind)
        );
    }
    let status_writes = counter(
        &metrics,
        metric::PASS_APISERVER_REQUESTS,
        &[
            ("kind", "NatsBalancer"),
            ("verb", "patch"),
            ("resource", "natsbalancers/status"),
        ],
    );
    assert!(status_writes > 0.0, "a status write is counted as a patch");
    println!(
        "figure: LISTs of stream-backed kinds in the audit log: {lists_before} before the \
         window (the watches' own), {lists_after} after"
    );
}

/// The LISTs of a stream-backed kind in `events` (one user's, in the log's order) that no WATCH of
/// the same resource follows: a watcher's list is always followed by its watch from the listed
/// version, and a watcher lists again whenever the apiserver ends its watch (a CRD's watch cache
/// created a moment before answers the first watch "too old resource version": seen in a gate
/// run under load, one relist of natsobjectstores 1.6 s after the controller started, counted
/// as a pass's LIST); a pass's LIST is followed by no watch.
fn pass_lists(events: &[sim::apiserver::AuditEvent]) -> usize {
    let stream_backed = ["natsstreams", "natskeyvalues", "natsobjectstores"];
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e.verb == "list" && stream_backed.iter().any(|r| e.resource.starts_with(r))
        })
        .filter(|(i, e)| {
            let next = events[i + 1..].iter().find(|n| n.resource == e.resource);
            next.is_none_or(|n| n.verb != "watch")
        })
        .count()
}

#[test]
fn a_watchers_list_and_relist_are_not_a_pass_list() {
    let ev = |verb: &str, resource: &str| sim::apiserver::AuditEvent {
        user: "u".into(),
        verb: verb.into(),
        resource: resource.into(),
        namespace: String::new(),
        name: String::new(),
        code: 200,
        reason: String::new(),
        decision: "allow".into(),
    };
    let s = "natsobjectstores.jetstream.nats.mikluko.io";
    let watcher = [ev("list", s), ev("watch", s), ev("list", s), ev("watch", s)];
    assert_eq!(pass_lists(&watcher), 0);
    let a_pass = [ev("list", s), ev("watch", s), ev("list", s), ev("get", s)];
    assert_eq!(pass_lists(&a_pass), 1);
    let other_kind = [ev("list", "secrets"), ev("get", "secrets")];
    assert_eq!(pass_lists(&other_kind), 0);
}
