//! Live: a 3-server JetStream cluster boots, elects a meta leader with all peers, serves a stream
//! whose leaders (the stream's, a consumer's) move to the server a workload names.

use std::time::Duration;

use sim::ledger::Ledger;
use sim::traffic::{ConsumerKind, ConsumerSpec, Group, consumer_leader, lead_on, spawn_consumer};
use sim::{Topology, TopologySpec};

#[tokio::test]
async fn three_server_cluster_boots_leads_a_stream_and_moves_its_leaders() {
    let topo = Topology::start(TopologySpec::cluster(3)).await.unwrap();
    let leader = topo
        .wait_meta_leader(Duration::from_secs(20))
        .await
        .unwrap();
    assert!(topo.server_names().contains(&leader), "{leader}");
    topo.wait_healthz(Duration::from_secs(10)).await.unwrap();

    let client = topo.connect().await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
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

    // The stream's and a consumer's leaders moved to a server that leads neither.
    let consumer = ConsumerSpec {
        name: "pull-1".into(),
        stream: "ORDERS".into(),
        kind: ConsumerKind::Pull,
    };
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    let task = spawn_consumer(js.clone(), consumer, Ledger::new(), stop_rx)
        .await
        .unwrap();
    let to = topo.server_names().into_iter().find(|s| *s != sl).unwrap();
    let wait = Duration::from_secs(30);
    let stream_leader = || async {
        topo.wait_stream_leader("ORDERS", wait)
            .await
            .map_err(|e| e.to_string())
    };
    lead_on(
        client.clone(),
        Group::Stream("ORDERS"),
        &to,
        wait,
        stream_leader,
    )
    .await
    .unwrap();
    assert_eq!(stream_leader().await.unwrap(), to);
    let group = Group::Consumer {
        stream: "ORDERS",
        consumer: "pull-1",
    };
    let consumer_leader = || consumer_leader(&js, "ORDERS", "pull-1");
    lead_on(client.clone(), group, &to, wait, consumer_leader)
        .await
        .unwrap();
    assert_eq!(consumer_leader().await.unwrap(), to);
    task.abort();

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
