//! API tier + live NATS, story 07's system balancer: six R3 streams of the APP account whose
//! leaders all sit on c1-0 of a 3-server cluster are evened out by a NatsSystemBalancer, one
//! leader move per pass through APP's jetstream-stepdown export (the sim's config accounts
//! export it to SYS under `$JS.APP.API`), until no server leads more than one stream more than
//! another. status.capabilities reads leader Full and placement true; status.servers counts each
//! server's leaders; a second NatsSystemBalancer for the same NATS cluster is refused
//! (DuplicateBalancer) and moves nothing.

use crate::common;

use std::time::Duration;

use controller_kit::metrics::Metrics;
use kube::api::{Api, PostParams};
use nats_api::jetstream::NatsSystemBalancer;
use nats_wire::Wire;
use serde_json::{Value, json};
use sim::testkit::apiserver_with_crds;

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "nats";
const STREAMS: [&str; 6] = ["S1", "S2", "S3", "S4", "S5", "S6"];

pub(crate) use crate::common::leader;

async fn balancer_status(api: &Api<NatsSystemBalancer>, name: &str) -> Result<Value, String> {
    let o = api.get(name).await.map_err(|e| e.to_string())?;
    let v = serde_json::to_value(&o).map_err(|e| e.to_string())?;
    Ok(v["status"].clone())
}

pub(crate) fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

pub(crate) async fn events(client: kube::Client, name: &str, reason: &str) -> i32 {
    common::events(client, NS, name, reason).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_07_system_balancer_evens_leaders_one_move_per_pass() {
    let api = apiserver_with_crds(&[NS]).await;
    let topo = common::cluster().await;
    topo.wait_meta_leader(WAIT).await.expect("a meta leader");
    let metrics = Metrics::default();
    let _controllers =
        common::spawn_controller(api.client(), Duration::from_secs(10), metrics.clone());

    // Six R3 streams, every leader moved onto c1-0.
    let app = topo.connect().await.expect("an APP client");
    for s in STREAMS {
        let config = json!({"name": s, "subjects": [format!("{s}.>")], "num_replicas": 3});
        common::create_stream(&app, config.as_object().expect("an object")).await;
    }
    let wire = Wire::new(app.clone());
    for s in STREAMS {
        common::lead_on(&wire, &app, s, "c1-0", WAIT).await;
    }

    crate::live_placement::create_system_connection(api.client(), topo.client_urls()).await;
    let balancers: Api<NatsSystemBalancer> = Api::namespaced(api.client(), NS);
    let balancer = |name: &str| -> NatsSystemBalancer {
        serde_json::from_value(json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsSystemBalancer",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"connectionRef": {"name": "system"}, "interval": "5s"},
        }))
        .expect("a NatsSystemBalancer")
    };
    balancers
        .create(&PostParams::default(), &balancer("system"))
        .await
        .expect("created");
    let b = &balancers;
    let status = sim::wait::poll(
        "leader skew at most 1, no move pending",
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
    assert_eq!(status["capabilities"]["placement"], true, "{status}");
    let leads: Vec<u64> = status["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .map(|s| s["leaders"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(leads.len(), 3, "{status}");
    assert_eq!(leads.iter().sum::<u64>(), 6, "{status}");
    assert!(
        leads.iter().all(|n| *n == 2),
        "6 leaders over 3 servers: {status}"
    );
    assert_eq!(status["lastMove"]["kind"], "Leader", "{status}");
    let ready = condition(&status, "Ready").expect("Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("True"), &json!("Balancing"))
    );
    // Worded as story 07's status/01-natssystembalancer-demo.yaml words them.
    assert_eq!(
        ready["message"],
        "balancing leaders across 3 servers of NATS cluster c1"
    );
    let holding = condition(&status, "Holding").expect("Holding");
    assert_eq!(
        holding["message"],
        "NATS cluster c1 is Settled; next pass in 5s"
    );
    assert_eq!(status["skew"]["replicas"], 0, "R3 on 3 servers: {status}");
    assert!(status["capabilities"]["leaderReason"].is_null(), "{status}");
    // The servers agree: two leaders each.
    let mut by_server = std::collections::BTreeMap::<String, u32>::new();
    for s in STREAMS {
        *by_server.entry(leader(&app, s).await).or_default() += 1;
    }
    assert_eq!(
        by_server.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{by_server:?}"
    );
    // 6-0-0 → 2-2-2 takes four moves, each started and seen done.
    let started = events(api.client(), "system", "MoveStarted").await;
    let done = events(api.client(), "system", "MoveDone").await;
    assert_eq!((started, done), (4, 4), "MoveStarted, MoveDone");
    // §9: /metrics carries the skews, the pending moves and the held passes as status says.
    let rendered = metrics.render();
    let series = |name: &str, labels: &str| {
        sim::testkit::replicas::sample(&rendered, name, labels)
            .unwrap_or_else(|| panic!("{name}{{{labels}}} in /metrics:\n{rendered}"))
    };
    let me = format!("namespace=\"{NS}\",name=\"system\"");
    use nats_api::jetstream::metric;
    let skew = series(
        metric::BALANCER_LEADER_SKEW,
        &format!("{me},pool=\"system\""),
    );
    assert!(skew <= 1.0, "leader skew {skew}");
    let replicas = series(
        metric::BALANCER_REPLICA_SKEW,
        &format!("{me},pool=\"system\""),
    );
    assert_eq!(replicas, 0.0, "R3 on 3 servers");
    for kind in ["leader", "placement"] {
        let n = series(
            metric::BALANCER_PENDING_MOVES,
            &format!("{me},move_kind=\"{kind}\""),
        );
        assert_eq!(n, 0.0, "{kind} moves pending");
    }
    let held = series(
        metric::BALANCER_HELD_PASSES,
        &format!("{me},reason=\"MovePending\""),
    );
    assert!(
        held >= 4.0,
        "each of four moves held at least one pass: {held}"
    );

    // A second system balancer for the same NATS cluster is refused.
    balancers
        .create(&PostParams::default(), &balancer("second"))
        .await
        .expect("created");
    let second = sim::wait::poll("the second refused", WAIT, || async move {
        let s = balancer_status(b, "second").await?;
        match condition(&s, "Ready") {
            Some(c) if c["reason"] == "DuplicateBalancer" => Ok(Some(s)),
            _ => Err(format!("status: {s}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let message = condition(&second, "Ready").expect("Ready")["message"].clone();
    assert!(
        message.as_str().is_some_and(|m| m.contains("nats/system")),
        "{message}"
    );
    assert_eq!(events(api.client(), "second", "MoveStarted").await, 0);
}
