//! API tier + live NATS, with an account OTHER beside APP that carries no jetstream-stepdown
//! export (the sim's `with_unexported_accounts`):
//!
//! - story 07's partial capability: a NatsSystemBalancer reads `capabilities.leader: Partial`
//!   with a `leaderReason` counting the accounts without the export, and moves APP's piled-up
//!   leaders while OTHER's stay where they are;
//! - the account balancer's Settled gate scope (§6.5, "its Settled gate reads only that NATS
//!   cluster"): while a NatsSystemBalancer observes the NATS cluster, a NatsBalancer of APP
//!   holds Unsettled because a copy of OTHER's stream is gone silent, though every APP stream
//!   is fine, and moves once it is back.

use crate::common::{self, create, status_of};

use std::time::Duration;

use controller_kit::metrics::Metrics;
use kube::api::Api;
use nats_api::jetstream::{NatsBalancer, NatsSystemBalancer};
use nats_wire::Wire;
use serde_json::{Value, json};
use sim::testkit::{AbortOnDrop, apiserver_with_crds};
use sim::topology::{SYS_USER, Topology, TopologySpec};

use crate::live_balancer::{condition, leader};
use crate::live_placement::{WAIT, create_system_connection, notes, settled};

const NS: &str = "nats";

/// A client of OTHER (user other/other).
async fn other_client(topo: &Topology) -> async_nats::Client {
    async_nats::ConnectOptions::with_user_and_password("other".into(), "other".into())
        .retry_on_initial_connect()
        .connect(topo.server_addrs())
        .await
        .expect("an OTHER client")
}

/// Creates R3 streams `streams` over `client`, with placement tags `tags`, and steps each down
/// toward c1-0 until c1-0 leads it.
async fn piled_on_c1_0(client: &async_nats::Client, streams: &[&str], tags: &[&str]) {
    for s in streams {
        let mut config = json!({"name": s, "subjects": [format!("{s}.>")], "num_replicas": 3});
        if !tags.is_empty() {
            config["placement"] = json!({ "tags": tags });
        }
        common::create_stream(client, config.as_object().expect("an object")).await;
    }
    let wire = Wire::new(client.clone());
    for s in streams {
        common::lead_on(&wire, client, s, "c1-0", WAIT).await;
    }
}

async fn leaders(client: &async_nats::Client, streams: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for s in streams {
        out.push(leader(client, s).await);
    }
    out
}

fn system_balancer(moves: Value) -> Value {
    json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsSystemBalancer",
        "metadata": {"name": "system", "namespace": NS},
        "spec": {"connectionRef": {"name": "system"}, "interval": "5s", "moves": moves},
    })
}

