//! API tier + live NATS, story 07's placement moves on a 5-server NATS cluster whose R3 streams
//! were all created while c1-3 and c1-4 were down, so every copy sits on c1-0, c1-1 and c1-2:
//!
//! - a NatsSystemBalancer with `moves.placement` unset makes no placement move; turned on, it
//!   moves one copy per pass with `$JS.API.ACCOUNT.STREAM.MOVE.<account>.<stream>` until no
//!   server holds more than one copy more than another (lastMove Placement, MoveStarted and
//!   MoveDone per move), never moving the stream whose NatsStream sets `placement.cluster`;
//! - a NatsBalancer with `moves.placement: true` over the account's own connection removes the
//!   copy on the busiest server with `$JS.API.STREAM.PEER.REMOVE` and the meta leader places a
//!   new one within the NATS cluster, never touching an R1 stream's only copy.

use crate::common::{self, create, status_of};

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use controller_kit::metrics::Metrics;
use jetstream_controller::jsapi;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams};
use nats_api::jetstream::{NatsBalancer, NatsStream, NatsSystemBalancer};
use nats_api::nats::NatsConnection;
use serde_json::{Value, json};
use sim::testkit::{AbortOnDrop, apiserver_with_crds};
use sim::topology::{SYS_USER, Topology, TopologySpec};

use crate::live_balancer::condition;

pub(crate) const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "nats";
/// The servers down while the piled streams are created.
const LATE: [&str; 2] = ["c1-3", "c1-4"];

/// Whether a status reads Holding=False Settled.
pub(crate) fn settled(s: &Value) -> bool {
    condition(s, "Holding").is_some_and(|c| c["status"] == "False" && c["reason"] == "Settled")
}

