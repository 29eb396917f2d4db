//! The format's checks, the figures and the report, without running anything.

use super::action::default_cluster_wait;
use super::report::finish;
use super::*;
use crate::ledger::Figures;

const FULL: &str = r#"
name: demo
description: every kind of step
topology: { clusters: 2, servers: 3, gateways: explicit, leafs: [{ name: leaf1, domain: edge, hub: c1 }] }
workload:
  streams: [{ name: S, subjects: ["s.>"], replicas: 3 }]
  publisher: { stream: S, subject: s.x, rate: 100, duration: 10s, ack_timeout: 1500ms }
  consumers: [{ name: p, stream: S, kind: pull }, { name: q, stream: S, kind: push }]
steps:
  - { at: 1s, action: kill9, server: "stream-leader:S" }
  - { at: 2s, action: restart, server: last-faulted }
  - { at: 3s, action: reload, server: c1-0, append: "max_payload: 1024" }
  - { at: 4s, action: cut_gateway, a: c1, b: c2 }
  - { at: 5s, action: wait_meta_leader, timeout: 20s }
  - { at: 6s, action: apply_manifest, path: docs/stories/x.yaml }
expect: { lost: "== 0", ack_timeouts: "<= 1", leadership_changes: ">= 1" }
"#;

#[test]
fn parses_every_part_of_the_format() {
    let s = Scenario::from_yaml(Path::new("demo.yaml"), FULL).unwrap();
    assert_eq!(s.topology.to_spec().clusters.len(), 2);
    assert_eq!(s.topology.to_spec().leafs[0].domain, "edge");
    let p = s.workload.publisher.as_ref().unwrap();
    assert_eq!(p.spec.ack_timeout, Duration::from_millis(1500));
    assert_eq!(p.spec.give_up_after, Duration::from_secs(60));
    assert_eq!(s.steps.len(), 6);
    assert_eq!(
        s.steps[2].action,
        Action::Reload {
            server: "c1-0".into(),
            append: "max_payload: 1024".into()
        }
    );
    assert!(s.steps[5].action.needs_controllers());
    assert!(!s.steps[0].action.needs_controllers());
}

#[test]
fn unknown_fields_actions_and_figures_are_refused() {
    let bad_action = FULL.replace("action: kill9", "action: explode");
    assert!(Scenario::from_yaml(Path::new("x"), &bad_action).is_err());
    let bad_figure = FULL.replace("lost:", "misplaced:");
    assert!(Scenario::from_yaml(Path::new("x"), &bad_figure).is_err());
    let bad_rule = FULL.replace("\"<= 1\"", "\"about 1\"");
    assert!(Scenario::from_yaml(Path::new("x"), &bad_rule).is_err());
    let out_of_order = FULL.replace("at: 2s", "at: 9s");
    assert!(Scenario::from_yaml(Path::new("x"), &out_of_order).is_err());
}

#[test]
fn rollout_steps_pair_lame_duck_and_restart_and_measure_the_gate() {
    use crate::server::events::LocalEvent::*;
    let log = vec![
        (100, "demo-0".to_string(), Started),
        (1000, "demo-2".to_string(), LameDuck),
        (2500, "demo-2".to_string(), Restarted),
        (2600, "demo-0".to_string(), Revived),
        (4000, "demo-1".to_string(), LameDuck),
        (4800, "demo-1".to_string(), Restarted),
    ];
    let steps = rollout_steps(&log);
    assert_eq!(steps.len(), 2);
    assert_eq!(
        (steps[0].server.as_str(), steps[0].step_ms, steps[0].gate_ms),
        ("demo-2", 1500, None)
    );
    assert_eq!(
        (steps[1].server.as_str(), steps[1].step_ms, steps[1].gate_ms),
        ("demo-1", 800, Some(1500))
    );
}

