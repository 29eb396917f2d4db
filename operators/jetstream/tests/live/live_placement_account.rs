//! API tier + live NATS, design §6.5 "with `moves.placement`, a copy moves to a server holding
//! fewer" for a NatsBalancer whose account holds nothing on some servers: on a 5-server NATS
//! cluster whose R3 streams were all created while c1-3 and c1-4 were down, the account's copies
//! sit on c1-0..2 only and its own connection cannot name c1-3 or c1-4.
//!
//! - Without a system view of the NATS cluster the balancer says so in Ready (placement judged
//!   only among the 3 servers holding its streams) and moves nothing: 5-4-4 is within skew 1.
//! - Once a NatsSystemBalancer (moves off: it only looks) pings the NATS cluster, its sighting
//!   shows c1-3 and c1-4 holding none: the account balancer removes copies off the busiest server
//!   with `$JS.API.STREAM.PEER.REMOVE` until copies are within one of even over all five, c1-3
//!   and c1-4 each holding some.
//! - `nats_operator_balancer_replica_skew{namespace,name,pool}` follows, read from `/metrics`.

use crate::common::{self, create, status_of};

use std::time::Duration;

use controller_kit::metrics::Metrics;
use kube::api::Api;
use nats_api::jetstream::{NatsBalancer, NatsSystemBalancer, metric};
use serde_json::json;
use sim::testkit::apiserver_with_crds;
use sim::topology::{Topology, TopologySpec};

use crate::live_balancer::condition;
use crate::live_placement::{
    WAIT, copies, create_system_connection, four_q_copies_moved, members, notes, settled, spread,
};

const NS: &str = "nats";
/// The servers down while the account's streams are created.
const LATE: [&str; 2] = ["c1-3", "c1-4"];
/// The Ready note of a balancer that cannot see the servers holding none of its copies.
const UNSEEN: &str = "placement judged only among the 3 servers holding the account's streams: \
                      no system view of NATS cluster c1";

/// The replica skew gauge of NatsBalancer `orders`' default pool, as `/metrics` renders it.
fn replica_skew(metrics: &Metrics) -> Option<f64> {
    sim::testkit::replicas::sample(
        &metrics.render(),
        metric::BALANCER_REPLICA_SKEW,
        &format!("namespace=\"{NS}\",name=\"orders\",pool=\"default\""),
    )
}

