//! API tier + live NATS, story 07's account balancer: six R3 NatsStreams of the APP account whose
//! leaders all sit on c1-0, in two pools — `hot` (label tier=hot: H1, H2, H3) and the default
//! pool (D1, D2, D3) — with a pool `team` (team=orders) also matching H3. A NatsBalancer over
//! APP's own connection evens each pool on its own, one leader move per pass through
//! STREAM.LEADER.STEPDOWN, until every server leads one stream of each pool; status.pools
//! reports each pool (team empty), Overlapping names H3's resource, which belongs to hot. A
//! NatsBalancer with an invalid selector reads PassFailed naming the field, one with a missing
//! connection ReferenceNotFound; neither moves. With leaders piled up again while another
//! holds the NATS cluster's move lease it reads Holding MoveLeaseHeld naming the holder and
//! moves nothing (story 07); once the lease is free and a NatsSystemBalancer covers the NATS
//! cluster, both balance and the account balancer ends Balancing and Settled beside it
//! (story 09). Its held passes are counted by reason.

use std::collections::BTreeMap;
use std::time::Duration;

use controller_kit::metrics::Metrics;
use jetstream_controller::controller::Settings;
use kube::api::Api;
use nats_api::jetstream::{NatsBalancer, NatsStream, NatsSystemBalancer};
use nats_wire::Wire;
use serde_json::{Value, json};
use sim::testkit::apiserver_with_crds;

use crate::common::{self, create, status_of};
use crate::live_balancer::{condition, events, leader};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "nats";
const HOT: [&str; 3] = ["H1", "H2", "H3"];
const DEFAULT: [&str; 3] = ["D1", "D2", "D3"];

/// Steps every stream of `streams` down toward c1-0 until c1-0 leads it.
async fn pile_on_c1_0(app: &async_nats::Client, streams: &[&str]) {
    let wire = Wire::new(app.clone());
    for s in streams {
        common::lead_on(&wire, app, s, "c1-0", WAIT).await;
    }
}

