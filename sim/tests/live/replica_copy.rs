//! Live: one replica's own copy of a stream, read on a standalone nats-server started on a copy
//! of the stopped server's store (`Topology::read_replica_copy`). An intact replica holds every
//! acknowledged message; a replica whose block was cut while it was down shows the cut, whatever
//! the stream's leader still serves.

use std::time::Duration;

use async_nats::jetstream;
use sim::testkit::publish_acked;
use sim::{Topology, TopologySpec};

const T: Duration = Duration::from_secs(30);
const N: u64 = 40;

/// Three servers, an R3 stream S holding messages `0`..`N` (payload: the number).
async fn stream_of(n: u64) -> (Topology, jetstream::Context) {
    let topo = Topology::start(TopologySpec::cluster(3).with_sync_interval("c1", "always"))
        .await
        .expect("topology");
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
    (topo, js)
}

async fn follower(topo: &Topology) -> String {
    let leader = topo.wait_stream_leader("S", T).await.expect("leader");
    ["c1-0", "c1-1", "c1-2"]
        .into_iter()
        .find(|s| *s != leader)
        .expect("a follower")
        .to_string()
}

#[tokio::test]
async fn an_intact_replica_copy_holds_every_message() {
    let (mut topo, _js) = stream_of(N).await;
    let f = follower(&topo).await;
    topo.server_mut(&f)
        .expect("server")
        .sigterm(T)
        .await
        .expect("stop");
    let copy = topo
        .read_replica_copy(&f, "S", None, T)
        .await
        .expect("read the copy");
    assert!(copy.has_stream, "{f}'s copy holds S");
    assert_eq!(
        (copy.messages, copy.first_seq, copy.last_seq),
        (N, 1, N),
        "{f}"
    );
    let payloads: Vec<String> = copy
        .held
        .values()
        .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
        .collect();
    let want: Vec<String> = (0..N).map(|i| i.to_string()).collect();
    assert_eq!(payloads, want);
    topo.server_mut(&f)
        .expect("server")
        .start()
        .await
        .expect("restart");
    topo.wait_stream_current("S", T)
        .await
        .expect("the replica rejoined");
}

#[tokio::test]
async fn a_cut_replica_copy_shows_the_cut_the_leader_does_not() {
    let (mut topo, js) = stream_of(N).await;
    let f = follower(&topo).await;
    topo.server_mut(&f)
        .expect("server")
        .sigterm(T)
        .await
        .expect("stop");
    let damage = topo
        .corrupt(&f, "**/streams/S/msgs/*.blk", faultfs::Corruption::Truncate)
        .expect("corrupt");
    assert!(!damage.is_empty(), "a block was cut");
    let copy = topo
        .read_replica_copy(&f, "S", None, T)
        .await
        .expect("read the copy");
    eprintln!(
        "{f}'s copy after the cut: {} messages, {}..{}",
        copy.messages, copy.first_seq, copy.last_seq
    );
    assert!(
        copy.messages < N,
        "the copy is {f}'s own bytes, cut in half: {copy:?}"
    );
    let served = js
        .get_stream("S")
        .await
        .expect("stream")
        .info()
        .await
        .expect("info")
        .state
        .messages;
    assert_eq!(served, N, "the leader still serves every message");
}

/// The `read_replicas` step in a scenario: a 3-server cluster, an R3 stream under 50 msg/s for
/// 4 s, then each replica's own copy read. Every replica holds every acknowledged message at its
/// acknowledged sequence, and the report carries one row per replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_replicas_step_reports_each_replica_against_the_ledger() {
    use sim::backend::LocalBackend;
    use sim::scenario::{self, Scenario};
    let s = Scenario::from_yaml(
        std::path::Path::new("read-replicas.yaml"),
        r#"
name: read-replicas
description: each replica's own copy of an R3 stream, read after the traffic
topology: { servers: 3, sync_interval: { c1: always } }
workload:
  streams:
    - { name: R, subjects: ["r.>"], replicas: 3 }
  publishers:
    - { name: r, stream: R, subject: r.new, rate: 50, duration: 4s, ack_timeout: 2s, give_up_after: 10s }
steps:
  - { at: 6s, action: read_replicas, stream: R, timeout: 30s }
"#,
    )
    .expect("scenario");
    let mut progress = |l: &str| println!("{l}");
    let r = scenario::run(&s, &LocalBackend, &mut progress)
        .await
        .expect("run");
    print!("{}", r.summary());
    assert!(r.passed, "{}", r.summary());
    let acknowledged = r.publishers[0].figures.acknowledged;
    assert!(acknowledged > 0, "{}", r.summary());
    let servers: Vec<&str> = r.replicas.iter().map(|x| x.server.as_str()).collect();
    assert_eq!(servers, ["c1-0", "c1-1", "c1-2"], "{}", r.summary());
    for x in &r.replicas {
        assert!(x.has_stream, "{}", x.describe());
        assert_eq!(x.messages, acknowledged, "{}", x.describe());
        assert!(
            x.missing.is_empty() && x.differing.is_empty(),
            "{}",
            x.describe()
        );
    }
    assert!(r.summary().contains("replica R c1-1: "), "{}", r.summary());
}