fn controllers(api: &sim::apiserver::ApiServer, metrics: Metrics) -> AbortOnDrop {
    common::spawn_controller(api.client(), Duration::from_secs(10), metrics)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_07_partial_leader_capability_moves_only_exported_accounts_leaders() {
    let api = apiserver_with_crds(&[NS]).await;
    let spec = TopologySpec::cluster(3).with_unexported_accounts(&["OTHER"]);
    let topo = Topology::start(spec)
        .await
        .expect("a 3-server cluster boots");
    topo.wait_meta_leader(WAIT).await.expect("a meta leader");
    let _controllers = controllers(&api, Metrics::default());
    let app = topo.connect().await.expect("an APP client");
    let other = other_client(&topo).await;
    let (apps, others) = (["A1", "A2", "A3"], ["O1", "O2", "O3"]);
    piled_on_c1_0(&app, &apps, &[]).await;
    piled_on_c1_0(&other, &others, &[]).await;

    create_system_connection(api.client(), topo.client_urls()).await;
    let balancers: Api<NatsSystemBalancer> = Api::namespaced(api.client(), NS);
    create(&balancers, system_balancer(json!({}))).await;
    let b = &balancers;
    let status = sim::wait::poll("Settled", Duration::from_secs(90), || async move {
        let s = status_of(b, "system").await?;
        if settled(&s) && s["pending"].is_null() && s["lastMove"].is_object() {
            Ok(Some(s))
        } else {
            Err(format!("status: {s}"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status["capabilities"]["leader"], "Partial", "{status}");
    // Worded as story 07's status/01-natssystembalancer-demo.yaml words it, naming the account.
    assert_eq!(
        status["capabilities"]["leaderReason"],
        "1 of 2 accounts carry no jetstream-stepdown export; their leaders are not moved: OTHER",
        "{status}"
    );
    assert_eq!(status["lastMove"]["account"], "APP", "{status}");
    // OTHER's leaders stay on c1-0; APP's all left it (6-0-0 → 3-2-1: c1-0 keeps OTHER's three).
    assert_eq!(leaders(&other, &others).await, vec!["c1-0"; 3]);
    let app_leads = leaders(&app, &apps).await;
    assert!(
        app_leads.iter().all(|l| l != "c1-0" && !l.is_empty()),
        "{app_leads:?}"
    );
    assert_eq!(
        status["skew"]["leaders"], 2,
        "what OTHER leaves uneven: {status}"
    );
    let started = notes(api.client(), "system", "MoveStarted").await;
    assert_eq!(started.len(), 3, "{started:?}");
    assert!(
        started.iter().all(|n| n.contains("of account APP ")),
        "{started:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settled_scope_account_balancer_holds_for_another_accounts_stream() {
    let api = apiserver_with_crds(&[NS]).await;
    // APP's streams on c1-0..2, OTHER's on c1-1..3: c1-3 holds no copy of APP's.
    let spec = TopologySpec::cluster(4)
        .with_unexported_accounts(&["OTHER"])
        .with_tags("c1", 0, &["app"])
        .with_tags("c1", 1, &["app", "other"])
        .with_tags("c1", 2, &["app", "other"])
        .with_tags("c1", 3, &["other"]);
    let mut topo = Topology::start(spec)
        .await
        .expect("a 4-server cluster boots");
    topo.wait_meta_leader(WAIT).await.expect("a meta leader");
    let metrics = Metrics::default();
    let _controllers = controllers(&api, metrics.clone());
    // Every client and connection reaches c1-0..2 only: c1-3 goes silent below.
    let urls: Vec<String> = ["c1-0", "c1-1", "c1-2"]
        .iter()
        .map(|n| topo.server(n).expect("a server").client_url())
        .collect();
    let addrs: Vec<async_nats::ServerAddr> = urls.iter().filter_map(|u| u.parse().ok()).collect();
    let app = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect(addrs)
        .await
        .expect("an APP client");
    let other = other_client(&topo).await;
    let apps = ["A1", "A2", "A3"];
    piled_on_c1_0(&app, &apps, &["app"]).await;
    let config = json!({"name": "O1", "subjects": ["O1.>"], "num_replicas": 3,
                        "placement": {"tags": ["other"]}});
    common::create_stream(&other, config.as_object().expect("an object")).await;
    topo.wait_stream_current("O1", WAIT)
        .await
        .expect("O1 current");

    // A system balancer observing c1 (it moves nothing: leader moves off, placement unset).
    create_system_connection(api.client(), urls.clone()).await;
    let systems: Api<NatsSystemBalancer> = Api::namespaced(api.client(), NS);
    create(&systems, system_balancer(json!({"leader": false}))).await;
    let sys = &systems;
    sim::wait::poll("the system balancer Settled", WAIT, || async move {
        let s = status_of(sys, "system").await?;
        if settled(&s) {
            Ok(Some(()))
        } else {
            Err(format!("status: {s}"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // c1-3, holding a copy of OTHER's O1 and none of APP's, goes silent (not leading the meta
    // group, whose next election would hold every balancer for a while).
    let system =
        async_nats::ConnectOptions::with_user_and_password(SYS_USER.0.into(), SYS_USER.1.into())
            .connect(topo.server_addrs())
            .await
            .expect("a SYS client");
    let (t, system_ref) = (&topo, &system);
    sim::wait::poll("the meta leader off c1-3", WAIT, || async move {
        let l = t.wait_meta_leader(WAIT).await.map_err(|e| e.to_string())?;
        if l != "c1-3" {
            return Ok(Some(()));
        }
        let _ = system_ref
            .request("$JS.API.META.LEADER.STEPDOWN", "".into())
            .await;
        Err("c1-3 leads the meta group".to_string())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    topo.server_mut("c1-3")
        .expect("c1-3")
        .pause()
        .expect("paused");
    common::create_demo_connection(api.client(), NS, urls.clone()).await;
    // The system balancer has seen it (a view taken before would still read Settled).
    sim::wait::poll("the system balancer Unsettled", WAIT, || async move {
        let s = status_of(sys, "system").await?;
        match condition(&s, "Holding") {
            Some(c) if c["reason"] == "Unsettled" => Ok(Some(())),
            _ => Err(format!("status: {s}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let balancers: Api<NatsBalancer> = Api::namespaced(api.client(), NS);
    create(
        &balancers,
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsBalancer",
            "metadata": {"name": "orders", "namespace": NS},
            "spec": {"connectionRef": {"name": "demo"}, "interval": "5s"},
        }),
    )
    .await;
    let (b, m) = (&balancers, &metrics);
    let held = sim::wait::poll(
        "orders held Unsettled for three passes",
        Duration::from_secs(90),
        || async move {
            let s = status_of(b, "orders").await?;
            let passes = sim::testkit::replicas::sample(
                &m.render(),
                nats_api::jetstream::metric::BALANCER_HELD_PASSES,
                &format!("namespace=\"{NS}\",name=\"orders\",reason=\"Unsettled\""),
            )
            .unwrap_or(0.0);
            match condition(&s, "Holding") {
                Some(c) if c["reason"] == "Unsettled" && passes >= 3.0 => Ok(Some(c.clone())),
                _ => Err(format!("{passes} Unsettled passes; status: {s}")),
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let message = held["message"].as_str().unwrap_or_default();
    assert!(
        message.ends_with("(as NatsSystemBalancer nats/system last saw NATS cluster c1)"),
        "{message}"
    );
    assert!(
        message.contains("c1-3"),
        "the silent server named: {message}"
    );
    assert!(
        notes(api.client(), "orders", "MoveStarted")
            .await
            .is_empty(),
        "no move while another account's stream is behind"
    );
    assert_eq!(leaders(&app, &apps).await, vec!["c1-0"; 3]);

    // c1-3 back: the account balancer evens APP's leaders, judged from the whole NATS cluster.
    topo.server_mut("c1-3")
        .expect("c1-3")
        .resume()
        .expect("resumed");
    let app_ref = &app;
    let status = sim::wait::poll(
        "APP's leaders even, orders Settled",
        Duration::from_secs(90),
        || async move {
            let s = status_of(b, "orders").await?;
            let mut leads = leaders(app_ref, &apps).await;
            leads.sort();
            leads.dedup();
            if leads.len() == 3 && settled(&s) {
                Ok(Some(s))
            } else {
                Err(format!("leaders {leads:?}; status: {s}"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        condition(&status, "Holding").expect("Holding")["message"],
        "NATS cluster c1 is Settled; next pass in 5s",
        "judged from the system balancer's view: {status}"
    );
}