#[test]
fn rollout_figures_count_restarts_per_server_and_the_meta_leader_last() {
    let s = Scenario::from_yaml(
        Path::new("x"),
        "name: r\ntopology: { servers: 1 }\nworkload: {}\nexpect: { meta_leader_restarted_last: 1 }\n",
    )
    .unwrap();
    let mut r = finish(
        &s,
        "local",
        String::new(),
        std::time::Instant::now(),
        (Vec::new(), Figures::default()),
        vec![],
        vec![],
    );
    r.server_restarts = [("demo-0", 2), ("demo-1", 1), ("demo-2", 1)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    r.server_restart_order = vec!["demo-2".into(), "demo-0".into(), "demo-1".into()];
    r.meta_leader_at_start = Some("demo-0".into());
    assert_eq!(rollout_figure(&r, "rollout_restarts_max"), Some(1));
    assert_eq!(rollout_figure(&r, "rollout_restarts_min"), Some(1));
    assert_eq!(rollout_figure(&r, "meta_leader_restarted_last"), Some(0));
    r.server_restart_order.push("demo-0".into());
    assert_eq!(rollout_figure(&r, "rollout_restarts_max"), Some(2));
    assert_eq!(rollout_figure(&r, "meta_leader_restarted_last"), Some(1));
    assert_eq!(rollout_figure(&r, "lost"), None);
}

#[test]
fn rules_compare() {
    assert!(Rule::parse("0").unwrap().holds(0));
    assert!(!Rule::parse("== 0").unwrap().holds(1));
    assert!(Rule::parse("<= 1").unwrap().holds(1));
    assert!(!Rule::parse("< 1").unwrap().holds(1));
    assert!(Rule::parse(">= 1").unwrap().holds(2));
    assert!(!Rule::parse("> 2").unwrap().holds(2));
}

#[test]
fn the_shipped_scenarios_parse() {
    let all = list(&scenarios_dir()).unwrap();
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "baseline",
        "leader-crash",
        "lame-duck",
        "revocation-recovery",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
}

#[test]
fn a_nats_cluster_topology_and_controller_steps_parse() {
    let text = r#"
name: nc
topology: { nats_clusters: [docs/stories/01-quickstart/01-natscluster.yaml] }
controllers: [jetstream]
workload: {}
steps:
  - { at: 0s, action: apply_nats_cluster, path: scenarios/manifests/x.yaml }
  - { at: 1s, action: wait_condition, object: NatsCluster/nats/demo, condition: Settled }
  - { at: 2s, action: annotate, object: NatsCluster/demo, annotation: "a/b=c" }
  - { at: 3s, action: restart_controller, controller: jetstream }
"#;
    let s = Scenario::from_yaml(Path::new("x"), text).unwrap();
    assert!(s.needs_host());
    assert_eq!(
        s.steps[0].action,
        Action::ApplyNatsCluster {
            path: "scenarios/manifests/x.yaml".into(),
            timeout: default_cluster_wait()
        }
    );
    assert!(s.steps.iter().all(|s| s.action.needs_controllers()));
    // Both kinds of topology at once, neither, or an unknown controller are refused.
    let both = text.replace("{ nats_clusters:", "{ servers: 3, nats_clusters:");
    assert!(Scenario::from_yaml(Path::new("x"), &both).is_err());
    let neither = text.replace(
        "{ nats_clusters: [docs/stories/01-quickstart/01-natscluster.yaml] }",
        "{ servers: 0 }",
    );
    assert!(Scenario::from_yaml(Path::new("x"), &neither).is_err());
    let unknown = text.replace("controllers: [jetstream]", "controllers: [nonesuch]");
    assert!(Scenario::from_yaml(Path::new("x"), &unknown).is_err());
    let plain = Scenario::from_yaml(
        Path::new("x"),
        "name: p\ntopology: { servers: 1 }\nworkload: {}\n",
    )
    .unwrap();
    assert!(!plain.needs_host());
}

#[test]
fn an_undrained_run_counts_its_missing_messages_as_undrained_never_lost() {
    let f = Figures {
        acknowledged: 10,
        lost: 3,
        lost_by_consumer: [("a".to_string(), 3)].into_iter().collect(),
        ..Figures::default()
    };
    let drained = undrained_unless(true, f.clone());
    assert_eq!((drained.lost, drained.undrained), (3, 0));
    let not = undrained_unless(false, f);
    assert_eq!((not.lost, not.undrained), (0, 3));
    assert!(not.lost_by_consumer.is_empty());
    assert_eq!(figure(&not, "undrained"), Some(3));
}

#[test]
fn timing_figures_are_figures_of_the_ledger() {
    for t in TIMING_FIGURES {
        assert!(figure(&Figures::default(), t).is_some(), "{t}");
    }
    assert!(!TIMING_FIGURES.contains(&"lost"));
}

const AUTH: &str = r#"
name: auth
topology:
  clusters: 2
  servers: 3
  gateways: explicit
  trust: auth
  auth_plane: [scenarios/manifests/auth/01-trust-roots.yaml]
clients:
  - { name: alice, creds: Secret/alice-creds, subject: orders.new, rate: 20, server: c1-0 }
steps:
  - { at: 1s, id: gone, action: delete, object: NatsUser/alice }
  - { at: 1s, action: wait_gone, object: NatsUser/alice }
  - { at: 1s, action: wipe_status, object: NatsAccount/orders }
  - { at: 1s, action: wait_disconnected, client: alice, timeout: 5s, figure: { name: kick_ms, since: gone } }
  - { at: 1s, action: expect_refused, client: alice }
  - { at: 1s, action: expect_jwt_revokes, object: NatsAccount/orders, client: alice }
  - { at: 1s, action: wait_account_absent, object: NatsAccount/gone, server: c1-2, timeout: 30s }
expect: { kick_ms: "<= 5000" }
"#;

#[test]
fn an_auth_plane_with_clients_and_the_steps_on_objects_parses_without_a_workload() {
    let s = Scenario::from_yaml(Path::new("auth.yaml"), AUTH).unwrap();
    assert_eq!(s.topology.trust, Some(TrustDecl::Auth));
    assert!(s.workload.is_empty());
    assert!(s.needs_host());
    assert_eq!(s.clients[0].key, "user.creds");
    assert_eq!(s.clients[0].server.as_deref(), Some("c1-0"));
    assert_eq!(s.steps[0].id.as_deref(), Some("gone"));
    assert_eq!(
        s.steps[3].figure,
        Some(StepFigure {
            name: "kick_ms".into(),
            since: "gone".into()
        })
    );
    assert_eq!(
        s.steps[3].action,
        Action::WaitDisconnected {
            client: "alice".into(),
            timeout: Duration::from_secs(5)
        }
    );
    assert!(s.steps[6].action.needs_controllers());
    assert!(!s.steps[4].action.needs_controllers());
}

#[test]
fn the_auth_format_refuses_what_it_cannot_run() {
    let bad = |from: &str, to: &str| {
        let text = AUTH.replace(from, to);
        assert_ne!(text, AUTH, "{from:?} not in the scenario");
        Scenario::from_yaml(Path::new("x"), &text).unwrap_err()
    };
    // A figure since a step no earlier step is, or under a ledger figure's name.
    bad("since: gone", "since: later");
    bad("name: kick_ms", "name: lost");
    // A step id used twice; a step naming a client not declared; a client declared twice.
    bad("action: wait_gone,", "id: gone, action: wait_gone,");
    bad(
        "action: expect_refused, client: alice",
        "action: expect_refused, client: bob",
    );
    bad(
        "clients:\n",
        "clients:\n  - { name: alice, creds: Secret/x, subject: a, rate: 1 }\n",
    );
    // trust: auth without manifests, or on NatsClusters; an auth plane without trust: auth;
    // JetStream traffic with no user to connect as.
    bad(
        "  auth_plane: [scenarios/manifests/auth/01-trust-roots.yaml]\n",
        "",
    );
    bad("  trust: auth\n", "");
    bad(
        "clients:",
        "workload: { streams: [{ name: S, subjects: [s] }] }\nclients:",
    );
    // An expectation on a figure no step records.
    bad("expect: { kick_ms:", "expect: { kicked_ms:");
}

#[test]
fn a_step_figure_runs_from_the_completion_of_its_since_step_to_what_the_step_observed() {
    let s = Scenario::from_yaml(Path::new("auth.yaml"), AUTH).unwrap();
    let outcome =
        |index: usize, at_ms: u64, took_ms: u64, observed: Option<u64>, ok: bool| StepOutcome {
            index,
            at_ms,
            action: String::new(),
            target: None,
            ok,
            error: None,
            took_ms,
            id: s.steps[index].id.clone(),
            observed_at_ms: observed,
            value: None,
        };
    let mut out: Vec<StepOutcome> = (0..s.steps.len())
        .map(|i| outcome(i, 1000, 0, None, true))
        .collect();
    // The delete done at 1200 ms; the server closed the client at 1650, seen by the wait at 1700.
    out[0] = outcome(0, 1000, 200, None, true);
    out[3] = outcome(3, 1500, 200, Some(1650), true);
    assert_eq!(
        step_figures(&s.steps, &out).get("kick_ms"),
        Some(&450),
        "the moment observed, not the wait's end"
    );
    // A moment before the delete was done has no time since it.
    out[3] = outcome(3, 1500, 200, Some(1100), true);
    assert!(step_figures(&s.steps, &out).is_empty());
    // Without an observed moment, to the step's completion.
    out[3] = outcome(3, 1500, 200, None, true);
    assert_eq!(step_figures(&s.steps, &out).get("kick_ms"), Some(&500));
    // A failed step records nothing, nor does a step measured since a failed one.
    out[3] = outcome(3, 1500, 200, None, false);
    assert!(step_figures(&s.steps, &out).is_empty());
    out[3] = outcome(3, 1500, 200, None, true);
    out[0] = outcome(0, 1000, 200, None, false);
    assert!(step_figures(&s.steps, &out).is_empty());
}

#[test]
fn step_figures_are_timings_judged_only_where_timings_are() {
    let s = Scenario::from_yaml(Path::new("auth.yaml"), AUTH).unwrap();
    let report = |kick: Option<u64>| {
        let mut r = finish(
            &s,
            "local",
            String::new(),
            std::time::Instant::now(),
            (Vec::new(), Figures::default()),
            vec![],
            vec![],
        );
        r.step_figures = kick
            .map(|k| ("kick_ms".to_string(), k))
            .into_iter()
            .collect();
        r
    };
    let mut slow = report(Some(9000));
    report::judge_step_figures(&s, &mut slow, false);
    assert!(slow.failures.is_empty());
    assert!(!slow.expectations[0].ok && !slow.expectations[0].judged);
    let mut judged = report(Some(9000));
    report::judge_step_figures(&s, &mut judged, true);
    assert_eq!(judged.failures.len(), 1, "{:?}", judged.failures);
    let mut missing = report(None);
    report::judge_step_figures(&s, &mut missing, true);
    assert!(
        missing.failures[0].contains("not recorded"),
        "{:?}",
        missing.failures
    );
    let mut fast = report(Some(800));
    report::judge_step_figures(&s, &mut fast, true);
    assert!(fast.failures.is_empty() && fast.expectations[0].ok);
    assert!(
        fast.summary()
            .contains("figures from steps (ms): kick_ms 800")
    );
}

#[cfg(feature = "kube")]
#[test]
fn the_shipped_auth_plane_names_its_trust_operator_controller_user_and_accounts() {
    let docs: Vec<serde_json::Value> = ["01-trust-roots", "02-system-users", "03-accounts"]
        .iter()
        .flat_map(|f| {
            crate::testkit::story_docs(
                workspace_root().join(format!("scenarios/manifests/auth/{f}.yaml")),
            )
        })
        .collect();
    let plane = auth_plane::read_plane(&docs).unwrap();
    assert_eq!(plane.trust.to_string(), "NatsOperatorTrust/nats/demo");
    assert_eq!(plane.operator.to_string(), "NatsOperator/nats/demo");
    assert_eq!(
        plane.controller_creds,
        (
            "auth-controller-creds".to_string(),
            "user.creds".to_string()
        )
    );
    let accounts: Vec<String> = plane.accounts.iter().map(|a| a.to_string()).collect();
    assert_eq!(
        accounts,
        [
            "NatsSystemAccount/nats/system",
            "NatsAccount/nats/orders",
            "NatsAccount/nats/gone"
        ]
    );
    assert!(plane.users.iter().any(|u| u.name == "alice"));
    // Each document is an object of the API's types.
    for d in &docs {
        let kind = d["kind"].as_str().unwrap();
        let decoded = match kind {
            "NatsOperator" => {
                serde_json::from_value::<nats_api::auth::NatsOperator>(d.clone()).map(|_| ())
            }
            "NatsSystemAccount" => {
                serde_json::from_value::<nats_api::auth::NatsSystemAccount>(d.clone()).map(|_| ())
            }
            "NatsAccount" => {
                serde_json::from_value::<nats_api::auth::NatsAccount>(d.clone()).map(|_| ())
            }
            "NatsUser" => serde_json::from_value::<nats_api::auth::NatsUser>(d.clone()).map(|_| ()),
            "NatsOperatorTrust" => {
                serde_json::from_value::<nats_api::nats::NatsOperatorTrust>(d.clone()).map(|_| ())
            }
            other => panic!("unexpected kind {other}"),
        };
        decoded.unwrap_or_else(|e| panic!("{kind} {}: {e}", d["metadata"]["name"]));
    }
    // Without a trust, or without the auth-controller user, there is nothing to boot.
    let no_user: Vec<_> = docs
        .iter()
        .filter(|d| d["spec"]["preset"] != "auth-controller")
        .cloned()
        .collect();
    assert!(auth_plane::read_plane(&no_user).is_err());
    let no_trust: Vec<_> = docs
        .iter()
        .filter(|d| d["kind"] != "NatsOperatorTrust")
        .cloned()
        .collect();
    assert!(auth_plane::read_plane(&no_trust).is_err());
}

#[cfg(feature = "kube")]
#[test]
fn an_account_jwt_revokes_a_user_issued_at_or_before_its_revocation() {
    use nats_claims::{AccountClaims, KeyKind, NKey};
    let account = NKey::generate(KeyKind::Account);
    let user = NKey::generate(KeyKind::User).public_key();
    let mut claims = AccountClaims::new(account.public_key());
    claims.nats.revocations.insert(user.clone(), 1_000);
    let jwt = claims.encode(&account).unwrap();
    let obj = serde_json::json!({ "status": { "jwt": jwt } });
    assert!(auth_steps::jwt_revokes(&obj, &user, 1_000).is_ok());
    assert!(auth_steps::jwt_revokes(&obj, &user, 999).is_ok());
    let later = auth_steps::jwt_revokes(&obj, &user, 1_001).unwrap_err();
    assert!(later.contains("only up to 1000"), "{later}");
    let other = NKey::generate(KeyKind::User).public_key();
    assert!(auth_steps::jwt_revokes(&obj, &other, 1).is_err());
    let wiped = serde_json::json!({ "status": {} });
    assert_eq!(
        auth_steps::jwt_revokes(&wiped, &user, 1).unwrap_err(),
        "no status.jwt"
    );
}

#[rstest::rstest]
#[case::none(&[], 0)]
#[case::one_at_a_time(&[(1000, 2500), (4000, 4800), (6000, 7000)], 1)]
#[case::back_to_back(&[(1000, 2500), (2500, 3000)], 2)]
#[case::two_at_once(&[(1000, 5000), (2000, 3000), (6000, 7000)], 2)]
#[case::three_at_once(&[(1000, 5000), (2000, 6000), (3000, 4000)], 3)]
fn restarting_at_once_is_the_most_rollout_steps_under_way_together(
    #[case] spans: &[(u64, u64)],
    #[case] want: u64,
) {
    let steps: Vec<RolloutStep> = spans
        .iter()
        .enumerate()
        .map(|(i, (lame_duck, restarted))| RolloutStep {
            server: format!("demo-{i}"),
            lame_duck_at_ms: *lame_duck,
            restarted_at_ms: *restarted,
            step_ms: restarted - lame_duck,
            gate_ms: None,
        })
        .collect();
    assert_eq!(super::report::restarting_at_once(&steps), want);
}

#[test]
fn replicas_name_a_running_controller_two_or_three_times_and_kill_leader_needs_them() {
    let scenario = |extra: &str| {
        Scenario::from_yaml(
            Path::new("x"),
            &format!(
                "name: r\ntopology: {{ servers: 1 }}\nworkload: {{}}\ncontrollers: [cluster]\n{extra}"
            ),
        )
    };
    scenario(
        "replicas: { cluster: 2 }\nsteps: [{ at: 1s, action: kill_leader, controller: cluster }]\n",
    )
    .expect("two replicas and a kill");
    for (extra, want) in [
        (
            "replicas: { jetstream: 2 }\n",
            "replicas.jetstream: no controller",
        ),
        (
            "replicas: { cluster: 1 }\n",
            "replicas.cluster: 1 replicas; 2 or 3",
        ),
        ("replicas: { cluster: 4 }\n", "replicas.cluster: 4 replicas"),
        (
            "steps: [{ at: 1s, action: kill_leader, controller: cluster }]\n",
            "kill_leader: controller \"cluster\" is not in replicas:",
        ),
        (
            "replicas: { cluster: 2 }\nsteps: [{ at: 1s, action: restart_controller, controller: cluster }]\n",
            "use kill_leader",
        ),
    ] {
        let err = scenario(extra).expect_err(extra).to_string();
        assert!(err.contains(want), "{extra}: {err}");
    }
}

#[cfg(feature = "kube")]
#[test]
fn the_controllers_a_scenario_may_name_are_the_ones_the_host_runs() {
    let host: Vec<&str> = crate::control_plane::controllers().into_keys().collect();
    assert_eq!(host, CONTROLLER_NAMES);
}
