//! Planning and rendering: server configs planned and rendered per second for a 30-server
//! supercluster (story 09's three NatsClusters, ten servers each: gateways, route TLS, JetStream,
//! server tags). The floor is the same plans written out as JSON: the data with no rules.

use std::time::{Duration, Instant};

use cluster_controller::plan::{ClusterInputs, KubernetesLayout, plan_servers};
use cluster_controller::render::{ServerPlan, render};
use nats_api::cluster::NatsCluster;

use crate::summary::Figure;

/// Story 09's NatsClusters, ten servers each.
fn supercluster() -> anyhow::Result<Vec<NatsCluster>> {
    let mut clusters: Vec<NatsCluster> =
        sim::testkit::story_objects("docs/stories/09-acceptance/02-clusters.yaml", "NatsCluster");
    anyhow::ensure!(!clusters.is_empty(), "story 09 holds no NatsCluster");
    for c in &mut clusters {
        c.spec.replicas = 10;
    }
    Ok(clusters)
}

fn plan_all(clusters: &[NatsCluster]) -> anyhow::Result<Vec<ServerPlan>> {
    let mut plans = Vec::new();
    for c in clusters {
        let name = c.metadata.name.clone().unwrap_or_default();
        let layout = KubernetesLayout {
            name: name.clone(),
            namespace: c.metadata.namespace.clone().unwrap_or_default(),
            cluster_domain: "cluster.local".into(),
        };
        let inputs = ClusterInputs {
            name: &name,
            spec: &c.spec,
            trust: None,
            account_preloads: vec![],
            leaf_remotes: vec![],
        };
        plans.extend(plan_servers(&inputs, &layout)?);
    }
    Ok(plans)
}

/// Runs `work` until `at_least` has passed; the time per call.
fn per_call(at_least: Duration, mut work: impl FnMut() -> usize) -> (Duration, usize) {
    let started = Instant::now();
    let (mut calls, mut bytes) = (0u32, 0);
    while started.elapsed() < at_least {
        bytes += work();
        calls += 1;
    }
    (started.elapsed() / calls.max(1), bytes)
}

pub fn figure() -> anyhow::Result<Figure> {
    let clusters = supercluster()?;
    let plans = plan_all(&clusters)?;
    let servers = plans.len();
    let window = Duration::from_secs(3);
    let (ours, _) = per_call(window, || {
        plan_all(&clusters)
            .map(|p| p.iter().map(|s| render(s).len()).sum())
            .unwrap_or(0)
    });
    let (floor, _) = per_call(window, || {
        plans
            .iter()
            .map(|p| serde_json::to_string(p).map(|s| s.len()).unwrap_or(0))
            .sum()
    });
    let per_config = |d: Duration| d.as_secs_f64() * 1e6 / servers as f64;
    Ok(Figure {
        name: "render.supercluster_30".into(),
        what: format!("one server's config planned and rendered, {servers}-server supercluster"),
        value: per_config(ours),
        unit: "µs".into(),
        floor: per_config(floor),
        floor_what: "its plan written as JSON".into(),
        goal: None,
        notes: vec![format!(
            "{:.0} configs/s",
            servers as f64 / ours.as_secs_f64().max(1e-9)
        )],
    })
}
