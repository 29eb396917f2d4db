//! API tier + live NATS, design §6.5: the move lease is never held for ever. Four plain R3
//! streams of APP (X1–X4) led by c1-0, two NatsStreams of the hot pool (H1, H2) on the other two
//! servers: the NatsSystemBalancer moves an X off c1-0, and the test undoes it at once and keeps
//! it undone (each X stepped back toward c1-0 whenever another server leads it, as an operator's
//! stepdown would). The move stays pending, the system balancer renews the lease pass after pass,
//! and a NatsBalancer whose hot pool is then crowded on c1-0 holds with MoveLeaseHeld. After
//! [`jetstream_controller::lease::abandon_after`] passes the system balancer gives the move up:
//! a MoveAbandoned Warning Event, its pending entry cleared, the abandonment counted, and the
//! NatsBalancer's first move starts within one of its intervals after the give-up.

use std::time::Duration;

use controller_kit::metrics::Metrics;
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;
use nats_api::jetstream::{NatsBalancer, NatsStream, NatsSystemBalancer};
use nats_wire::Wire;
use nats_wire::monitor::Placement;
use serde_json::{Value, json};
use sim::testkit::{AbortOnDrop, apiserver_with_crds};

use crate::common::{self, create, status_of};
use crate::live_balancer::{condition, leader};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "nats";
const HELD: [&str; 4] = ["X1", "X2", "X3", "X4"];
const HOT: [&str; 2] = ["H1", "H2"];
/// The NatsBalancer's interval: its first move must start within one after the give-up.
const INTERVAL: Duration = Duration::from_secs(5);
/// What the NatsBalancer's pass itself takes before its move's Event is stamped (its gather and
/// the stepdown request): the pass starts within the interval, the Event follows it.
const PASS_TIME: Duration = Duration::from_secs(2);

/// Steps `stream` down toward `server` until `server` leads it.
async fn lead_on(wire: &Wire, app: &async_nats::Client, stream: &str, server: &str) {
    common::lead_on(wire, app, stream, server, WAIT).await;
}

