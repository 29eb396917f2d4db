//! API tier + live NATS, story 11: a NatsClusterEvacuation empties c1 of a 2×3 supercluster
//! (servers tagged `region:c1` / `region:c2`) into the servers tagged `region:c2`, under traffic.
//!
//! In order, on one supercluster:
//! 1. An evacuation whose target tags a source server carries refuses to start
//!    (SourceCarriesTargetTags, Event EvacuationRefused) and moves nothing.
//! 2. The evacuation of c1: a NatsStream, a NatsKeyValue and a stream with no resource (whose
//!    config names c1) move to c2 one at a time; the NatsStream pinned to c1 by its own spec
//!    stays and is listed in status.pinned (Ready False PinnedResourcesRemain); the stream with
//!    no resource is listed in status.stalePlacement; no config gains the tags; the ledger of
//!    the traffic on the moving NatsStream shows no acknowledged message lost or stored twice.
//! 3. The pinned stream's owner moves it (placement.cluster c2): the evacuation turns Ready
//!    (Evacuated).
//! 4. With a c1 server stopped, a second evacuation holds (Holding ServersDown) and requests
//!    nothing; once it is back, it requests the move of a large stream, and deleting the
//!    evacuation then cancels the pending move (MoveCancelled): the stream stays on c1.

use crate::common;

use std::time::Duration;

use async_nats::jetstream;
use controller_kit::metrics::Metrics;
use jetstream_controller::jsapi;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use nats_api::jetstream::{NatsClusterEvacuation, NatsKeyValue, NatsStream};
use nats_api::nats::NatsConnection;
use serde_json::{Value, json};
use sim::ledger::Ledger;
use sim::testkit::apiserver_with_crds;
use sim::topology::SYS_USER;
use sim::traffic::{self, ConsumerKind, ConsumerSpec, PublisherSpec};
use sim::{GatewayMode, Topology, TopologySpec};

const WAIT: Duration = Duration::from_secs(60);
const MOVE_WAIT: Duration = Duration::from_secs(180);
const SYS_NS: &str = "nats";
const NS: &str = "apps";

async fn supercluster() -> Topology {
    let mut spec = TopologySpec::supercluster(2, 3, GatewayMode::Explicit);
    for c in ["c1", "c2"] {
        for i in 0..3 {
            spec = spec.with_tags(c, i, &[&format!("region:{c}")]);
        }
    }
    let topo = Topology::start(spec)
        .await
        .expect("a 2×3 supercluster boots");
    topo.wait_meta_leader(WAIT)
        .await
        .expect("the supercluster elects a meta leader");
    topo.wait_gateways_connected(WAIT)
        .await
        .expect("gateways connect");
    topo
}

fn with_user(urls: &[String], user: (&str, &str)) -> Vec<String> {
    urls.iter()
        .map(|u| u.replacen("nats://", &format!("nats://{}:{}@", user.0, user.1), 1))
        .collect()
}

async fn create<K>(api: &Api<K>, value: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).expect("a valid object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("object created")
}

