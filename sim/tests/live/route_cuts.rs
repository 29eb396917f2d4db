//! Live: a server cut from its cluster peers through the route proxies (`route_proxies`): every
//! route connection of nats-server's pool goes through them, a cut takes the server out of its
//! peers' routes and the meta group while clients of the other servers carry on, and a restore
//! brings the routes back; cuts that overlap keep a link cut while any of them names it.

use std::time::Duration;

use async_nats::jetstream;
use sim::backend::Deployment;
use sim::{Topology, TopologySpec};

const T: Duration = Duration::from_secs(30);
/// nats-server's default route `pool_size`: connections per pair of servers.
const POOL: usize = 3;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

async fn proxied_topology() -> Topology {
    let topo = Topology::start(TopologySpec::cluster(3).with_route_proxies())
        .await
        .unwrap();
    topo.wait_routes_connected(POOL, T).await.unwrap();
    // Every connection of every pool goes through the pair's proxies, whichever side dialed.
    for (a, b) in [("c1-0", "c1-1"), ("c1-0", "c1-2"), ("c1-1", "c1-2")] {
        let through = topo.route_connections(a, b) + topo.route_connections(b, a);
        assert!(through >= POOL, "{a}–{b}: {through} connections proxied");
    }
    topo
}

/// The meta group as server `name` sees it: (its leader, whether it counts `peer` current).
async fn meta_view(topo: &Topology, name: &str, peer: &str) -> Result<(String, bool), String> {
    let jsz = topo.monitor(name, "/jsz").await?;
    let meta = &jsz["meta_cluster"];
    let leader = meta["leader"].as_str().unwrap_or_default().to_string();
    let current = meta["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"].as_str() == Some(peer))
        .is_some_and(|r| {
            r["current"].as_bool() == Some(true) && r["offline"].as_bool() != Some(true)
        });
    Ok((leader, current))
}