fn ready_message(s: &serde_json::Value) -> String {
    condition(s, "Ready")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn account_balancer_places_copies_on_servers_holding_none_of_its_streams() {
    let api = apiserver_with_crds(&[NS]).await;
    let spec = TopologySpec::cluster(5).with_tags("c1", 0, &["az:0"]);
    let mut topo = Topology::start(spec)
        .await
        .expect("a 5-server cluster boots");
    topo.wait_meta_leader(WAIT).await.expect("a meta leader");
    for s in LATE {
        topo.server_mut(s)
            .expect("a server")
            .sigterm(WAIT)
            .await
            .expect("stopped");
    }
    let metrics = Metrics::default();
    let _controllers =
        common::spawn_controller(api.client(), Duration::from_secs(10), metrics.clone());

    let app = topo.connect().await.expect("an APP client");
    let piled = ["Q1", "Q2", "Q3", "Q4"];
    for s in piled {
        let config = json!({"name": s, "subjects": [format!("{s}.>")], "num_replicas": 3});
        common::create_stream(&app, config.as_object().expect("an object")).await;
    }
    // An R1 stream on c1-0, the busiest: never placement-moved (its only copy).
    let config = json!({"name": "A1", "subjects": ["A1.>"], "num_replicas": 1,
                        "placement": {"tags": ["az:0"]}});
    common::create_stream(&app, config.as_object().expect("an object")).await;
    for s in LATE {
        topo.server_mut(s)
            .expect("a server")
            .start()
            .await
            .expect("started");
    }
    topo.wait_ready(WAIT)
        .await
        .expect("the cluster ready again");
    let servers = topo.server_names();
    let all: Vec<(&str, usize)> = piled.iter().map(|s| (*s, 3)).chain([("A1", 1)]).collect();
    let before = copies(&app, &servers, &all).await.expect("copies");
    assert_eq!(
        before.values().copied().collect::<Vec<_>>(),
        vec![5, 4, 4, 0, 0],
        "the account holds nothing on c1-3 and c1-4: {before:?}"
    );

    common::create_demo_connection(api.client(), NS, topo.client_urls()).await;
    let balancers: Api<NatsBalancer> = Api::namespaced(api.client(), NS);
    create(
        &balancers,
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsBalancer",
            "metadata": {"name": "orders", "namespace": NS},
            "spec": {"connectionRef": {"name": "demo"}, "interval": "5s",
                     "moves": {"leader": false, "placement": true}},
        }),
    )
    .await;
    // No system view: Settled among c1-0..2 (5-4-4), and Ready says why no more is judged.
    let (b, m) = (&balancers, &metrics);
    let status = sim::wait::poll("Ready names the unseen servers", WAIT, || async move {
        let s = status_of(b, "orders").await?;
        if settled(&s) && ready_message(&s).contains(UNSEEN) && replica_skew(m).is_some() {
            Ok(Some(s))
        } else {
            Err(format!("status: {s}"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ready_message(&status),
        format!(
            "1 pools over NATS cluster c1; {UNSEEN} (an account cannot ask which servers hold \
             none of its copies; a NatsSystemBalancer or NatsClusterEvacuation over NATS cluster \
             c1 shows them)"
        )
    );
    assert_eq!(
        replica_skew(&metrics),
        Some(1.0),
        "5-4-4 among the servers it sees"
    );
    assert!(
        notes(api.client(), "orders", "MoveStarted")
            .await
            .is_empty()
    );
    assert_eq!(copies(&app, &servers, &all).await.expect("copies"), before);

    // A NatsSystemBalancer that only looks: its pings are the sighting of c1.
    create_system_connection(api.client(), topo.client_urls()).await;
    let systems: Api<NatsSystemBalancer> = Api::namespaced(api.client(), NS);
    create(
        &systems,
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsSystemBalancer",
            "metadata": {"name": "system", "namespace": NS},
            "spec": {"connectionRef": {"name": "system"}, "interval": "5s",
                     "moves": {"leader": false, "placement": false}},
        }),
    )
    .await;
    let (app_ref, servers_ref, all_ref) = (&app, &servers, &all);
    let (status, after) = sim::wait::poll(
        "copies within one over five servers, Settled",
        Duration::from_secs(180),
        || async move {
            let s = status_of(b, "orders").await?;
            let by_server = copies(app_ref, servers_ref, all_ref).await?;
            let gauge = replica_skew(m);
            if spread(&by_server) <= 1
                && settled(&s)
                && s["lastMove"].is_object()
                && gauge == Some(spread(&by_server) as f64)
            {
                Ok(Some((s, by_server)))
            } else {
                Err(format!(
                    "copies {by_server:?}; gauge {gauge:?}; status: {s}"
                ))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(after.values().sum::<usize>(), 13, "{after:?}");
    for s in LATE {
        assert!(after[s] >= 2, "{s} holds copies now: {after:?}");
    }
    assert_eq!(status["lastMove"]["kind"], "Placement", "{status}");
    assert!(
        !ready_message(&status).contains("placement judged only"),
        "the sighting shows every server: {status}"
    );
    assert_eq!(
        members(&app, "A1").await,
        vec!["c1-0"],
        "A1's only copy stays"
    );
    // 5-4-4-0-0 → within one of 13/5: at least four copies moved off c1-0..2.
    four_q_copies_moved(api.client()).await;
    assert!(
        notes(api.client(), "system", "MoveStarted")
            .await
            .is_empty(),
        "the system balancer only looked"
    );
}
