//! Live: 2×3 superclusters (Explicit and Gossip gateways) plus a leaf with its own JetStream domain;
//! cutting and restoring gateway and leaf links.

use std::time::Duration;

use sim::{GatewayMode, Topology, TopologySpec};

const T: Duration = Duration::from_secs(60);

#[tokio::test]
async fn explicit_supercluster_with_a_leaf_domain_cuts_and_restores_links() {
    let spec = TopologySpec::supercluster(2, 3, GatewayMode::Explicit)
        .with_hub_domain("hub")
        .with_leaf("leaf1", "edge", "c1")
        .with_tags("c1", 0, &["az:a"]);
    let topo = Topology::start(spec).await.unwrap();
    assert_eq!(topo.servers().len(), 7);

    // The meta group spans both clusters; the leaf is its own domain.
    let jsz = topo.monitor("c2-1", "/jsz").await.unwrap();
    assert_eq!(
        jsz["meta_cluster"]["cluster_size"].as_u64(),
        Some(6),
        "{jsz}"
    );
    let leaf_varz = topo.monitor("leaf1", "/varz").await.unwrap();
    assert_eq!(
        leaf_varz["jetstream"]["config"]["domain"].as_str(),
        Some("edge")
    );
    let tagged = topo.monitor("c1-0", "/varz").await.unwrap();
    assert_eq!(tagged["tags"][0].as_str(), Some("az:a"), "{tagged}");
    let explicit = topo.monitor("c1-0", "/varz").await.unwrap();
    assert_eq!(
        explicit["gateway"]["reject_unknown"].as_bool(),
        Some(true),
        "{explicit}"
    );

    // A message published in c2 reaches a subscriber in c1 across the gateway.
    let c1 = async_nats::connect(topo.cluster_urls("c1")[0].as_str())
        .await
        .unwrap();
    let c2 = async_nats::connect(topo.cluster_urls("c2")[0].as_str())
        .await
        .unwrap();
    let sub = c1.subscribe("x.y").await.unwrap();
    c1.flush().await.unwrap();
    let sub = std::sync::Arc::new(tokio::sync::Mutex::new(sub));
    sim::wait::poll("interest crosses the gateway", T, || {
        let (c2, sub) = (c2.clone(), sub.clone());
        async move {
            c2.publish("x.y", "hi".into())
                .await
                .map_err(|e| e.to_string())?;
            let mut sub = sub.lock().await;
            Ok(tokio::time::timeout(
                Duration::from_millis(200),
                futures::StreamExt::next(&mut *sub),
            )
            .await
            .ok()
            .flatten())
        }
    })
    .await
    .unwrap();

    topo.cut_gateway("c1", "c2").await.unwrap();
    topo.wait_gateway_down("c1", "c2", T).await.unwrap();
    topo.wait_gateway_down("c2", "c1", T).await.unwrap();
    topo.restore_gateway("c1", "c2").await.unwrap();
    topo.wait_gateways_connected(T).await.unwrap();

    topo.cut_leaf("leaf1").await.unwrap();
    topo.wait_leaf_down("leaf1", T).await.unwrap();
    topo.restore_leaf("leaf1").await.unwrap();
    topo.wait_leafs_connected(T).await.unwrap();
}

#[tokio::test]
async fn gossip_supercluster_learns_every_cluster() {
    let topo = Topology::start(TopologySpec::supercluster(3, 2, GatewayMode::Gossip))
        .await
        .unwrap();
    // c3 only lists c1, c1 only lists c2: the full mesh comes from gossip.
    let cfg = std::fs::read_to_string(topo.server("c3-0").unwrap().config_path()).unwrap();
    assert!(!cfg.contains("name: \"c2\""), "{cfg}");
    topo.wait_gateways_connected(T).await.unwrap();
    let gz = topo.monitor("c3-0", "/gatewayz").await.unwrap();
    assert!(!gz["outbound_gateways"]["c2"].is_null(), "{gz}");
}
