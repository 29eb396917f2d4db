//! Live tests against a real 2×3 supercluster (gateways, Explicit) with a leaf node in its own
//! JetStream domain: pings collect all six hub servers across gateways, GATEWAYZ and LEAFZ see
//! the links, a placement move by ACCOUNT.STREAM.MOVE carries a stream from c1 to c2 (answered by
//! the meta leader wherever it is), CANCEL_MOVE rolls a pending move back, and `$JS.<domain>.API`
//! reaches the leaf's own JetStream.

use crate::common;

use std::time::Duration;

use async_nats::jetstream;
use common::{WAIT, eventually, roster, sys_wire, urls_with_user};
use nats_wire::jsapi::StreamMove;
use nats_wire::monitor::{GatewayzOptions, JszOptions, LeafzOptions};
use nats_wire::{Collect, ConnectionConfig, ServerFilter, Wire, WireError, dial};
use sim::testkit::publish_acked;
use sim::topology::{APP_USER, GatewayMode, Topology, TopologySpec};

const HUB: usize = 6;

async fn supercluster() -> Topology {
    let mut spec =
        TopologySpec::supercluster(2, 3, GatewayMode::Explicit).with_leaf("leaf1", "leafdom", "c1");
    for c in ["c1", "c2"] {
        for i in 0..3 {
            spec = spec.with_tags(c, i, &[&format!("region:{c}")]);
        }
    }
    Topology::start(spec)
        .await
        .expect("a 2x3 supercluster with a leaf boots")
}

/// The APP user dialed to c1's servers only, so the streams it creates are placed in c1.
async fn app_in_c1(topo: &Topology) -> Wire {
    let urls: Vec<String> = topo
        .cluster_urls("c1")
        .iter()
        .map(|u| {
            u.replacen(
                "nats://",
                &format!("nats://{}:{}@", APP_USER.0, APP_USER.1),
                1,
            )
        })
        .collect();
    dial(&ConnectionConfig::new(urls).with_name("wire-test-app-c1"))
        .await
        .expect("dial APP in c1")
}

async fn stream_cluster(
    js: &jetstream::Context,
    name: &str,
) -> Result<Option<(String, usize)>, String> {
    let mut s = js.get_stream(name).await.map_err(|e| e.to_string())?;
    let info = s.info().await.map_err(|e| e.to_string())?;
    Ok(info.cluster.as_ref().and_then(|c| {
        let leader = c.leader.clone()?;
        let current = c.replicas.iter().filter(|r| r.current).count();
        Some((c.name.clone()?, current + usize::from(!leader.is_empty())))
    }))
}