#[tokio::test]
async fn a_server_cut_from_its_peers_leaves_their_routes_and_meta_group_until_restored() {
    let topo = proxied_topology().await;
    let urls = topo.cluster_urls("c1");
    // The clients reach c1-0 and c1-1 only: their traffic must carry on through the cut.
    let addrs: Vec<async_nats::ServerAddr> = urls[..2].iter().map(|u| u.parse().unwrap()).collect();
    let client = async_nats::ConnectOptions::new()
        .connect(addrs)
        .await
        .unwrap();
    let js = jetstream::new(client);
    js.create_stream(jetstream::stream::Config {
        name: "CUT".into(),
        subjects: vec!["cut.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .unwrap();
    topo.wait_stream_current("CUT", T).await.unwrap();

    let peers = topo.cut_routes("c1-2", &[]).unwrap();
    assert_eq!(peers, names(&["c1-0", "c1-1"]));
    topo.wait_routes_cut("c1-2", &peers, T).await.unwrap();
    // The meta group led by c1-0 or c1-1 no longer counts c1-2, and c1-2 has no leader.
    sim::wait::poll("the meta group losing c1-2", T, || async {
        let (leader, _) = meta_view(&topo, "c1-0", "c1-2").await?;
        if leader.is_empty() || leader == "c1-2" {
            return Err(format!("c1-0 sees meta leader {leader:?}"));
        }
        let (_, current) = meta_view(&topo, &leader, "c1-2").await?;
        let (alone, _) = meta_view(&topo, "c1-2", "c1-0").await?;
        match (current, alone.as_str()) {
            (false, "") => Ok(Some(())),
            _ => Err(format!(
                "{leader} counts c1-2 current: {current}; c1-2 sees leader {alone:?}"
            )),
        }
    })
    .await
    .unwrap();

    // Publishes through c1-0 and c1-1 are acknowledged by the two of them.
    for i in 0..20 {
        sim::wait::poll(
            &format!("publish {i} acknowledged during the cut"),
            T,
            || {
                let js = js.clone();
                async move {
                    let ack = js
                        .publish(format!("cut.{i}"), "x".into())
                        .await
                        .map_err(|e| e.to_string())?;
                    tokio::time::timeout(Duration::from_secs(2), ack)
                        .await
                        .map_err(|_| "ack timed out".to_string())?
                        .map(Some)
                        .map_err(|e| e.to_string())
                }
            },
        )
        .await
        .unwrap();
    }
    // c1-2 kept redialing its peers all along (every second); still nothing got through.
    topo.wait_routes_cut("c1-2", &peers, Duration::from_secs(2))
        .await
        .unwrap();
    for p in &peers {
        assert_eq!(topo.route_connections("c1-2", p), 0);
        assert_eq!(topo.route_connections(p, "c1-2"), 0);
    }

    topo.restore_routes("c1-2", &[]).unwrap();
    topo.wait_routes_connected(POOL, T).await.unwrap();
    topo.wait_meta_leader(T).await.unwrap();
    topo.wait_stream_current("CUT", T).await.unwrap();
    let info = js
        .get_stream("CUT")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .clone();
    assert_eq!(info.state.messages, 20);
}

#[tokio::test]
async fn overlapping_cuts_keep_a_link_cut_while_any_names_it_and_gossip_does_not_bypass_them() {
    let topo = proxied_topology().await;
    let c1_1 = names(&["c1-1"]);

    // c1-0 cut from c1-1 only: both still route to c1-2.
    topo.cut_routes("c1-0", &c1_1).unwrap();
    topo.wait_routes_cut("c1-0", &c1_1, T).await.unwrap();
    topo.wait_routes_connected(POOL, T).await.unwrap();

    // c1-2 cut and restored: as it routes to c1-0 and c1-1 again it tells each of the other
    // (gossip), and each dials the other at its advertised address — which refuses. Were it
    // the cluster port, c1-0 and c1-1 would route to each other around the cut.
    topo.cut_routes("c1-2", &[]).unwrap();
    topo.wait_routes_cut("c1-2", &names(&["c1-0", "c1-1"]), T)
        .await
        .unwrap();
    topo.restore_routes("c1-2", &[]).unwrap();
    topo.wait_routes_connected(POOL, T).await.unwrap();
    topo.wait_routes_cut("c1-0", &c1_1, Duration::from_secs(2))
        .await
        .unwrap();

    // c1-2 cut from every peer, then c1-0's cut lifted: c1-0–c1-1 back, c1-2 still alone.
    topo.cut_routes("c1-2", &[]).unwrap();
    topo.restore_routes("c1-0", &[]).unwrap();
    topo.wait_routes_cut("c1-2", &names(&["c1-0", "c1-1"]), T)
        .await
        .unwrap();
    topo.wait_routes_connected(POOL, T).await.unwrap();
    let between = topo.route_connections("c1-0", "c1-1") + topo.route_connections("c1-1", "c1-0");
    assert!(between >= POOL, "c1-0–c1-1: {between} connections proxied");

    // A name that is not a peer is refused by name.
    let err = topo.cut_routes("c1-2", &names(&["c2-0"])).unwrap_err();
    assert!(err.to_string().contains("not a cluster peer"), "{err}");

    // The scenario steps reach the cut through the Deployment trait.
    let peers = Deployment::route_link(&topo, "c1-2", &[], false).unwrap();
    assert_eq!(peers, names(&["c1-0", "c1-1"]));
    topo.wait_routes_connected(POOL, T).await.unwrap();
    topo.wait_meta_leader(T).await.unwrap();
}

#[tokio::test]
async fn without_route_proxies_routes_are_direct_and_cannot_be_cut() {
    let topo = Topology::start(TopologySpec::cluster(2)).await.unwrap();
    let cfg = std::fs::read_to_string(topo.server("c1-0").unwrap().config_path()).unwrap();
    assert!(!cfg.contains("advertise"), "{cfg}");
    let err = topo.cut_routes("c1-0", &[]).unwrap_err();
    assert!(err.to_string().contains("route_proxies is off"), "{err}");
}