/// Servers by the number of streams of `streams` they lead.
async fn leads(app: &async_nats::Client, streams: &[&str]) -> BTreeMap<String, u32> {
    let mut by_server = BTreeMap::new();
    for s in streams {
        *by_server.entry(leader(app, s).await).or_default() += 1;
    }
    by_server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_07_account_balancer_evens_each_pool_and_yields_to_the_system_balancer() {
    let api = apiserver_with_crds(&[NS]).await;
    let topo = common::cluster().await;
    topo.wait_meta_leader(WAIT).await.expect("a meta leader");
    let metrics = Metrics::default();
    let settings = Settings {
        resync: Duration::from_secs(10),
        ..Default::default()
    };
    let (ctx, _controllers) =
        common::spawn_controller_with(api.client(), settings, metrics.clone());

    // APP's connection (the sim's no-auth user lands in APP) and six R3 NatsStreams over it.
    common::create_demo_connection(api.client(), NS, topo.client_urls()).await;
    let streams: Api<NatsStream> = Api::namespaced(api.client(), NS);
    for (s, labels) in [
        ("H1", json!({"tier": "hot"})),
        ("H2", json!({"tier": "hot"})),
        ("H3", json!({"tier": "hot", "team": "orders"})),
        ("D1", json!({})),
        ("D2", json!({})),
        ("D3", json!({})),
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
    let app = topo.connect().await.expect("an APP client");
    let all: Vec<&str> = HOT.iter().chain(&DEFAULT).copied().collect();
    for s in &all {
        common::stream_info(&app, s).await;
    }
    pile_on_c1_0(&app, &all).await;

    let balancers: Api<NatsBalancer> = Api::namespaced(api.client(), NS);
    let balancer = |name: &str, conn: &str, pools: Value| {
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsBalancer",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"connectionRef": {"name": conn}, "pools": pools, "interval": "5s"},
        })
    };
    create(
        &balancers,
        balancer(
            "orders",
            "demo",
            json!([
                {"name": "hot", "selector": {"matchLabels": {"tier": "hot"}}},
                {"name": "team", "selector": {"matchLabels": {"team": "orders"}}},
            ]),
        ),
    )
    .await;
    let b = &balancers;
    let status = sim::wait::poll(
        "every pool even, Settled",
        Duration::from_secs(90),
        || async move {
            let s = status_of(b, "orders").await?;
            let even = s["pools"]
                .as_array()
                .is_some_and(|p| p.len() == 3 && p.iter().all(|p| p["leaderSkew"] == 0));
            let settled = condition(&s, "Holding")
                .is_some_and(|c| c["status"] == "False" && c["reason"] == "Settled");
            if even && settled && s["lastMove"].is_object() {
                Ok(Some(s))
            } else {
                Err(format!("status: {s}"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        status["pools"],
        json!([
            {"name": "hot", "streams": 3, "leaderSkew": 0},
            {"name": "team", "streams": 0, "leaderSkew": 0},
            {"name": "default", "streams": 3, "leaderSkew": 0},
        ]),
        "{status}"
    );
    let ready = condition(&status, "Ready").expect("Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"], &ready["message"]),
        (
            &json!("True"),
            &json!("Balancing"),
            &json!("3 pools over NATS cluster c1")
        )
    );
    // No system balancer yet: the gate judged from APP's own streams, and says so.
    assert_eq!(
        condition(&status, "Holding").expect("Holding")["message"],
        "NATS cluster c1 is Settled, judged from the account's own streams: no system view of \
         NATS cluster c1; next pass in 5s"
    );
    let overlapping = condition(&status, "Overlapping").expect("Overlapping");
    assert_eq!(
        (&overlapping["status"], &overlapping["reason"]),
        (&json!("True"), &json!("Overlapping"))
    );
    assert_eq!(
        overlapping["message"],
        "NatsStream nats/h3 matches pools hot, team; it belongs to hot"
    );
    assert_eq!(status["lastMove"]["kind"], "Leader", "{status}");
    assert_eq!(status["lastMove"]["account"], "APP", "{status}");
    // Each pool judged apart: every server leads one stream of each.
    for pool in [&HOT[..], &DEFAULT[..]] {
        let by_server = leads(&app, pool).await;
        assert_eq!(
            by_server.values().copied().collect::<Vec<_>>(),
            vec![1, 1, 1],
            "{pool:?}: {by_server:?}"
        );
    }
    // 3-0-0 → 1-1-1 in each pool takes two moves; four in all, each started and seen done.
    let started = events(api.client(), "orders", "MoveStarted").await;
    let done = events(api.client(), "orders", "MoveDone").await;
    assert_eq!((started, done), (4, 4), "MoveStarted, MoveDone");

    // Bad input: an invalid selector, a missing connection. Neither moves anything.
    create(
        &balancers,
        balancer(
            "bad",
            "demo",
            json!([{"name": "near", "selector": {"matchExpressions": [
                {"key": "tier", "operator": "Near", "values": ["hot"]}]}}]),
        ),
    )
    .await;
    create(&balancers, balancer("lost", "nope", json!([]))).await;
    for (name, reason, message) in [
        (
            "bad",
            "PassFailed",
            "spec.pools[0].selector.matchExpressions[0].operator: \"Near\" is not In, NotIn, \
             Exists or DoesNotExist; nothing is moved",
        ),
        (
            "lost",
            "ReferenceNotFound",
            "NatsConnection nats/nope does not exist",
        ),
    ] {
        let s = sim::wait::poll(&format!("{name} refused"), WAIT, || async move {
            let s = status_of(b, name).await?;
            match condition(&s, "Ready") {
                Some(c) if c["status"] == "False" && c["reason"] == reason => Ok(Some(s)),
                _ => Err(format!("status: {s}")),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(condition(&s, "Ready").expect("Ready")["message"], message);
        assert!(s["lastMove"].is_null(), "{s}");
        assert_eq!(events(api.client(), name, "MoveStarted").await, 0, "{name}");
    }

    // Another holds the NATS cluster's move lease (as a system balancer does from before its
    // move until its next pass finds it done): leaders piled up again, the account balancer
    // holds with MoveLeaseHeld and moves nothing.
    let holder = "NatsSystemBalancer nats/elsewhere";
    ctx.leases
        .take("c1", holder, std::time::Instant::now())
        .expect("the lease is free");
    let before = events(api.client(), "orders", "MoveStarted").await;
    pile_on_c1_0(&app, &HOT).await;
    let held = sim::wait::poll("orders holds: MoveLeaseHeld", WAIT, || async move {
        let s = status_of(b, "orders").await?;
        match condition(&s, "Holding") {
            Some(c) if c["status"] == "True" && c["reason"] == "MoveLeaseHeld" => {
                Ok(Some(c.clone()))
            }
            _ => Err(format!("status: {s}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        held["message"],
        "NatsSystemBalancer nats/elsewhere holds the move lease of NATS cluster c1"
    );
    assert_eq!(
        events(api.client(), "orders", "MoveStarted").await,
        before,
        "no move while another holds the lease"
    );
    ctx.leases.release("c1", holder);

    // A NatsSystemBalancer on the same NATS cluster: both balance, one move at a time through
    // the lease, and the account balancer ends Balancing and Settled beside it (story 09).
    crate::live_placement::create_system_connection(api.client(), topo.client_urls()).await;
    let systems: Api<NatsSystemBalancer> = Api::namespaced(api.client(), NS);
    create(
        &systems,
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsSystemBalancer",
            "metadata": {"name": "system", "namespace": NS},
            "spec": {"connectionRef": {"name": "system"}, "interval": "5s"},
        }),
    )
    .await;
    let (sys, app_ref) = (&systems, &app);
    sim::wait::poll(
        "the hot pool even again, both balancers Settled",
        Duration::from_secs(90),
        || async move {
            let s = status_of(sys, "system").await?;
            let o = status_of(b, "orders").await?;
            let settled = |s: &Value| {
                condition(s, "Holding")
                    .is_some_and(|c| c["status"] == "False" && c["reason"] == "Settled")
            };
            let even = leads(app_ref, &HOT).await.values().all(|n| *n == 1);
            if even && settled(&s) && settled(&o) {
                Ok(Some(()))
            } else {
                Err(format!("system: {s}; orders: {o}"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let after = status_of(b, "orders").await.expect("status");
    let ready = condition(&after, "Ready").expect("Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("True"), &json!("Balancing"))
    );
    // Each held pass is counted under its reason: the lease held, its own moves pending.
    let rendered = metrics.render();
    for reason in ["MoveLeaseHeld", "MovePending"] {
        let held = sim::testkit::replicas::sample(
            &rendered,
            nats_api::jetstream::metric::BALANCER_HELD_PASSES,
            &format!("namespace=\"{NS}\",name=\"orders\",reason=\"{reason}\""),
        );
        assert!(held.is_some_and(|n| n >= 1.0), "{reason} passes: {held:?}");
    }
}
