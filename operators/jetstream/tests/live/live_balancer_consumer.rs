//! API tier + live NATS, design §6.5 for consumers: the system balancer "evens leaders and
//! copies over every account … leader moves through each account's jetstream-stepdown export".
//! Six R3 durable consumers of one R3 stream of APP, every consumer leader stepped down onto c1-0
//! (the stream's own leader on c1-1), are evened by a NatsSystemBalancer to within one, one
//! consumer leader move per pass through `$JS.APP.API.CONSUMER.LEADER.STEPDOWN.<stream>.<consumer>`
//! (the sim's config accounts export it to SYS). status.servers counts the consumers' groups
//! (seven groups: seven leaders, 21 copies), lastMove names the consumer, and the servers agree:
//! consumer leaders are evened apart from stream leaders, 6-0-0 to 2-2-2.
//! A NatsBalancer over APP's own connection, with no system balancer, does the same through
//! `$JS.API.CONSUMER.LIST.<stream>` and `$JS.API.CONSUMER.LEADER.STEPDOWN.<stream>.<consumer>`:
//! its default pool holds the one stream, its skew counts the consumers.

use std::collections::BTreeMap;
use std::time::Duration;

use controller_kit::metrics::Metrics;
use jetstream_controller::jsapi;
use kube::api::{Api, PostParams};
use nats_api::jetstream::{NatsBalancer, NatsSystemBalancer};
use nats_wire::Wire;
use nats_wire::monitor::Placement;
use serde_json::{Value, json};
use sim::testkit::apiserver_with_crds;

use crate::common;
use crate::live_balancer::{condition, events, leader};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "nats";
const STREAM: &str = "ORDERS";
const CONSUMERS: [&str; 6] = ["C1", "C2", "C3", "C4", "C5", "C6"];

async fn consumer_leader(app: &async_nats::Client, consumer: &str) -> String {
    jsapi::consumer_info(app, STREAM, consumer)
        .await
        .ok()
        .flatten()
        .and_then(|i| i["cluster"]["leader"].as_str().map(String::from))
        .unwrap_or_default()
}

