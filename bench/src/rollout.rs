//! A rolling restart of 3 servers under 200 msg/s: the time per server step the cluster
//! controller takes (scenarios/rolling-restart.yaml, its report's rollout steps) against the same
//! lame-duck restarts issued by hand on a 3-server sim cluster under the same workload (the
//! floor): lame duck signalled, exit awaited, started again, and the next step only once every
//! server answers /healthz, the meta group has a leader seeing every peer current and the R3
//! stream's replicas are current. Both run the scenario's workload (its stream, publisher and
//! consumers), and on both it sits on the meta leader's server, which both restart last: its
//! connection made there and its stream's and consumers' leaders moved there, so one lame-duck
//! grace and one round of leader transfers a run, both at the last step, and the ratio is the
//! controller's steps and gates, not where a client or a leader happened to sit. Both are read
//! the same way: from the first lame duck to the last server up again, divided by the servers
//! restarted (the gates between steps included).

use std::time::{Duration, Instant};

use async_nats::jetstream;
use sim::backend::LocalBackend;
use sim::ledger::Ledger;
use sim::scenario::{self, Home, RolloutStep, Scenario};
use sim::traffic::{Group, consumer_leader, lead_on, spawn_consumer, spawn_publisher};
use sim::{Topology, TopologySpec};

use crate::stats;
use crate::summary::Figure;

/// What the cluster controller renders for every server (`render::LAME_DUCK_DURATION`, the
/// server's default grace period): the floor's servers lame-duck under the same settings.
const LAME_DUCK: &str = "lame_duck_duration: \"2m\"\nlame_duck_grace_period: \"10s\"\n";
const WAIT: Duration = Duration::from_secs(120);

/// One server step: when lame duck was signalled, when the server was up again (ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub lame_duck_at_ms: u64,
    pub up_at_ms: u64,
}

/// The time per server step: first lame duck to last server up, over the steps taken; `None`
/// without steps.
pub fn per_step_ms(steps: &[Step]) -> Option<f64> {
    let first = steps.iter().map(|s| s.lame_duck_at_ms).min()?;
    let last = steps.iter().map(|s| s.up_at_ms).max()?;
    Some(last.saturating_sub(first) as f64 / steps.len() as f64)
}

fn of_report(steps: &[RolloutStep]) -> Vec<Step> {
    steps
        .iter()
        .map(|s| Step {
            lame_duck_at_ms: s.lame_duck_at_ms,
            up_at_ms: s.restarted_at_ms,
        })
        .collect()
}

/// The order the controller rolls in: highest ordinal first, the meta leader last.
pub fn hand_order(mut names: Vec<String>, meta_leader: &str) -> Vec<String> {
    names.sort();
    names.reverse();
    names.sort_by_key(|n| n == meta_leader);
    names
}

/// The rolling-restart scenario with its workload on the meta leader's server, restarted last:
/// its connection there and its stream's and consumers' leaders, so one lame-duck grace and one
/// round of leader transfers a run (at the last step), as by hand below.
fn rolling_restart() -> anyhow::Result<Scenario> {
    let mut s = scenario::find(&scenario::scenarios_dir(), "rolling-restart")?;
    s.workload.home = Home::MetaLeader;
    Ok(s)
}

async fn controller_driven(s: &Scenario) -> anyhow::Result<(Vec<Step>, u64)> {
    let mut progress = |l: &str| println!("  rolling-restart {l}");
    let report = scenario::run(s, &LocalBackend, &mut progress).await?;
    let dir = crate::workspace().join("target").join("bench");
    if let Ok(out) = report.write(&dir) {
        println!("  report: {}", out.display());
    }
    anyhow::ensure!(
        report.passed,
        "the rolling-restart scenario failed: {:?}",
        report.failures
    );
    anyhow::ensure!(
        report.rollout_steps.len() == 3,
        "the rollout took {} steps, not 3",
        report.rollout_steps.len()
    );
    Ok((
        of_report(&report.rollout_steps),
        report.figures.ack_timeouts,
    ))
}

