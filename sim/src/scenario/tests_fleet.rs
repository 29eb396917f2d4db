//! The format of a workload of many streams over several accounts, the steps through the
//! system account and the ratios: what parses, what it expands to, and every refusal naming
//! its field and reason.

use std::path::Path;

use super::*;

const FLEET: &str = r#"
name: fleet
topology:
  clusters: 2
  servers: 3
  gateways: explicit
  trust: generated
  accounts: [A, B]
  server_tags: { c1: ["region:c1"], c2: ["region:c2"] }
workload:
  streams:
    - { name: "S_{i}", count: 3, account: A, subjects: ["s.{i}.>"], replicas: 3, cluster: c1 }
    - { name: T, account: B, subjects: ["t.>"], replicas: 3, cluster: c1 }
  key_values: [{ bucket: CONF, account: A, replicas: 3, cluster: c1 }]
  object_stores: [{ bucket: BLOBS, account: B, replicas: 3, cluster: c1 }]
  publishers:
    - { name: pa, account: A, stream: S_0, subject: s.0.new, rate: 200, duration: 60s, consumers: [pull, push] }
    - { name: pb, account: B, stream: T, subject: t.new, rate: 200, duration: 60s, consumers: [pull] }
steps:
  - { at: 1s, id: start, action: wait_groups_settled, cluster: c1 }
  - { at: 1s, action: move_by_hand, from: c1, to: ["region:c2"], figure: { name: hand_ms, since: start } }
  - { at: 1s, action: wait_groups_settled, cluster: c2, figure: { name: all_ms, since: start } }
  - { at: 1s, action: stop_publishers }
ratios: { hand_over_all: [hand_ms, all_ms] }
expect: { lost: "== 0", ack_timeouts_max_per_publisher: "<= 2" }
"#;

#[test]
fn a_fleet_expands_its_templates_and_names_each_publishers_consumers() {
    let s = Scenario::from_yaml(Path::new("fleet.yaml"), FLEET).unwrap();
    let streams = s.streams();
    let names: Vec<&str> = streams.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["S_0", "S_1", "S_2", "T"]);
    assert_eq!(streams[2].subjects, ["s.2.>"]);
    assert_eq!(streams[2].account.as_deref(), Some("A"));
    assert_eq!(s.stream_names().len(), 4);
    let consumers: Vec<String> = s.workload.publishers[0]
        .consumer_specs()
        .into_iter()
        .map(|c| format!("{}@{}", c.name, c.stream))
        .collect();
    assert_eq!(consumers, ["pa-pull@S_0", "pa-push@S_0"]);
    assert_eq!(s.account_of(&None).as_deref(), Some("A"));
    assert_eq!(s.topology.account_names(), ["A", "B"]);
    assert!(matches!(s.steps[3].action, Action::StopPublishers {}));
    assert!(!s.steps.iter().any(|st| st.action.needs_controllers()));
}

