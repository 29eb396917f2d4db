//! Live: a 3-server JetStream cluster boots, elects a meta leader with all peers, serves a stream.

use std::time::Duration;

use sim::{Topology, TopologySpec};

#[tokio::test]
async fn three_server_cluster_boots_and_leads_a_stream() {
    let topo = Topology::start(TopologySpec::cluster(3)).await.unwrap();
    let leader = topo
        .wait_meta_leader(Duration::from_secs(20))
        .await
        .unwrap();
    assert!(topo.server_names().contains(&leader), "{leader}");
    topo.wait_healthz(Duration::from_secs(10)).await.unwrap();

    let client = topo.connect().await.unwrap();
    let js = async_nats::jetstream::new(client);
    js.create_stream(async_nats::jetstream::stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .unwrap();
    let sl = topo
        .wait_stream_current("ORDERS", Duration::from_secs(20))
        .await
        .unwrap();
    assert!(topo.server_names().contains(&sl));
    let pids: Vec<u32> = topo.servers().iter().map(|s| s.pid().unwrap()).collect();
    drop(topo);
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} survived drop"
        );
    }
}

#[test]
fn a_panicking_test_still_kills_its_servers() {
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let topo = Topology::start(TopologySpec::cluster(2)).await.unwrap();
            let pids: Vec<u32> = topo.servers().iter().map(|s| s.pid().unwrap()).collect();
            tx.send(pids).unwrap();
            panic!("test body fails while the topology is up");
        })
    })
    .join();
    assert!(outcome.is_err(), "the thread was meant to panic");
    let pids = rx.recv().unwrap();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false);
        assert!(!alive, "pid {pid} survived the panic");
    }
}

#[tokio::test]
async fn every_pinned_version_boots_a_cluster() {
    for version in sim::install::VERSIONS {
        let topo = Topology::start(TopologySpec::cluster(3).with_version(version))
            .await
            .unwrap();
        let varz = topo.monitor("c1-0", "/varz").await.unwrap();
        assert_eq!(varz["version"].as_str(), Some(*version), "{varz}");
    }
}