/// The first time the Event `reason` on `name` happened, when it did.
async fn first_event(client: kube::Client, name: &str, reason: &str) -> Option<Event> {
    let api: Api<Event> = Api::namespaced(client, NS);
    api.list(&Default::default())
        .await
        .ok()?
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .min_by_key(|e| e.event_time.as_ref().map(|t| t.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undone_move_is_given_up_and_the_lease_goes_to_another_balancer() {
    let api = apiserver_with_crds(&[NS]).await;
    let topo = common::cluster().await;
    topo.wait_meta_leader(WAIT).await.expect("a meta leader");
    let metrics = Metrics::default();
    let _controllers =
        common::spawn_controller(api.client(), Duration::from_secs(10), metrics.clone());

    common::create_demo_connection(api.client(), NS, topo.client_urls()).await;
    let app = topo.connect().await.expect("an APP client");
    let wire = Wire::new(app.clone());
    for s in HELD {
        let config = json!({"name": s, "subjects": [format!("{s}.>")], "num_replicas": 3});
        common::create_stream(&app, config.as_object().expect("an object")).await;
    }
    let streams: Api<NatsStream> = Api::namespaced(api.client(), NS);
    for s in HOT {
        create(
            &streams,
            json!({
                "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsStream",
                "metadata": {"name": s.to_lowercase(), "namespace": NS, "labels": {"tier": "hot"}},
                "spec": {"name": s, "connectionRef": {"name": "demo"},
                         "subjects": [format!("{s}.>")], "replicas": 3},
            }),
        )
        .await;
    }
    for s in HOT {
        common::stream_info(&app, s).await;
    }
    for s in HELD {
        lead_on(&wire, &app, s, "c1-0").await;
    }
    lead_on(&wire, &app, "H1", "c1-1").await;
    lead_on(&wire, &app, "H2", "c1-2").await;

    // Every X kept on c1-0 from now on: a move off it is stepped back within tens of ms.
    let holder = {
        let (app, wire) = (app.clone(), wire.clone());
        AbortOnDrop::spawn(async move {
            loop {
                for s in HELD {
                    let l = leader(&app, s).await;
                    if !l.is_empty() && l != "c1-0" {
                        let toward = Placement {
                            preferred: "c1-0".into(),
                            ..Default::default()
                        };
                        let _ = wire.stream_leader_stepdown(s, Some(&toward)).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        })
    };

    crate::live_placement::create_system_connection(api.client(), topo.client_urls()).await;
    let systems: Api<NatsSystemBalancer> = Api::namespaced(api.client(), NS);
    // Four times the NatsBalancer's interval: after its give-up the system balancer does not
    // look again before the NatsBalancer does.
    create(
        &systems,
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsSystemBalancer",
            "metadata": {"name": "system", "namespace": NS},
            "spec": {"connectionRef": {"name": "system"}, "interval": "20s"},
        }),
    )
    .await;
    let sys = &systems;
    // Pending and undone through several of its 2 s passes (the same request): a pass right after
    // the move may find it done before the holder stepped it back; the balancer then moves again
    // an interval later.
    let first_seen = std::sync::Mutex::new(None::<(Value, std::time::Instant)>);
    let seen = &first_seen;
    let pending = sim::wait::poll(
        "the system balancer's move of an X pending and undone for 6 s",
        Duration::from_secs(180),
        || async move {
            let s = status_of(sys, "system").await?;
            let now = std::time::Instant::now();
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            match s["pending"].as_array().and_then(|p| p.first()) {
                Some(m) if HELD.contains(&m["stream"].as_str().unwrap_or_default()) => {
                    match &*seen {
                        Some((t, at)) if *t == m["time"] => {
                            if now.duration_since(*at) >= Duration::from_secs(6) {
                                return Ok(Some(m.clone()));
                            }
                        }
                        _ => *seen = Some((m["time"].clone(), now)),
                    }
                    Err(format!("pending since {}", m["time"]))
                }
                _ => {
                    *seen = None;
                    Err(format!("status: {s}"))
                }
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pending["from"], "c1-0", "{pending}");

    // The hot pool crowded on c1-0, then a NatsBalancer over it: it wants a move and holds.
    for s in HOT {
        lead_on(&wire, &app, s, "c1-0").await;
    }
    let balancers: Api<NatsBalancer> = Api::namespaced(api.client(), NS);
    create(
        &balancers,
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsBalancer",
            "metadata": {"name": "orders", "namespace": NS},
            "spec": {"connectionRef": {"name": "demo"}, "interval": "5s",
                     "pools": [{"name": "hot", "selector": {"matchLabels": {"tier": "hot"}}}]},
        }),
    )
    .await;
    let b = &balancers;
    let held = sim::wait::poll("the NatsBalancer held by the lease", WAIT, || async move {
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
        "NatsSystemBalancer nats/system holds the move lease of NATS cluster c1"
    );

    // Given up: 30 passes 2 s apart (and their own time) after the move was first found undone.
    let client = api.client();
    let abandoned = sim::wait::poll(
        "MoveAbandoned on the system balancer",
        Duration::from_secs(150),
        || {
            let client = client.clone();
            async move {
                first_event(client, "system", "MoveAbandoned")
                    .await
                    .map(Some)
                    .ok_or_else(|| "not yet".to_string())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(abandoned.type_.as_deref(), Some("Warning"));
    let note = abandoned.note.clone().unwrap_or_default();
    assert!(
        note.contains("given up") && note.contains("off c1-0"),
        "{note}"
    );
    let started = sim::wait::poll(
        "the NatsBalancer's first move",
        Duration::from_secs(30),
        || {
            let client = client.clone();
            async move {
                match first_event(client, "orders", "MoveStarted").await {
                    Some(e) => Ok(Some(e)),
                    None => Err(format!(
                        "orders: {}; system: {}",
                        status_of(b, "orders").await?,
                        status_of(sys, "system").await?
                    )),
                }
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    drop(holder);
    let at = |e: &Event| e.event_time.as_ref().map(|t| t.0).expect("an event time");
    let after = at(&started).duration_since(at(&abandoned));
    let after = Duration::try_from(after).expect("after the give-up, not before");
    eprintln!("the NatsBalancer moved {after:?} after the give-up");
    assert!(
        after <= INTERVAL + PASS_TIME,
        "the NatsBalancer moved {after:?} after the give-up: later than its first pass after it \
         ({INTERVAL:?} and the pass's own {PASS_TIME:?})"
    );
    let s = status_of(sys, "system").await.expect("status");
    assert!(s["pending"].is_null(), "the given-up entry is cleared: {s}");
    let abandons = sim::testkit::replicas::sample(
        &metrics.render(),
        nats_api::jetstream::metric::BALANCER_MOVES_ABANDONED,
        &format!("namespace=\"{NS}\",name=\"system\""),
    );
    assert_eq!(
        abandons,
        Some(1.0),
        "counted once: {}",
        metrics
            .render()
            .lines()
            .filter(|l| l.contains("abandoned"))
            .collect::<Vec<_>>()
            .join("; ")
    );
}