#[test]
fn the_fleet_format_refuses_what_it_cannot_run_naming_the_field_and_why() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "accounts: [A, B]",
            "accounts: [A, A]",
            "topology.accounts: A is listed twice",
        ),
        (
            "  trust: generated\n",
            "",
            "topology.accounts: the sim signs accounts",
        ),
        (
            "count: 3,",
            "count: 0,",
            "workload.streams S_{i}: count 0 declares no stream",
        ),
        (
            "\"S_{i}\", count",
            "\"S\", count",
            "workload.streams S: count 3 needs {i} in the name",
        ),
        (
            "[\"s.{i}.>\"]",
            "[\"s.>\"]",
            "needs {i} in every subject, or its copies' subjects overlap (s.>)",
        ),
        (
            "name: T, account: B",
            "name: T, account: Z",
            "workload.streams T: account Z is not one of topology.accounts",
        ),
        (
            "bucket: CONF, account: A",
            "bucket: CONF, account: Z",
            "workload.key_values CONF: account Z",
        ),
        (
            "bucket: BLOBS, account: B",
            "bucket: BLOBS, account: Z",
            "workload.object_stores BLOBS: account Z",
        ),
        (
            "{ name: T,",
            "{ name: S_1,",
            "workload: stream S_1 is declared twice",
        ),
        (
            "{ name: T,",
            "{ name: KV_CONF,",
            "workload: stream KV_CONF is declared twice",
        ),
        (
            "  publishers:\n",
            "  publisher: { stream: T, subject: t.x, rate: 1, duration: 1s }\n  publishers:\n",
            "publisher and publishers exclude each other",
        ),
        (
            "  publishers:\n",
            "  consumers: [{ name: c, stream: T, kind: pull }]\n  publishers:\n",
            "workload.consumers: with publishers",
        ),
        (
            "name: pb,",
            "name: pa,",
            "workload.publishers pa: the name is used twice",
        ),
        (
            "stream: T, subject",
            "stream: U, subject",
            "workload.publishers pb: no stream U in the workload",
        ),
        (
            "name: pb, account: B",
            "name: pb, account: A",
            "workload.publishers pb: stream T is in account B, the publisher connects as A",
        ),
        (
            "subject: t.new, rate: 200",
            "subject: t.new, rate: 0",
            "workload.publishers pb: rate 0 publishes nothing",
        ),
        ("to: [\"region:c2\"]", "to: []", "to names no server tag"),
        (
            "hand_over_all: [hand_ms, all_ms]",
            "hand_over_all: [hand_ms, nope_ms]",
            "ratios.hand_over_all: nope_ms is no step's figure",
        ),
        ("hand_over_all:", "lost:", "ratios.lost: the name is taken"),
    ];
    for (from, to, why) in cases {
        let text = FLEET.replace(from, to);
        assert_ne!(text, FLEET, "{from:?} not in the scenario");
        let Err(err) = Scenario::from_yaml(Path::new("fleet.yaml"), &text) else {
            panic!("{from:?} -> {to:?} parsed; it should be refused: {why}");
        };
        let err = err.to_string();
        assert!(
            err.contains(why),
            "{from:?} -> {to:?}: {err} should say {why:?}"
        );
    }
}

#[test]
fn steps_through_the_system_account_need_a_topology_that_has_one() {
    let text = FLEET
        .replace("  trust: generated\n  accounts: [A, B]\n", "")
        .replace(", account: A", "")
        .replace(", account: B", "");
    // Config accounts: the system user is sys/sys.
    Scenario::from_yaml(Path::new("fleet.yaml"), &text).unwrap();
    let plane = text.replace(
        "  gateways: explicit\n",
        "  gateways: explicit\n  trust: auth\n  auth_plane: [x.yaml]\n",
    );
    let err = Scenario::from_yaml(Path::new("fleet.yaml"), &plane)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("under trust: auth the JetStream workload"),
        "{err}"
    );
    let no_publishers: String = FLEET
        .lines()
        .filter(|l| !l.starts_with("  publishers:") && !l.starts_with("    - { name: p"))
        .map(|l| format!("{l}\n"))
        .collect();
    let err = Scenario::from_yaml(Path::new("fleet.yaml"), &no_publishers)
        .unwrap_err()
        .to_string();
    assert!(err.contains("the workload has no publishers"), "{err}");
}

#[test]
fn a_ratio_is_one_recorded_figure_over_another() {
    let declared = [("r".to_string(), ["a".to_string(), "b".to_string()])].into();
    let figs = [("a".to_string(), 300), ("b".to_string(), 200)].into();
    assert_eq!(report::ratios(&declared, &figs)["r"], 1.5);
    let zero = [("a".to_string(), 300), ("b".to_string(), 0)].into();
    assert!(report::ratios(&declared, &zero).is_empty());
    assert!(report::ratios(&declared, &Default::default()).is_empty());
}

#[test]
fn a_workload_connects_to_any_server_unless_it_names_the_meta_leader() {
    let with = |connect: &str| {
        format!(
            "name: c\ntopology: {{ clusters: 1, servers: 3 }}\nworkload:\n  streams: [{{ name: S, \
             subjects: [s], replicas: 3 }}]\n{connect}steps: []\n"
        )
    };
    let any = Scenario::from_yaml(Path::new("c.yaml"), &with("")).unwrap();
    assert_eq!(any.workload.home, Home::Any);
    let leader = Scenario::from_yaml(Path::new("c.yaml"), &with("  home: meta_leader\n")).unwrap();
    assert_eq!(leader.workload.home, Home::MetaLeader);
    let err = Scenario::from_yaml(Path::new("c.yaml"), &with("  home: leader\n"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("home"), "{err}");
}
