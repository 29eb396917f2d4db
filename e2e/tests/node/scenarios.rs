//! The scenarios whose topology is NatsClusters on the node backend (issue #15): each runs first
//! on the local backend, then on a node with the chart installed, its NatsClusters fitted to the
//! node (`sim::node::fit`), its controller faults on the chart's pods and its server faults
//! signals to the pods' containers. Each must pass on both; the test prints the per-step times
//! side by side (`sim::scenario::side_by_side`).

use std::time::Instant;

/// Runs `name` locally, then on the node; both reports must pass and the host be restored.
async fn on_both_backends(name: &str) {
    if let Some(why) = e2e::on_node::unavailable() {
        eprintln!("SKIPPED: the node cannot run here: {why}");
        return;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let t = Instant::now();
    let mut say = |line: &str| eprintln!("{line}");
    let run = e2e::on_node::scenario(name, dir.path(), true, &mut say)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let local = run.local.as_ref().expect("the local run");
    eprint!("{}", local.summary());
    eprint!("{}", run.node.summary());
    eprint!("{}", sim::scenario::side_by_side(local, &run.node));
    eprintln!(
        "figure: both runs and the node in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert!(
        local.passed,
        "{name} on the local backend: {:#?}",
        local.failures
    );
    assert_eq!(run.node.backend, "node");
    assert!(
        run.node.passed,
        "{name} on the node: {:#?}",
        run.node.failures
    );
    assert!(
        run.host_left.is_empty(),
        "the host differs from its baseline after down: {:#?}",
        run.host_left
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scenario_rolling_restart_passes_on_the_node_as_locally() {
    on_both_backends("rolling-restart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scenario_replace_server_passes_on_the_node_as_locally() {
    on_both_backends("replace-server").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scenario_replace_server_held_passes_on_the_node_as_locally() {
    on_both_backends("replace-server-held").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scenario_leader_kill_rollout_passes_on_the_node_as_locally() {
    on_both_backends("leader-kill-rollout").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scenario_rollout_faults_passes_on_the_node_as_locally() {
    on_both_backends("rollout-faults").await;
}
