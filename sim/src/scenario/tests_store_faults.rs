//! The store faults as the scenario language writes them: `fault_layer`, `sync_interval`,
//! `lose_unsynced`, `corrupt` and `audit_stream`, and the scenarios they are refused in.

use std::path::Path;

use rstest::rstest;

use super::*;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::from_yaml(Path::new("x"), text)
}

#[test]
fn store_faults_parse_and_reach_the_topology() {
    let s = parse(
        r#"
name: x
topology: { clusters: 2, servers: 3, gateways: explicit, sync_interval: { c1: 2m, c2: always }, fault_layer: [all] }
steps:
  - { at: 1s, action: lose_unsynced, servers: [c1-0, stream-leader:S] }
  - { at: 2s, action: corrupt, server: c1-1, file-glob: "**/msgs/*.blk", kind: bitflip }
  - { at: 3s, action: corrupt, server: c1-2, file_glob: "**/*.idx", kind: truncate }
  - { at: 4s, action: audit_stream, stream: S, count: lost_s }
expect:
  lost_s: "== 0"
"#,
    )
    .expect("parses");
    let spec = s.topology.to_spec();
    assert_eq!(spec.fault_layer.len(), 6, "all: every hub server");
    assert!(spec.fault_layer.contains("c2-2"));
    assert_eq!(spec.sync_interval["c1"], "2m");
    assert!(matches!(
        &s.steps[1].action,
        Action::Corrupt { file_glob, kind: CorruptKind::Bitflip, .. } if file_glob == "**/msgs/*.blk"
    ));
    assert!(s.is_count_figure("lost_s"), "an audit's count is a figure");
    assert_eq!(
        s.steps[0].action.describe(),
        "power loss of c1-0, stream-leader:S: unsynced writes dropped"
    );
}

#[rstest]
#[case::loss_without_layer(
    "a loss needs stores on the layer",
    "topology: { servers: 3 }\nsteps:\n  - { at: 1s, action: lose_unsynced, servers: [c1-0] }\n",
    "lose_unsynced needs topology.fault_layer"
)]
#[case::layer_under_nats_clusters(
    "a NatsCluster's servers are the controller's",
    "topology: { nats_clusters: [a.yaml], fault_layer: [all] }\n",
    "need a sim topology"
)]
#[case::corrupt_under_nats_clusters(
    "nor are their stores damaged by the sim",
    "topology: { nats_clusters: [a.yaml] }\nsteps:\n  - { at: 1s, action: corrupt, server: demo-0, file_glob: x, kind: truncate }\n",
    "need a sim topology"
)]
fn store_faults_are_refused_where_they_cannot_act(
    #[case] what: &str,
    #[case] body: &str,
    #[case] message: &str,
) {
    let err = parse(&format!("name: x\n{body}")).expect_err(what);
    assert!(err.to_string().contains(message), "{what}: {err}");
}

#[test]
fn an_unknown_corruption_kind_is_refused() {
    let err = parse(
        "name: x\ntopology: { servers: 1 }\nsteps:\n  - { at: 1s, action: corrupt, server: c1-0, file_glob: x, kind: zero }\n",
    )
    .expect_err("zero is no kind");
    assert!(err.to_string().contains("zero"), "{err}");
}

#[test]
fn a_power_loss_kills_every_server_it_names_on_the_page() {
    use super::timeline::{ServerChange, server_events_of_steps};
    let s = parse(
        "name: x\ntopology: { servers: 3, fault_layer: [all] }\nsteps:\n  - { at: 1s, action: lose_unsynced, servers: [c1-0, c1-2] }\n",
    )
    .expect("parses");
    let outcome = StepOutcome {
        index: 1,
        at_ms: 1_000,
        action: s.steps[0].action.describe(),
        target: Some("c1-0 lost 10 B in 1 files".into()),
        ok: true,
        error: None,
        took_ms: 20,
        id: None,
        observed_at_ms: None,
        value: None,
    };
    let got: Vec<(u64, String, ServerChange)> = server_events_of_steps(&s.steps, &[outcome])
        .into_iter()
        .map(|e| (e.at_ms, e.server, e.change))
        .collect();
    assert_eq!(
        got,
        vec![
            (1_020, "c1-0".to_string(), ServerChange::Killed),
            (1_020, "c1-2".to_string(), ServerChange::Killed),
        ]
    );
}
