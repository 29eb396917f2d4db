//! Live: the filesystem fault layer under real nats-servers. A coordinated power loss of an R3
//! stream's three servers loses acknowledged messages under nats-server's default
//! `sync_interval` (2m) and none under `always`; a replica's block file damaged while it is down.
//! Where FUSE is not available (no /dev/fuse, not root) each test prints why and returns.

use std::time::Duration;

use async_nats::jetstream;
use sim::testkit::publish_acked;
use sim::wait::poll;
use sim::{Topology, TopologySpec};

const T: Duration = Duration::from_secs(30);
const SERVERS: [&str; 3] = ["c1-0", "c1-1", "c1-2"];

fn skipped(test: &str) -> bool {
    match faultfs::available() {
        Ok(()) => false,
        Err(e) => {
            eprintln!("{test}: skipped: {e}");
            true
        }
    }
}

/// Three servers on the layer syncing as `sync` says, an R3 stream S holding `n` acknowledged
/// messages.
async fn stream_on_the_layer(sync: &str, n: usize) -> Topology {
    let mut spec = TopologySpec::cluster(3).with_sync_interval("c1", sync);
    for s in SERVERS {
        spec = spec.with_fault_layer(s);
    }
    let topo = Topology::start(spec).await.expect("topology");
    let js = jetstream::new(topo.connect().await.expect("connect"));
    js.create_stream(jetstream::stream::Config {
        name: "S".into(),
        subjects: vec!["s.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .expect("stream");
    for i in 0..n {
        publish_acked(&js, "s.x", format!("{i}").into(), T).await;
    }
    topo.wait_stream_current("S", T).await.expect("current");
    topo
}

/// The messages stream S holds once the cluster is back, or 0 when the stream itself is gone
/// (its creation was lost with the meta group's unsynced log).
async fn messages_after_restart(topo: &mut Topology) -> u64 {
    for s in SERVERS {
        topo.server_mut(s)
            .expect("server")
            .start()
            .await
            .expect("restart");
    }
    topo.wait_meta_leader(T).await.expect("meta leader");
    let js = jetstream::new(topo.connect().await.expect("connect"));
    poll(
        "stream S answering, or answering that it is gone",
        T,
        || {
            let js = js.clone();
            async move {
                match js.get_stream("S").await {
                    Ok(mut s) => match s.info().await {
                        Ok(i) => Ok(Some(i.state.messages)),
                        Err(_) => Ok(None),
                    },
                    Err(e) if e.to_string().contains("not found") => Ok(Some(0)),
                    Err(_) => Ok(None),
                }
            }
        },
    )
    .await
    .expect("stream state")
}

#[tokio::test]
async fn a_power_loss_loses_acknowledged_writes_under_the_default_sync_interval() {
    if skipped("a_power_loss_loses_acknowledged_writes_under_the_default_sync_interval") {
        return;
    }
    let mut topo = stream_on_the_layer("2m", 50).await;
    let names: Vec<String> = SERVERS.iter().map(|s| s.to_string()).collect();
    let lost = topo.lose_unsynced(&names).expect("power loss");
    assert!(
        lost.iter().all(|(_, l)| l.bytes > 0),
        "every server had unsynced writes to lose: {lost:?}"
    );
    let kept = messages_after_restart(&mut topo).await;
    eprintln!("sync_interval 2m: 50 acknowledged, {kept} kept after the power loss ({lost:?})");
    assert!(kept < 50, "the fault did not bite: all 50 kept");
}

#[tokio::test]
async fn a_power_loss_keeps_every_acknowledged_write_under_sync_always() {
    if skipped("a_power_loss_keeps_every_acknowledged_write_under_sync_always") {
        return;
    }
    let mut topo = stream_on_the_layer("always", 50).await;
    let names: Vec<String> = SERVERS.iter().map(|s| s.to_string()).collect();
    let lost = topo.lose_unsynced(&names).expect("power loss");
    let kept = messages_after_restart(&mut topo).await;
    eprintln!("sync_interval always: 50 acknowledged, {kept} kept after the power loss ({lost:?})");
    assert_eq!(kept, 50);
}

#[tokio::test]
async fn a_replica_damaged_while_down_is_damaged_on_disk() {
    if skipped("a_replica_damaged_while_down_is_damaged_on_disk") {
        return;
    }
    let mut topo = stream_on_the_layer("always", 20).await;
    topo.server_mut("c1-2")
        .expect("server")
        .kill9()
        .expect("kill");
    let damage = topo
        .corrupt(
            "c1-2",
            "**/streams/S/msgs/*.blk",
            faultfs::Corruption::Truncate,
        )
        .expect("corrupt");
    assert!(
        !damage.is_empty() && damage[0].at == damage[0].len_before / 2,
        "{damage:?}"
    );
    let durable = topo
        .server("c1-2")
        .expect("server")
        .dir()
        .join("store-durable");
    let len = std::fs::metadata(durable.join(&damage[0].path))
        .expect("block")
        .len();
    assert_eq!(len, damage[0].at, "the cut reached what is durable");
    // A running server's store is not damaged.
    assert!(
        topo.corrupt("c1-0", "**/*.blk", faultfs::Corruption::Bitflip)
            .is_err()
    );
    topo.server_mut("c1-2")
        .expect("server")
        .start()
        .await
        .expect("restart");
    topo.wait_healthz(T).await.expect("healthz");
}

#[tokio::test]
async fn a_store_on_the_layer_is_wiped_and_the_server_starts_empty() {
    if skipped("a_store_on_the_layer_is_wiped_and_the_server_starts_empty") {
        return;
    }
    let mut topo = stream_on_the_layer("always", 5).await;
    topo.server_mut("c1-1")
        .expect("server")
        .kill9()
        .expect("kill");
    topo.wipe_store("c1-1").expect("wipe");
    let store = topo
        .server("c1-1")
        .expect("server")
        .store_dir()
        .expect("store")
        .to_path_buf();
    assert_eq!(
        std::fs::read_dir(&store).expect("store").count(),
        0,
        "nothing left"
    );
    topo.server_mut("c1-1")
        .expect("server")
        .start()
        .await
        .expect("restart");
    topo.wait_stream_current("S", T)
        .await
        .expect("the wiped replica caught up");
}

#[tokio::test]
async fn a_loss_is_refused_for_a_store_not_on_the_layer() {
    // No FUSE needed: nothing is mounted, and the step says why it cannot act.
    let mut topo = Topology::start(TopologySpec::cluster(1))
        .await
        .expect("topology");
    let err = topo.lose_unsynced(&["c1-0".to_string()]).unwrap_err();
    assert!(err.to_string().contains("not on the fault layer"), "{err}");
    assert!(topo.fault_layer("c1-0").is_none());
}