/// Steps the group (`None`: the stream's own) down toward `to` until `to` leads it.
async fn lead_on(app: &async_nats::Client, consumer: Option<&str>, to: &str) {
    let wire = Wire::new(app.clone());
    let what = consumer.unwrap_or(STREAM);
    sim::wait::poll(&format!("{what} led by {to}"), WAIT, || {
        let wire = &wire;
        async move {
            let l = match consumer {
                Some(c) => consumer_leader(app, c).await,
                None => leader(app, STREAM).await,
            };
            if l == to {
                return Ok(Some(()));
            }
            let toward = Placement {
                preferred: to.into(),
                ..Default::default()
            };
            let _ = match consumer {
                Some(c) => {
                    wire.consumer_leader_stepdown(STREAM, c, Some(&toward))
                        .await
                }
                None => wire.stream_leader_stepdown(STREAM, Some(&toward)).await,
            };
            Err(format!("led by {l:?}"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// One R3 stream led by c1-1; six R3 consumers, every leader on c1-0: leaders 6, 1, 0.
async fn pile_consumers(app: &async_nats::Client) {
    let config = json!({"name": STREAM, "subjects": ["orders.>"], "num_replicas": 3});
    common::create_stream(app, config.as_object().expect("an object")).await;
    for c in CONSUMERS {
        let config = json!({
            "name": c, "durable_name": c, "ack_policy": "explicit", "num_replicas": 3,
        });
        common::put_consumer(app, STREAM, config.as_object().expect("an object"), false).await;
    }
    lead_on(app, None, "c1-1").await;
    for c in CONSUMERS {
        lead_on(app, Some(c), "c1-0").await;
    }
}

/// Servers by the number of groups (the stream's and its consumers') they lead.
async fn leads(app: &async_nats::Client) -> Vec<u32> {
    let mut by_server = BTreeMap::<String, u32>::new();
    *by_server.entry(leader(app, STREAM).await).or_default() += 1;
    for c in CONSUMERS {
        *by_server.entry(consumer_leader(app, c).await).or_default() += 1;
    }
    let mut counts: Vec<u32> = by_server.values().copied().collect();
    counts.sort_unstable();
    counts
}

async fn balancer_status(api: &Api<NatsSystemBalancer>, name: &str) -> Result<Value, String> {
    let o = api.get(name).await.map_err(|e| e.to_string())?;
    let v = serde_json::to_value(&o).map_err(|e| e.to_string())?;
    Ok(v["status"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_balancer_evens_consumer_leaders_piled_on_one_server() {
    let api = apiserver_with_crds(&[NS]).await;
    let topo = common::cluster().await;
    topo.wait_meta_leader(WAIT).await.expect("a meta leader");
    let _controllers =
        common::spawn_controller(api.client(), Duration::from_secs(10), Metrics::default());

    let app = topo.connect().await.expect("an APP client");
    pile_consumers(&app).await;

    crate::live_placement::create_system_connection(api.client(), topo.client_urls()).await;
    let balancers: Api<NatsSystemBalancer> = Api::namespaced(api.client(), NS);
    let balancer: NatsSystemBalancer = serde_json::from_value(json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsSystemBalancer",
        "metadata": {"name": "system", "namespace": NS},
        "spec": {"connectionRef": {"name": "system"}, "interval": "5s"},
    }))
    .expect("a NatsSystemBalancer");
    balancers
        .create(&PostParams::default(), &balancer)
        .await
        .expect("created");
    let b = &balancers;
    let status = sim::wait::poll(
        "leader skew at most 1 over stream and consumer groups, no move pending",
        Duration::from_secs(120),
        || async move {
            let s = balancer_status(b, "system").await?;
            let even = s["skew"]["leaders"].as_u64().is_some_and(|n| n <= 1);
            let idle = s["pending"].is_null();
            let settled = condition(&s, "Holding")
                .is_some_and(|c| c["status"] == "False" && c["reason"] == "Settled");
            if even && idle && settled && s["lastMove"].is_object() {
                Ok(Some(s))
            } else {
                Err(format!("status: {s}"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status["capabilities"]["leader"], "Full", "{status}");
    // status.servers counts the consumers' groups: seven groups, each led once, three copies each.
    let servers = status["servers"].as_array().expect("servers");
    let sum = |k: &str| {
        servers
            .iter()
            .map(|s| s[k].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    assert_eq!(servers.len(), 3, "{status}");
    assert_eq!(sum("leaders"), 7, "a stream and six consumers: {status}");
    assert_eq!(sum("replicas"), 21, "seven R3 groups: {status}");
    let last = &status["lastMove"];
    assert_eq!(last["kind"], "Leader", "{status}");
    assert_eq!(last["stream"], STREAM, "{status}");
    assert!(
        last["consumer"]
            .as_str()
            .is_some_and(|c| CONSUMERS.contains(&c)),
        "the last move names the consumer whose leader moved: {status}"
    );
    assert!(status["pending"].is_null(), "{status}");
    // The servers agree: leaders 3, 2, 2 over the seven groups, and the stream never moved.
    assert_eq!(leads(&app).await, vec![2, 2, 3]);
    assert_eq!(
        leader(&app, STREAM).await,
        "c1-1",
        "only consumers' leaders moved"
    );
    // Consumer leaders are evened apart from stream leaders: 6-0-0 → 2-2-2 takes four consumer
    // moves, each started and seen done (three would have evened only the sum, 6-1-0 → 3-2-2).
    let started = events(api.client(), "system", "MoveStarted").await;
    let done = events(api.client(), "system", "MoveDone").await;
    assert_eq!((started, done), (4, 4), "MoveStarted, MoveDone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn account_balancer_evens_consumer_leaders_over_its_own_connection() {
    let api = apiserver_with_crds(&[NS]).await;
    let topo = common::cluster().await;
    topo.wait_meta_leader(WAIT).await.expect("a meta leader");
    let _controllers =
        common::spawn_controller(api.client(), Duration::from_secs(10), Metrics::default());
    let app = topo.connect().await.expect("an APP client");
    pile_consumers(&app).await;

    // APP's own connection (the sim's no-auth user lands in APP); no pools: the default pool.
    common::create_demo_connection(api.client(), NS, topo.client_urls()).await;
    let balancers: Api<NatsBalancer> = Api::namespaced(api.client(), NS);
    let balancer: NatsBalancer = serde_json::from_value(json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsBalancer",
        "metadata": {"name": "orders", "namespace": NS},
        "spec": {"connectionRef": {"name": "demo"}, "interval": "5s"},
    }))
    .expect("a NatsBalancer");
    balancers
        .create(&PostParams::default(), &balancer)
        .await
        .expect("created");
    let b = &balancers;
    let status = sim::wait::poll(
        "the default pool even over the stream and its consumers, Settled",
        Duration::from_secs(120),
        || async move {
            let o = b.get("orders").await.map_err(|e| e.to_string())?;
            let s = serde_json::to_value(&o).map_err(|e| e.to_string())?["status"].clone();
            let even = s["pools"]
                .as_array()
                .is_some_and(|p| p.len() == 1 && p[0]["leaderSkew"].as_u64() <= Some(1));
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
        json!([{"name": "default", "streams": 1, "leaderSkew": 1}]),
        "one stream: its own leader on c1-1 (skew 1), its six consumers 2-2-2 (skew 0): {status}"
    );
    let last = &status["lastMove"];
    assert_eq!(
        (&last["kind"], &last["stream"]),
        (&json!("Leader"), &json!(STREAM))
    );
    assert!(
        last["consumer"]
            .as_str()
            .is_some_and(|c| CONSUMERS.contains(&c)),
        "the last move names the consumer whose leader moved: {status}"
    );
    assert_eq!(leads(&app).await, vec![2, 2, 3]);
    assert_eq!(
        leader(&app, STREAM).await,
        "c1-1",
        "only consumers' leaders moved"
    );
    // Consumer leaders 6-0-0 → 2-2-2: four moves.
    let started = events(api.client(), "orders", "MoveStarted").await;
    let done = events(api.client(), "orders", "MoveDone").await;
    assert_eq!((started, done), (4, 4), "MoveStarted, MoveDone");
}
