//! Live: every fault the sim can inject, on a 3-server cluster with an R3 stream.

use std::time::Duration;

use async_nats::jetstream;
use sim::server::ProcessState;
use sim::testkit::publish_acked;
use sim::{Topology, TopologySpec};

const T: Duration = Duration::from_secs(30);

async fn cluster_with_stream() -> (Topology, jetstream::Context) {
    let topo = Topology::start(TopologySpec::cluster(3)).await.unwrap();
    let js = jetstream::new(topo.connect().await.unwrap());
    js.create_stream(jetstream::stream::Config {
        name: "S".into(),
        subjects: vec!["s.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .unwrap();
    topo.wait_stream_current("S", T).await.unwrap();
    (topo, js)
}

async fn publish(js: &jetstream::Context, n: usize) {
    for i in 0..n {
        publish_acked(js, "s.x", format!("{i}").into(), T).await;
    }
}

async fn messages(js: &jetstream::Context) -> u64 {
    js.get_stream("S")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .state
        .messages
}

fn pid_alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; reaped processes do not.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[tokio::test]
async fn kill9_then_restart_on_the_same_store_keeps_the_data() {
    let (mut topo, js) = cluster_with_stream().await;
    publish(&js, 10).await;
    let leader = topo.wait_stream_leader("S", T).await.unwrap();
    let pid = topo.server(&leader).unwrap().pid().unwrap();
    topo.server_mut(&leader).unwrap().kill9().unwrap();
    assert!(!pid_alive(pid));
    let new_leader = topo.wait_stream_leader("S", T).await.unwrap();
    assert_ne!(new_leader, leader);
    topo.server_mut(&leader).unwrap().start().await.unwrap();
    topo.wait_meta_leader(T).await.unwrap();
    topo.wait_stream_current("S", T).await.unwrap();
    // The restarted server still holds its copy (it rejoined from its own store).
    let jsz = topo.monitor(&leader, "/jsz").await.unwrap();
    assert_eq!(jsz["messages"].as_u64(), Some(10), "{jsz}");
    assert_eq!(messages(&js).await, 10);
}

#[tokio::test]
async fn sigterm_stops_cleanly_and_wipe_store_loses_the_replica_data() {
    let (mut topo, js) = cluster_with_stream().await;
    publish(&js, 5).await;
    let s = topo.server_mut("c1-2").unwrap();
    s.sigterm(T).await.unwrap();
    assert_eq!(s.state(), ProcessState::Stopped);
    let store = s.store_dir().unwrap().to_path_buf();
    assert!(store.exists());
    s.wipe_store().unwrap();
    assert!(!store.exists());
    s.start().await.unwrap();
    // The wiped server comes back empty and catches up from the others.
    topo.wait_meta_leader(T).await.unwrap();
    topo.wait_stream_current("S", T).await.unwrap();
    sim::wait::poll("c1-2 catches up", T, || async {
        let jsz = topo.monitor("c1-2", "/jsz").await?;
        Ok((jsz["messages"].as_u64() == Some(5)).then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn lame_duck_moves_leadership_away_and_exits() {
    let (mut topo, _js) = cluster_with_stream().await;
    let leader = topo.wait_stream_leader("S", T).await.unwrap();
    topo.server_mut(&leader).unwrap().lame_duck().unwrap();
    // Leadership leaves the lame duck before it exits.
    let next = sim::wait::poll("leadership leaves the lame duck", T, || async {
        Ok(topo.stream_leader("S").await?.filter(|l| *l != leader))
    })
    .await
    .unwrap();
    assert_ne!(next, leader);
    topo.server_mut(&leader)
        .unwrap()
        .wait_exit(Duration::from_secs(60))
        .await
        .unwrap();
}

#[tokio::test]
async fn sigstop_freezes_and_sigcont_thaws() {
    let (mut topo, _js) = cluster_with_stream().await;
    let url = topo.server("c1-1").unwrap().monitor_url();
    topo.server_mut("c1-1").unwrap().pause().unwrap();
    assert_eq!(topo.server("c1-1").unwrap().state(), ProcessState::Paused);
    let http = reqwest::Client::new();
    let frozen = http
        .get(format!("{url}/healthz"))
        .timeout(Duration::from_millis(500))
        .send()
        .await;
    assert!(frozen.is_err(), "a stopped process answered");
    topo.server_mut("c1-1").unwrap().resume().unwrap();
    topo.wait_healthz(T).await.unwrap();
    topo.wait_meta_leader(T).await.unwrap();
}

#[tokio::test]
async fn config_edit_and_reload_is_applied() {
    let (mut topo, _js) = cluster_with_stream().await;
    let before = topo.monitor("c1-0", "/varz").await.unwrap();
    let digest = before["config_digest"].as_str().unwrap().to_string();
    topo.server_mut("c1-0")
        .unwrap()
        .edit_and_reload(|c| c.extra.push_str("max_payload: 65536\n"))
        .unwrap();
    sim::wait::poll("reloaded config is live", T, || async {
        let v = topo.monitor("c1-0", "/varz").await?;
        Ok((v["max_payload"].as_u64() == Some(65536)
            && v["config_digest"].as_str() != Some(digest.as_str()))
        .then_some(()))
    })
    .await
    .unwrap();
    // The same with SIGHUP.
    topo.server_mut("c1-1")
        .unwrap()
        .config
        .extra
        .push_str("max_payload: 32768\n");
    topo.server("c1-1").unwrap().write_config().unwrap();
    topo.server_mut("c1-1").unwrap().sighup().unwrap();
    sim::wait::poll("SIGHUP reload is live", T, || async {
        let v = topo.monitor("c1-1", "/varz").await?;
        Ok((v["max_payload"].as_u64() == Some(32768)).then_some(()))
    })
    .await
    .unwrap();
}