/// The status of `name` once `done` holds for it.
async fn wait_status<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    wait: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let done = &done;
    sim::wait::poll(what, wait, || async move {
        let o = api.get(name).await.map_err(|e| e.to_string())?;
        let v = serde_json::to_value(&o).map_err(|e| e.to_string())?;
        if done(&v["status"]) {
            Ok(Some(v["status"].clone()))
        } else {
            Err(format!("status: {}", v["status"]))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn ready_is(status: &Value, ready: bool, reason: &str) -> bool {
    condition(status, "Ready").is_some_and(|c| {
        c["status"] == if ready { "True" } else { "False" } && c["reason"] == reason
    })
}

/// The stream's NATS cluster and every member, from STREAM.INFO.
async fn placement(client: &async_nats::Client, stream: &str) -> (String, Vec<String>) {
    let info = jsapi::stream_info(client, stream)
        .await
        .expect("STREAM.INFO")
        .expect("the stream exists");
    let cluster = &info["cluster"];
    let mut members = vec![cluster["leader"].as_str().unwrap_or_default().to_string()];
    members.extend(
        cluster["replicas"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str().map(String::from)),
    );
    (
        cluster["name"].as_str().unwrap_or_default().to_string(),
        members,
    )
}

/// How many Events of `reason` regard the evacuation `name`.
async fn events(client: kube::Client, name: &str, reason: &str) -> i32 {
    common::events(client, SYS_NS, name, reason).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_11_evacuation_moves_all_but_pinned_and_loses_no_acknowledged_message() {
    let api = apiserver_with_crds(&[SYS_NS, NS]).await;
    let mut topo = supercluster().await;
    let metrics = Metrics::default();
    let _controllers =
        common::spawn_controller(api.client(), Duration::from_secs(10), metrics.clone());

    // The application's connection reaches c1 only, so its streams are placed in c1; the
    // evacuation's is the system user's, to every server.
    let c1 = topo.cluster_urls("c1");
    common::create_demo_connection(api.client(), NS, c1.clone()).await;
    let conns: Api<NatsConnection> = Api::namespaced(api.client(), SYS_NS);
    create(
        &conns,
        json!({
            "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
            "metadata": {"name": "system", "namespace": SYS_NS},
            "spec": {"servers": with_user(&topo.client_urls(), SYS_USER)},
        }),
    )
    .await;

    let streams: Api<NatsStream> = Api::namespaced(api.client(), NS);
    let kvs: Api<NatsKeyValue> = Api::namespaced(api.client(), NS);
    let stream = |name: &str, server: &str, placement: Value| {
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsStream",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"name": server, "connectionRef": {"name": "demo"},
                     "subjects": [format!("{name}.>")], "replicas": 3, "placement": placement},
        })
    };
    create(&streams, stream("orders", "ORDERS", Value::Null)).await;
    create(
        &streams,
        stream("invoices", "INVOICES", json!({"cluster": "c1"})),
    )
    .await;
    create(
        &kvs,
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsKeyValue",
            "metadata": {"name": "config", "namespace": NS},
            "spec": {"name": "CONFIG", "connectionRef": {"name": "demo"}, "replicas": 3},
        }),
    )
    .await;
    for name in ["orders", "invoices"] {
        wait_status(
            &streams,
            name,
            &format!("NatsStream {name} Ready"),
            WAIT,
            |s| {
                ready_is(s, true, "MatchesSpec")
                    || condition(s, "Ready").is_some_and(|c| c["status"] == "True")
            },
        )
        .await;
    }
    wait_status(&kvs, "config", "NatsKeyValue config Ready", WAIT, |s| {
        condition(s, "Ready").is_some_and(|c| c["status"] == "True")
    })
    .await;
    // A stream no resource owns, its config naming c1.
    let c1_addrs: Vec<async_nats::ServerAddr> = c1
        .iter()
        .map(|u| u.parse().expect("a server URL"))
        .collect();
    let app = async_nats::connect(c1_addrs)
        .await
        .expect("an APP client on c1");
    let config = json!({"name": "SCRATCH", "subjects": ["scratch.>"], "num_replicas": 3,
                        "placement": {"cluster": "c1"}});
    common::create_stream(&app, config.as_object().expect("an object")).await;
    for s in ["ORDERS", "INVOICES", "KV_CONFIG", "SCRATCH"] {
        assert_eq!(placement(&app, s).await.0, "c1", "{s} starts in c1");
    }

    // 1. Refused: the target tags are the source's own.
    let evacuations: Api<NatsClusterEvacuation> = Api::namespaced(api.client(), SYS_NS);
    let evacuation = |name: &str, tag: &str| {
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsClusterEvacuation",
            "metadata": {"name": name, "namespace": SYS_NS},
            "spec": {"connectionRef": {"name": "system"}, "from": {"cluster": "c1"},
                     "to": {"serverTags": [tag]}},
        })
    };
    create(&evacuations, evacuation("wrong", "region:c1")).await;
    let refused = wait_status(&evacuations, "wrong", "the evacuation refused", WAIT, |s| {
        ready_is(s, false, "SourceCarriesTargetTags")
    })
    .await;
    let message = condition(&refused, "Ready").expect("Ready")["message"].clone();
    assert!(
        message.as_str().is_some_and(|m| m.contains("c1-0")),
        "{message}"
    );
    assert!(events(api.client(), "wrong", "EvacuationRefused").await >= 1);
    assert_eq!(events(api.client(), "wrong", "MoveStarted").await, 0);
    evacuations
        .delete("wrong", &DeleteParams::default())
        .await
        .expect("deleted");
    sim::wait::poll("the refused evacuation gone", WAIT, || async {
        match evacuations.get_opt("wrong").await {
            Ok(None) => Ok(Some(())),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(placement(&app, "ORDERS").await.0, "c1", "nothing moved");

    // Traffic on ORDERS through the whole evacuation.
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect(topo.server_addrs())
        .await
        .expect("a traffic client");
    let js = jetstream::new(client.clone());
    let ledger = Ledger::new();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let consumers = vec!["reader".to_string()];
    let reader = traffic::spawn_consumer(
        js.clone(),
        ConsumerSpec {
            name: "reader".into(),
            stream: "ORDERS".into(),
            kind: ConsumerKind::Pull,
        },
        ledger.clone(),
        stop_rx.clone(),
    )
    .await
    .expect("the consumer is created");
    let watch = traffic::spawn_leader_watch(js.clone(), "ORDERS".into(), ledger.clone(), stop_rx);
    let publisher = traffic::spawn_publisher(
        js.clone(),
        PublisherSpec {
            subject: "orders.placed".into(),
            rate: 100,
            duration: Duration::from_secs(30),
            ack_timeout: Duration::from_secs(2),
            give_up_after: Duration::from_secs(90),
            payload_bytes: 128,
        },
        ledger.clone(),
    );

    // 2. The evacuation of c1 into the servers tagged region:c2.
    ledger.step("NatsClusterEvacuation leave-c1 created");
    create(&evacuations, evacuation("leave-c1", "region:c2")).await;
    // §9: the evacuation's progress on /metrics while it runs (stream groups still to move).
    let progress = |m: &Metrics| {
        let labels = format!("namespace=\"{SYS_NS}\",name=\"leave-c1\"");
        let body = m.render();
        let read = |name| sim::testkit::replicas::sample(&body, name, &labels);
        (
            read(nats_api::jetstream::metric::EVACUATION_REMAINING),
            read(nats_api::jetstream::metric::EVACUATION_STALE_PLACEMENTS),
        )
    };
    let started = sim::wait::poll("the evacuation's remaining gauge above 0", WAIT, || async {
        Ok(progress(&metrics).0.filter(|r| *r >= 1.0))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("figure: nats_operator_evacuation_remaining first read {started}");
    let done = wait_status(
        &evacuations,
        "leave-c1",
        "every movable stream off c1, the pinned one listed",
        MOVE_WAIT,
        |s| ready_is(s, false, "PinnedResourcesRemain"),
    )
    .await;
    assert_eq!(done["moved"], 3, "{done}");
    assert_eq!(done["inFlight"], 0, "{done}");
    assert_eq!(done["remaining"], 0, "{done}");
    assert!(done["requested"].is_null(), "{done}");
    assert_eq!(
        done["pinned"],
        json!([{"kind": "NatsStream", "namespace": NS, "name": "invoices"}]),
        "{done}"
    );
    assert_eq!(
        done["stalePlacement"],
        json!([{"account": "APP", "name": "SCRATCH"}]),
        "{done}"
    );
    assert_eq!(
        progress(&metrics),
        (Some(0.0), Some(1.0)),
        "the gauges say what status says: nothing left to move, one stale placement"
    );
    for s in ["ORDERS", "KV_CONFIG", "SCRATCH"] {
        let (cluster, members) = placement(&app, s).await;
        assert_eq!(cluster, "c2", "{s} moved");
        assert!(
            members.iter().all(|m| m.starts_with("c2-")),
            "{s}: {members:?}"
        );
    }
    assert_eq!(
        placement(&app, "INVOICES").await.0,
        "c1",
        "the pinned stream stays"
    );
    // The tags were ephemeral: no config gained them, SCRATCH's still names c1.
    let orders = jsapi::stream_info(&app, "ORDERS")
        .await
        .expect("INFO")
        .expect("exists");
    assert!(
        orders["config"]["placement"].is_null(),
        "{}",
        orders["config"]
    );
    let scratch = jsapi::stream_info(&app, "SCRATCH")
        .await
        .expect("INFO")
        .expect("exists");
    assert_eq!(scratch["config"]["placement"], json!({"cluster": "c1"}));
    assert_eq!(events(api.client(), "leave-c1", "MoveStarted").await, 3);
    assert_eq!(events(api.client(), "leave-c1", "MoveDone").await, 3);

    // 3. The pinned stream's owner moves it: nothing remains.
    ledger.step("invoices placement.cluster c1 -> c2");
    streams
        .patch(
            "invoices",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"placement": {"cluster": "c2"}}})),
        )
        .await
        .expect("placement patched");
    let evacuated = wait_status(&evacuations, "leave-c1", "Evacuated", MOVE_WAIT, |s| {
        ready_is(s, true, "Evacuated")
    })
    .await;
    assert_eq!(
        evacuated["moved"], 3,
        "the owner's own move is not the evacuation's"
    );
    assert!(evacuated["pinned"].is_null(), "{evacuated}");

    tokio::time::timeout(Duration::from_secs(150), publisher)
        .await
        .expect("the publisher finishes")
        .expect("the publisher task");
    traffic::wait_drained(&ledger, &consumers, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    stop_tx.send(true).expect("traffic tasks listen");
    let _ = tokio::time::timeout(Duration::from_secs(10), reader).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), watch).await;
    let f = ledger.figures(&consumers);
    println!(
        "evacuation c1 -> region:c2: published {}, acknowledged {}, lost {}, duplicated {}, \
         ack timeouts {}, max ack gap {} ms, leadership changes {}",
        f.published,
        f.acknowledged,
        f.lost,
        f.duplicated,
        f.ack_timeouts,
        f.max_ack_gap_ms,
        f.leadership_changes
    );
    assert!(f.acknowledged > 0, "{f:?}");
    assert_eq!(f.lost, 0, "acknowledged messages lost: {f:?}");
    assert_eq!(f.duplicated, 0, "messages stored twice: {f:?}");
    evacuations
        .delete("leave-c1", &DeleteParams::default())
        .await
        .expect("deleted");

    // 4. A large stream on c1, a c1 server down: the next evacuation holds.
    let big = json!({"name": "BIG", "subjects": ["big.>"], "num_replicas": 3});
    common::create_stream(&app, big.as_object().expect("an object")).await;
    let bjs = jetstream::new(app.clone());
    let payload = vec![b'x'; 1024];
    for chunk in 0..20 {
        let mut acks = Vec::new();
        for i in 0..1000 {
            acks.push(
                bjs.publish(format!("big.{chunk}.{i}"), payload.clone().into())
                    .await
                    .expect("published"),
            );
        }
        for ack in acks {
            ack.await.expect("acknowledged");
        }
    }
    assert_eq!(placement(&app, "BIG").await.0, "c1");
    let (_, members) = placement(&app, "BIG").await;
    let down = members
        .iter()
        .find(|m| m.starts_with("c1-"))
        .expect("a c1 member")
        .clone();
    topo.server_mut(&down)
        .expect("the server")
        .sigterm(WAIT)
        .await
        .expect("stopped");
    create(&evacuations, evacuation("again", "region:c2")).await;
    let held = wait_status(&evacuations, "again", "Holding ServersDown", WAIT, |s| {
        condition(s, "Holding").is_some_and(|c| c["reason"] == "ServersDown")
    })
    .await;
    assert!(held["requested"].is_null(), "no move while held: {held}");
    assert_eq!(held["moved"], 0, "none counted while held: {held}");
    assert_eq!(events(api.client(), "again", "MoveStarted").await, 0);
    topo.server_mut(&down)
        .expect("the server")
        .start()
        .await
        .expect("started again");
    let pending = wait_status(
        &evacuations,
        "again",
        "the move of BIG requested",
        MOVE_WAIT,
        |s| s["requested"][0]["stream"] == "BIG",
    )
    .await;
    assert!(condition(&pending, "Holding").is_none(), "{pending}");
    evacuations
        .delete("again", &DeleteParams::default())
        .await
        .expect("deleted");
    sim::wait::poll("the evacuation gone after CANCEL_MOVE", WAIT, || async {
        match evacuations.get_opt("again").await {
            Ok(None) => Ok(Some(())),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(events(api.client(), "again", "MoveCancelled").await, 1);
    let app_ref = &app;
    let back = sim::wait::poll("BIG back on its three c1 peers", WAIT, || async move {
        let (cluster, members) = placement(app_ref, "BIG").await;
        if cluster == "c1" && members.len() == 3 && members.iter().all(|m| m.starts_with("c1-")) {
            Ok(Some(members))
        } else {
            Err(format!("{cluster}: {members:?}"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    println!("BIG after CANCEL_MOVE: {back:?}");
}