/// The notes of the Events of `reason` about `name`.
pub(crate) async fn notes(client: kube::Client, name: &str, reason: &str) -> Vec<String> {
    let api: Api<Event> = Api::namespaced(client, NS);
    api.list(&Default::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .flat_map(|e| e.note)
        .collect()
}

/// NatsConnection `system` in `ns` to `servers` with the sim's system user.
pub(crate) async fn create_system_connection(client: kube::Client, servers: Vec<String>) {
    let urls: Vec<String> = servers
        .iter()
        .map(|u| {
            u.replacen(
                "nats://",
                &format!("nats://{}:{}@", SYS_USER.0, SYS_USER.1),
                1,
            )
        })
        .collect();
    create(
        &Api::<NatsConnection>::namespaced(client, NS),
        json!({
            "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
            "metadata": {"name": "system", "namespace": NS},
            "spec": {"servers": urls},
        }),
    )
    .await;
}

/// The servers holding a copy of `stream` (leader first), as STREAM.INFO reports them.
pub(crate) async fn members(client: &async_nats::Client, stream: &str) -> Vec<String> {
    let info = common::stream_info(client, stream).await;
    let c = &info["cluster"];
    std::iter::once(&c["leader"])
        .chain(
            c["replicas"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| &r["name"]),
        )
        .filter_map(|n| n.as_str().filter(|n| !n.is_empty()).map(String::from))
        .collect()
}

/// Copies per server of `streams`, every server of `servers` counted; `Err` while a stream is
/// not exactly `replicas(stream)` copies with a leader.
pub(crate) async fn copies(
    client: &async_nats::Client,
    servers: &[String],
    streams: &[(&str, usize)],
) -> Result<BTreeMap<String, usize>, String> {
    let mut by_server: BTreeMap<String, usize> = servers.iter().map(|s| (s.clone(), 0)).collect();
    for (s, replicas) in streams {
        let info = jsapi::stream_info(client, s)
            .await
            .map_err(|e| e.to_string())?
            .ok_or(format!("no stream {s}"))?;
        let c = &info["cluster"];
        let m: Vec<&str> = std::iter::once(&c["leader"])
            .chain(
                c["replicas"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| &r["name"]),
            )
            .filter_map(|n| n.as_str().filter(|n| !n.is_empty()))
            .collect();
        if c["leader"].as_str().is_none_or(str::is_empty) || m.len() != *replicas {
            return Err(format!("{s} mid-move: {c}"));
        }
        for n in m {
            *by_server.entry(n.to_string()).or_default() += 1;
        }
    }
    Ok(by_server)
}

pub(crate) fn spread(by_server: &BTreeMap<String, usize>) -> usize {
    let max = by_server.values().max().copied().unwrap_or(0);
    let min = by_server.values().min().copied().unwrap_or(0);
    max - min
}

/// A 5-server NATS cluster (c1-0, c1-3 and c1-4 tagged `az:0`, `az:3`, `az:4`, for R1 anchors)
/// with the controller running, c1-3 and c1-4 stopped: what is created now lands on c1-0..2.
async fn five_servers_two_down() -> (sim::apiserver::ApiServer, Topology, AbortOnDrop) {
    let api = apiserver_with_crds(&[NS]).await;
    let spec = TopologySpec::cluster(5)
        .with_tags("c1", 0, &["az:0"])
        .with_tags("c1", 3, &["az:3"])
        .with_tags("c1", 4, &["az:4"]);
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
    let controllers =
        common::spawn_controller(api.client(), Duration::from_secs(10), Metrics::default());
    (api, topo, controllers)
}

/// c1-3 and c1-4 back, every server of the meta group current.
async fn bring_back(topo: &mut Topology) {
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
}

/// Creates R3 stream `name` of the client's account and waits until it has its three copies.
async fn create_r3(client: &async_nats::Client, name: &str) {
    let config = json!({"name": name, "subjects": [format!("{name}.>")], "num_replicas": 3});
    common::create_stream(client, config.as_object().expect("an object")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_07_system_balancer_placement_moves_even_copies_over_five_servers() {
    let (api, mut topo, _controllers) = five_servers_two_down().await;
    let app = topo.connect().await.expect("an APP client");
    let piled = ["P1", "P2", "P3", "P4", "P5"];
    for s in piled {
        create_r3(&app, s).await;
    }
    // APIN's resource sets placement.cluster: no balancer moves it (first by name, the first a
    // placement move would take were it not pinned).
    common::create_demo_connection(api.client(), NS, topo.client_urls()).await;
    create(
        &Api::<NatsStream>::namespaced(api.client(), NS),
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsStream",
            "metadata": {"name": "apin", "namespace": NS},
            "spec": {"name": "APIN", "connectionRef": {"name": "demo"}, "subjects": ["APIN.>"],
                     "replicas": 3, "placement": {"cluster": "c1"}},
        }),
    )
    .await;
    let pin_before: BTreeSet<String> = members(&app, "APIN").await.into_iter().collect();
    bring_back(&mut topo).await;
    let servers = topo.server_names();
    let all: Vec<(&str, usize)> = piled.iter().chain(&["APIN"]).map(|s| (*s, 3)).collect();
    let before = copies(&app, &servers, &all).await.expect("copies");
    assert_eq!(
        before.values().copied().collect::<Vec<_>>(),
        vec![6, 6, 6, 0, 0],
        "every copy on c1-0..2: {before:?}"
    );

    // moves.placement unset: leaders only, no copy moves.
    create_system_connection(api.client(), topo.client_urls()).await;
    let balancers: Api<NatsSystemBalancer> = Api::namespaced(api.client(), NS);
    create(
        &balancers,
        json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsSystemBalancer",
            "metadata": {"name": "system", "namespace": NS},
            "spec": {"connectionRef": {"name": "system"}, "interval": "5s"},
        }),
    )
    .await;
    let b = &balancers;
    let status = sim::wait::poll("Settled, leaders only", WAIT, || async move {
        let s = status_of(b, "system").await?;
        if settled(&s) && s["pending"].is_null() {
            Ok(Some(s))
        } else {
            Err(format!("status: {s}"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status["skew"]["replicas"], 6, "{status}");
    assert!(
        !notes(api.client(), "system", "MoveStarted")
            .await
            .iter()
            .any(|n| n.starts_with("Placement")),
        "no placement move with moves.placement unset"
    );
    assert_eq!(copies(&app, &servers, &all).await.expect("copies"), before);

    // moves.placement on (leader moves off, so the last move is a placement move): copies
    // move until the skew is at most 1.
    balancers
        .patch(
            "system",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"moves": {"placement": true, "leader": false}}})),
        )
        .await
        .expect("patched");
    let status = sim::wait::poll(
        "replica skew at most 1, Settled",
        Duration::from_secs(240),
        || async move {
            let s = status_of(b, "system").await?;
            let even = s["skew"]["replicas"].as_u64().is_some_and(|n| n <= 1);
            if even && settled(&s) && s["pending"].is_null() {
                Ok(Some(s))
            } else {
                Err(format!("status: {s}"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status["lastMove"]["kind"], "Placement", "{status}");
    assert_eq!(status["lastMove"]["account"], "APP", "{status}");
    assert_eq!(status["capabilities"]["placement"], true, "{status}");
    let after = copies(&app, &servers, &all).await.expect("copies");
    assert!(spread(&after) <= 1, "the servers agree: {after:?}");
    assert_eq!(after.values().sum::<usize>(), 18, "{after:?}");
    // 6-6-6-0-0 → at most one apart takes at least six copy moves, each started and seen done.
    let started: Vec<String> = notes(api.client(), "system", "MoveStarted")
        .await
        .into_iter()
        .filter(|n| n.starts_with("Placement"))
        .collect();
    let done = notes(api.client(), "system", "MoveDone")
        .await
        .into_iter()
        .filter(|n| n.starts_with("Placement"))
        .count();
    assert!(started.len() >= 6, "{started:?}");
    assert_eq!(done, started.len(), "MoveDone per MoveStarted: {started:?}");
    assert!(
        started.iter().all(|n| !n.contains("stream APIN ")),
        "APIN is pinned: {started:?}"
    );
    let pin_after: BTreeSet<String> = members(&app, "APIN").await.into_iter().collect();
    assert_eq!(pin_after, pin_before, "APIN's copies stay where they are");
    assert!(
        notes(api.client(), "system", "MoveRefused")
            .await
            .is_empty(),
        "no move refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_07_account_balancer_placement_moves_by_peer_remove() {
    let (api, mut topo, _controllers) = five_servers_two_down().await;
    let app = topo.connect().await.expect("an APP client");
    let piled = ["Q1", "Q2", "Q3", "Q4"];
    for s in piled {
        create_r3(&app, s).await;
    }
    bring_back(&mut topo).await;
    // R1 anchors: A1 on c1-0, the busiest server (first by name: the first a placement move
    // would take if an R1 stream's only copy were movable); Z3 and Z4 on c1-3 and c1-4, so the
    // account's streams reach every server.
    for (s, az) in [("A1", "az:0"), ("Z3", "az:3"), ("Z4", "az:4")] {
        let config = json!({"name": s, "subjects": [format!("{s}.>")], "num_replicas": 1,
                            "placement": {"tags": [az]}});
        common::create_stream(&app, config.as_object().expect("an object")).await;
    }
    let servers = topo.server_names();
    let all: Vec<(&str, usize)> = piled
        .iter()
        .map(|s| (*s, 3))
        .chain([("A1", 1), ("Z3", 1), ("Z4", 1)])
        .collect();
    let before = copies(&app, &servers, &all).await.expect("copies");
    assert_eq!(
        before.values().copied().collect::<Vec<_>>(),
        vec![5, 4, 4, 1, 1],
        "{before:?}"
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
    let (b, app_ref, servers_ref, all_ref) = (&balancers, &app, &servers, &all);
    let (status, after) = sim::wait::poll(
        "copies at most one apart, Settled",
        Duration::from_secs(180),
        || async move {
            let s = status_of(b, "orders").await?;
            let by_server = copies(app_ref, servers_ref, all_ref).await?;
            if spread(&by_server) <= 1 && settled(&s) && s["lastMove"].is_object() {
                Ok(Some((s, by_server)))
            } else {
                Err(format!("copies {by_server:?}; status: {s}"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(after.values().sum::<usize>(), 15, "{after:?}");
    assert_eq!(status["lastMove"]["kind"], "Placement", "{status}");
    assert_eq!(status["lastMove"]["account"], "APP", "{status}");
    assert_eq!(
        members(&app, "A1").await,
        vec!["c1-0"],
        "A1's only copy stays"
    );
    // 5-4-4-1-1 → 3-3-3-3-3: four copies moved, each off the busiest server of its pass.
    four_q_copies_moved(api.client()).await;
}

/// The NatsBalancer `orders` made at least four placement moves, every one done, every one of an
/// R3 stream `Q…`, none refused by the servers.
pub(crate) async fn four_q_copies_moved(client: kube::Client) {
    let started = notes(client.clone(), "orders", "MoveStarted").await;
    let done = notes(client.clone(), "orders", "MoveDone").await;
    assert!(started.len() >= 4, "{started:?}");
    assert_eq!(done.len(), started.len(), "{started:?} / {done:?}");
    assert!(
        started
            .iter()
            .all(|n| n.starts_with("Placement move of stream Q")),
        "only the R3 streams' copies move: {started:?}"
    );
    assert!(
        notes(client, "orders", "MoveRefused").await.is_empty(),
        "no peer removal refused"
    );
}
