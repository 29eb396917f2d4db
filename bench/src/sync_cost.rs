//! What `sync_interval: always` costs: publish throughput and p99 ack latency of an R3 file
//! stream on a 3-server cluster whose servers fsync every write (the NatsCluster default,
//! docs/durability.md) against the same on a cluster left at the server's default `2m` (the
//! floor). Both clusters run at once in the same run and are measured in alternating windows,
//! so a machine loaded by other work weighs on both alike. The publisher keeps a fixed number
//! of publishes in flight, each awaited for its ack; a window's throughput is its acks over its
//! length, its latencies are each publish's send to ack.

use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use sim::{Topology, TopologySpec};

use crate::stats::ms;
use crate::summary::Figure;

const WAIT: Duration = Duration::from_secs(60);
/// Publishes in flight at once.
const IN_FLIGHT: usize = 32;
const PAYLOAD: usize = 256;
const WINDOW: Duration = Duration::from_secs(5);
const ROUNDS: usize = 3;

/// The `q` quantile (0..=1) of `samples`, nearest rank; `None` when there are none.
fn quantile(samples: &mut [Duration], q: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    Some(samples[rank - 1])
}

/// One cluster under test: its topology and a JetStream context on it.
struct Side {
    _topo: Topology,
    js: jetstream::Context,
    acks: usize,
    busy: Duration,
    latencies: Vec<Duration>,
}

async fn side(interval: &str) -> anyhow::Result<Side> {
    let topo = Topology::start(TopologySpec::cluster(3).with_sync_interval("c1", interval)).await?;
    topo.wait_meta_leader(WAIT).await?;
    let js = jetstream::new(topo.connect().await?);
    js.create_stream(jetstream::stream::Config {
        name: "SYNC".into(),
        subjects: vec!["sync.>".into()],
        num_replicas: 3,
        storage: jetstream::stream::StorageType::File,
        ..Default::default()
    })
    .await?;
    topo.wait_stream_current("SYNC", WAIT).await?;
    Ok(Side {
        _topo: topo,
        js,
        acks: 0,
        busy: Duration::ZERO,
        latencies: Vec::new(),
    })
}

/// Publishes for `window` with [`IN_FLIGHT`] publishes outstanding; adds to the side's tallies.
async fn window(s: &mut Side, window: Duration) -> anyhow::Result<()> {
    let payload = bytes_of(PAYLOAD);
    let started = Instant::now();
    let mut pending = FuturesUnordered::new();
    let publish = |js: jetstream::Context, payload: Vec<u8>| async move {
        let sent = Instant::now();
        js.publish("sync.m", payload.into()).await?.await?;
        anyhow::Ok(sent.elapsed())
    };
    for _ in 0..IN_FLIGHT {
        pending.push(publish(s.js.clone(), payload.clone()));
    }
    while let Some(done) = pending.next().await {
        s.latencies.push(done?);
        s.acks += 1;
        if started.elapsed() < window {
            pending.push(publish(s.js.clone(), payload.clone()));
        }
    }
    s.busy += started.elapsed();
    Ok(())
}

fn bytes_of(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

fn rate(s: &Side) -> f64 {
    s.acks as f64 / s.busy.as_secs_f64().max(f64::EPSILON)
}

pub async fn figure() -> anyhow::Result<Figure> {
    let mut always = side("always").await?;
    let mut lazy = side("2m").await?;
    // A first short window each, not counted: connections and the stream's first blocks.
    for s in [&mut always, &mut lazy] {
        window(s, Duration::from_secs(1)).await?;
        s.acks = 0;
        s.busy = Duration::ZERO;
        s.latencies.clear();
    }
    for _ in 0..ROUNDS {
        window(&mut always, WINDOW).await?;
        window(&mut lazy, WINDOW).await?;
    }
    let p99 = |s: &mut Side| quantile(&mut s.latencies, 0.99).map_or(f64::NAN, ms);
    let p50 = |s: &mut Side| quantile(&mut s.latencies, 0.50).map_or(f64::NAN, ms);
    let (rate_always, rate_lazy) = (rate(&always), rate(&lazy));
    Ok(Figure {
        name: "jetstream.sync_cost".into(),
        what: format!(
            "publish throughput of an R3 file stream, 3 servers, sync_interval always ({IN_FLIGHT} in flight, {PAYLOAD} B)"
        ),
        value: rate_always,
        unit: "msg/s".into(),
        floor: rate_lazy,
        floor_what: "the same on a cluster at sync_interval 2m, same run, alternating windows"
            .into(),
        goal: None,
        notes: vec![
            format!(
                "p99 ack {:.1} ms always, {:.1} ms 2m",
                p99(&mut always),
                p99(&mut lazy)
            ),
            format!(
                "p50 ack {:.1} ms always, {:.1} ms 2m",
                p50(&mut always),
                p50(&mut lazy)
            ),
            format!(
                "{} and {} acks over {ROUNDS}×{} s",
                always.acks,
                lazy.acks,
                WINDOW.as_secs()
            ),
        ],
    })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case(&[], 0.99, None)]
    #[case(&[5], 0.99, Some(5))]
    #[case(&[3, 1, 2], 0.5, Some(2))]
    #[case(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.99, Some(10))]
    #[case(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9, Some(9))]
    fn quantile_is_the_nearest_rank(#[case] ms: &[u64], #[case] q: f64, #[case] want: Option<u64>) {
        let mut s: Vec<Duration> = ms.iter().map(|m| Duration::from_millis(*m)).collect();
        assert_eq!(quantile(&mut s, q), want.map(Duration::from_millis));
    }
}