/// Every peer of the stream's group (leader first), current or not.
async fn stream_peers(js: &jetstream::Context, name: &str) -> Result<Option<Vec<String>>, String> {
    let mut s = js.get_stream(name).await.map_err(|e| e.to_string())?;
    let info = s.info().await.map_err(|e| e.to_string())?;
    Ok(info.cluster.as_ref().and_then(|c| {
        let mut peers = vec![c.leader.clone()?];
        peers.extend(c.replicas.iter().map(|r| r.name.clone()));
        Some(peers)
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supercluster_pings_gateways_leafs_moves_and_cancel() {
    let topo = supercluster().await;
    let sys = sys_wire(&topo).await;

    // Every hub server answers across the gateways; the leaf has its own system account.
    let ids = roster(&sys, HUB).await;
    let expected_names: Vec<String> = topo
        .server_names()
        .into_iter()
        .filter(|n| n.starts_with('c'))
        .collect();
    assert_eq!(ids.keys().cloned().collect::<Vec<_>>(), expected_names);

    let all = Collect::expecting(HUB, Duration::from_secs(5));
    let gwz = sys
        .ping_gatewayz(&GatewayzOptions::default(), all)
        .await
        .unwrap();
    assert_eq!(gwz.replies.len(), HUB);
    for r in &gwz.replies {
        let other = if r.server.cluster == "c1" { "c2" } else { "c1" };
        assert_eq!(r.data.name, r.server.cluster);
        assert_eq!(
            r.data.connected_outbound(),
            vec![other.to_string()],
            "{}",
            r.server.name
        );
    }

    let leafz = sys.ping_leafz(&LeafzOptions::default(), all).await.unwrap();
    let leafs: Vec<(String, String)> = leafz
        .replies
        .iter()
        .flat_map(|r| {
            r.data
                .leafs
                .iter()
                .map(|l| (l.name.clone(), l.account.clone()))
        })
        .collect();
    assert_eq!(leafs, vec![("leaf1".to_string(), "APP".to_string())]);
    // LEAFZ filtered by an account with no leaf: the servers answer with none.
    let none = sys
        .ping_leafz(
            &LeafzOptions {
                account: "SYS".into(),
                ..Default::default()
            },
            all,
        )
        .await
        .unwrap();
    assert!(none.replies.iter().all(|r| r.data.leafs.is_empty()));

    // A cluster-filtered JSZ ping: only c2 answers (a balancer's Settled gate reads its own cluster).
    let c2 = sys
        .ping_jsz(
            &JszOptions {
                filter: ServerFilter::cluster("c2"),
                ..Default::default()
            },
            Collect::until(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    assert_eq!(c2.server_names(), vec!["c2-0", "c2-1", "c2-2"]);

    let meta = sys
        .meta_group(Collect::until(Duration::from_secs(2)))
        .await
        .unwrap()
        .expect("the meta leader answers across gateways");
    assert_eq!(meta.peer_names(), expected_names);

    // A placement move c1 → c2 by the system account.
    let app = app_in_c1(&topo).await;
    let js = jetstream::new(app.client().clone());
    js.create_stream(jetstream::stream::Config {
        name: "MOVEME".into(),
        subjects: vec!["moveme.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .unwrap();
    for i in 0..50 {
        publish_acked(&js, &format!("moveme.{i}"), "x".into(), WAIT).await;
    }
    let (cluster, _) = eventually("MOVEME placed", WAIT, || stream_cluster(&js, "MOVEME")).await;
    assert_eq!(cluster, "c1");
    let answer = sys
        .account_stream_move("APP", "MOVEME", &StreamMove::to_tags(["region:c2"]))
        .await
        .expect("ACCOUNT.STREAM.MOVE");
    assert_eq!(
        answer.config.as_ref().map(|c| c.name.as_str()),
        Some("MOVEME")
    );
    eventually(
        "MOVEME in c2 on three current peers",
        Duration::from_secs(60),
        || async {
            Ok(stream_cluster(&js, "MOVEME")
                .await?
                .filter(|(c, n)| c == "c2" && *n == 3))
        },
    )
    .await;
    // The move leaves the stream's own placement as it was.
    let cfg = js
        .get_stream("MOVEME")
        .await
        .unwrap()
        .cached_info()
        .config
        .clone();
    assert!(cfg.placement.is_none(), "{:?}", cfg.placement);
    let msgs = js
        .get_stream("MOVEME")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .state
        .messages;
    assert_eq!(msgs, 50);

    // A move cancelled while pending: the stream holds enough data (20 MB) that the new peers
    // take a while to catch up; without the cancellation it would end in c2.
    // (Freezing a c2 server instead would also freeze the gateway links that c1 servers hold to
    // it, and with them the meta group's quorum.)
    js.create_stream(jetstream::stream::Config {
        name: "CANCELME".into(),
        subjects: vec!["cancelme.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .unwrap();
    let payload = bytes::Bytes::from(vec![b'x'; 1024]);
    // The first ack says the leader's interest has reached this client's server.
    publish_acked(&js, "cancelme.first", payload.clone(), WAIT).await;
    for chunk in 0..20 {
        let mut acks = Vec::new();
        for i in 0..1000 {
            acks.push(
                js.publish(format!("cancelme.{chunk}.{i}"), payload.clone())
                    .await
                    .unwrap(),
            );
        }
        for ack in acks {
            ack.await.unwrap();
        }
    }
    eventually("CANCELME placed in c1", WAIT, || async {
        Ok(stream_cluster(&js, "CANCELME")
            .await?
            .filter(|(c, n)| c == "c1" && *n == 3))
    })
    .await;
    let moved = sys
        .account_stream_move("APP", "CANCELME", &StreamMove::to_tags(["region:c2"]))
        .await
        .expect("the move is accepted");
    // Pending: the group holds the old and the new peers while the new ones catch up.
    let pending = eventually("CANCELME's group grown by the move", WAIT, || async {
        Ok(stream_peers(&js, "CANCELME").await?.filter(|p| p.len() > 3))
    })
    .await;
    assert!(pending.iter().any(|p| p.starts_with("c2-")), "{pending:?}");
    sys.account_stream_cancel_move("APP", "CANCELME")
        .await
        .expect("CANCEL_MOVE of the pending move");
    assert_eq!(moved.config.map(|c| c.name), Some("CANCELME".to_string()));
    let back = eventually(
        "CANCELME back on exactly its three c1 peers, all current",
        Duration::from_secs(60),
        || async {
            let cluster = stream_cluster(&js, "CANCELME").await?;
            let peers = stream_peers(&js, "CANCELME").await?;
            Ok(match (cluster, peers) {
                (Some((c, 3)), Some(p)) if c == "c1" && p.len() == 3 => Some(p),
                _ => None,
            })
        },
    )
    .await;
    assert!(back.iter().all(|p| p.starts_with("c1-")), "{back:?}");
    let msgs = js
        .get_stream("CANCELME")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .state
        .messages;
    assert_eq!(msgs, 20_001, "the first message and 20 chunks of 1,000");

    // A stream that does not exist.
    let err = sys
        .account_stream_move("APP", "NOPE", &StreamMove::to_tags(["region:c2"]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, WireError::JetStream { code: 404, .. }),
        "{err}"
    );

    // `$JS.leafdom.API` from the hub's APP account reaches the leaf's own JetStream.
    let hub_app = dial(&ConnectionConfig::new(urls_with_user(&topo, APP_USER)))
        .await
        .unwrap()
        .with_js_domain("leafdom");
    let leaf_js = jetstream::with_domain(hub_app.client().clone(), "leafdom");
    leaf_js
        .create_stream(jetstream::stream::Config {
            name: "ONLEAF".into(),
            subjects: vec!["onleaf.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let err = hub_app
        .stream_leader_stepdown("NOT_ON_LEAF", None)
        .await
        .unwrap_err();
    match &err {
        WireError::JetStream { request, code, .. } => {
            assert_eq!(
                request,
                "$JS.leafdom.API.STREAM.LEADER.STEPDOWN.NOT_ON_LEAF"
            );
            // The leaf is one server, not clustered: its JetStream says so, which the hub's
            // clustered JetStream never would.
            assert_eq!(*code, 503, "{err}");
            assert!(err.to_string().contains("clustering"), "{err}");
        }
        other => panic!("{other}"),
    }
}