/// The scenario's workload (its one stream, publisher and consumers) on a sim cluster of 3,
/// everything on the meta leader's server as the controller's run has it: the servers stepped
/// before it hold no client and lead nothing.
async fn by_hand(s: &Scenario) -> anyhow::Result<Vec<Step>> {
    let [stream] = s.streams().try_into().map_err(|v: Vec<_>| {
        anyhow::anyhow!("rolling-restart declares {} streams, not 1", v.len())
    })?;
    let publisher = s
        .workload
        .publisher
        .clone()
        .ok_or_else(|| anyhow::anyhow!("rolling-restart declares no publisher"))?;
    let mut topo = Topology::start(TopologySpec::cluster(3).with_extra_config(LAME_DUCK)).await?;
    let meta = topo.wait_meta_leader(WAIT).await?;
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect(topo.server(&meta)?.client_url())
        .await?;
    let js = jetstream::new(client.clone());
    js.create_stream(jetstream::stream::Config {
        name: stream.name.clone(),
        subjects: stream.subjects.clone(),
        num_replicas: stream.replicas,
        ..Default::default()
    })
    .await?;
    topo.wait_stream_current(&stream.name, WAIT).await?;
    let leader = || async {
        topo.wait_stream_leader(&stream.name, WAIT)
            .await
            .map_err(|e| e.to_string())
    };
    lead_on(
        client.clone(),
        Group::Stream(&stream.name),
        &meta,
        WAIT,
        leader,
    )
    .await
    .map_err(anyhow::Error::msg)?;
    let ledger = Ledger::new();
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    for c in &s.workload.consumers {
        tasks.push(spawn_consumer(js.clone(), c.clone(), ledger.clone(), stop_rx.clone()).await?);
        let (stream, consumer) = (c.stream.as_str(), c.name.as_str());
        let leader = || consumer_leader(&js, stream, consumer);
        lead_on(
            client.clone(),
            Group::Consumer { stream, consumer },
            &meta,
            WAIT,
            leader,
        )
        .await
        .map_err(anyhow::Error::msg)?;
    }
    tasks.push(spawn_publisher(js.clone(), publisher.spec, ledger));
    // As the scenario does: ten seconds of traffic before the first step.
    let warm = Instant::now() + Duration::from_secs(10);
    sim::wait::poll("ten seconds of traffic", WAIT, || async move {
        Ok::<_, String>((Instant::now() >= warm).then_some(()))
    })
    .await?;
    let clock = Instant::now();
    let ms = |c: Instant| c.elapsed().as_millis() as u64;
    let mut steps = Vec::new();
    for name in hand_order(topo.server_names(), &meta) {
        let lame_duck_at_ms = ms(clock);
        let server = topo.server_mut(&name)?;
        server.lame_duck()?;
        server.wait_exit(Duration::from_secs(150)).await?;
        server.start().await?;
        let up_at_ms = ms(clock);
        println!(
            "  by hand: {name} lame duck to up in {:.1} s",
            (up_at_ms - lame_duck_at_ms) as f64 / 1000.0
        );
        steps.push(Step {
            lame_duck_at_ms,
            up_at_ms,
        });
        // The gate before the next step: healthy, the meta group and the stream current.
        topo.wait_healthz(WAIT).await?;
        topo.wait_meta_leader(WAIT).await?;
        topo.wait_stream_current("ORDERS", WAIT).await?;
    }
    for t in tasks {
        t.abort();
    }
    Ok(steps)
}

/// Runs of both sides in one invocation; the figure is the median of each side's.
pub const RUNS: usize = 3;

/// The median of `values` ([`stats::median`]); NaN when empty, and a run that had no steps (NaN)
/// sorts last.
fn median(values: &[f64]) -> f64 {
    stats::median(values, f64::total_cmp).unwrap_or(f64::NAN)
}

pub async fn figure() -> anyhow::Result<Figure> {
    let each = |steps: &[Step]| {
        steps
            .iter()
            .map(|s| format!("{:.1}", (s.up_at_ms - s.lame_duck_at_ms) as f64 / 1000.0))
            .collect::<Vec<_>>()
            .join("/")
    };
    let (mut values, mut floors, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    let s = rolling_restart()?;
    for run in 1..=RUNS {
        println!("  run {run} of {RUNS}");
        let (controller, ack_timeouts) = controller_driven(&s).await?;
        let hand = by_hand(&s).await?;
        let value = per_step_ms(&controller).unwrap_or(f64::NAN) / 1000.0;
        let floor = per_step_ms(&hand).unwrap_or(f64::NAN) / 1000.0;
        notes.push(format!(
            "run {run}: {value:.1} s against {floor:.1} s ({:.2}; lame duck to up {} s by the \
             controller, {} s by hand; {ack_timeouts} ack timeouts)",
            value / floor,
            each(&controller),
            each(&hand)
        ));
        values.push(value);
        floors.push(floor);
    }
    Ok(Figure {
        name: "rollout.rolling_restart_3".into(),
        what: format!(
            "cluster controller's rolling restart of 3 servers under 200 msg/s, time per server \
             step, median of {RUNS} runs"
        ),
        value: median(&values),
        unit: "s".into(),
        floor: median(&floors),
        floor_what: "the same lame-duck restarts issued by hand, same gates (median)".into(),
        goal: Some("≤ 1.2".into()),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_runs_read_as_nan() {
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn a_step_is_the_span_over_the_servers() {
        let steps = [
            Step {
                lame_duck_at_ms: 1000,
                up_at_ms: 13000,
            },
            Step {
                lame_duck_at_ms: 15000,
                up_at_ms: 28000,
            },
            Step {
                lame_duck_at_ms: 30000,
                up_at_ms: 37000,
            },
        ];
        assert_eq!(per_step_ms(&steps), Some(12000.0));
        assert_eq!(per_step_ms(&[]), None);
    }

    #[test]
    fn by_hand_rolls_the_highest_ordinal_first_and_the_meta_leader_last() {
        let names = ["c1-0", "c1-1", "c1-2"].map(String::from).to_vec();
        assert_eq!(hand_order(names.clone(), "c1-2"), ["c1-1", "c1-0", "c1-2"]);
        assert_eq!(hand_order(names, "c1-0"), ["c1-2", "c1-1", "c1-0"]);
    }
}
