//! The `sim` CLI: `list`, and `scenario` whose exit code follows the expectations.

use std::process::Command;

const SHORT: &str = r#"
name: short
description: one server, 2 s of traffic
topology: { servers: 1 }
workload:
  streams: [{ name: S, subjects: ["s.>"], replicas: 1 }]
  publisher: { stream: S, subject: s.x, rate: 50, duration: 2s }
  consumers: [{ name: c, stream: S, kind: pull }]
steps:
  - { at: 1s, action: wait_healthz }
expect: { lost: "== 0", acknowledged: "== 100" }
"#;

fn sim(
    args: &[&str],
    scenarios: &std::path::Path,
    reports: &std::path::Path,
) -> std::process::Output {
    Command::new(sim::bin_exe!("sim"))
        .args(args)
        .env("SIM_SCENARIOS", scenarios)
        .env("SIM_REPORTS", reports)
        .output()
        .unwrap()
}

#[test]
fn list_names_every_scenario_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("short.yaml"), SHORT).unwrap();
    let out = sim(&["list"], dir.path(), dir.path());
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("short") && text.contains("2 s of traffic"),
        "{text}"
    );
}

#[test]
fn a_met_expectation_passes_and_an_unmet_one_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    std::fs::write(dir.path().join("short.yaml"), SHORT).unwrap();
    std::fs::write(
        dir.path().join("impossible.yaml"),
        SHORT
            .replace("name: short", "name: impossible")
            .replace("\"== 100\"", "\"== 7\""),
    )
    .unwrap();

    let ok = sim(&["scenario", "short"], dir.path(), &reports);
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        text.contains("step 1/1 wait for healthz on every server: ok"),
        "{text}"
    );
    assert!(text.contains("PASSED"), "{text}");

    let bad = sim(&["scenario", "impossible"], dir.path(), &reports);
    let text = String::from_utf8_lossy(&bad.stdout);
    assert!(!bad.status.success(), "{text}");
    assert!(
        text.contains("expect acknowledged == 7: 100 (NOT MET)"),
        "{text}"
    );

    // One report folder per run, each with JSON and the summary.
    let runs: Vec<_> = std::fs::read_dir(&reports).unwrap().flatten().collect();
    assert_eq!(runs.len(), 2);
    for r in runs {
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(r.path().join("report.json")).unwrap())
                .unwrap();
        assert_eq!(json["figures"]["acknowledged"], 100);
        assert!(
            json["timeline"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["kind"] == "step")
        );
        assert!(r.path().join("summary.txt").exists());
    }
}

#[test]
fn an_unknown_scenario_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let out = sim(&["scenario", "nope"], dir.path(), dir.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no scenario named nope"));
}
