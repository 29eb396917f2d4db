//! The scenarios the issues require, run end to end on the local backend (35 s to eleven
//! minutes). The nightly tier runs every one; the gate runs `baseline`, `leader-crash`,
//! `controller-restart` and the short variants `replace-server-held`, `evacuation-short` and
//! `power-loss-short` (the ci profile's default-filter, .config/nextest.toml): the scenario group
//! runs one at a time, and all of them made the gate's longest chain (docs/testing.md, "Where the
//! gate's time goes"). They are what the issues' figures come from. The baseline's run also checks
//! its report.html in headless Chromium (skipped, saying why, without one).

use sim::backend::LocalBackend;
use sim::scenario::{self, Report};

async fn run(name: &str) -> Report {
    run_written(name).await.0
}

/// Runs scenario `name`; its report and the folder it was written to.
async fn run_written(name: &str) -> (Report, std::path::PathBuf) {
    controller_kit::start::init_tracing(controller_kit::start::LogFormat::Text);
    let s = scenario::find(&scenario::scenarios_dir(), name).unwrap();
    let mut progress = |l: &str| println!("{l}");
    let report = scenario::run(&s, &LocalBackend, &mut progress)
        .await
        .unwrap();
    print!("{}", report.summary());
    // `target/tmp` of this run's build, from the test's executable (`target/debug/deps/…`): not
    // `env!("CARGO_TARGET_TMPDIR")` alone, which is an earlier clone's if the build was kept.
    let tmp = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.join("tmp")))
        .unwrap_or_else(|| env!("CARGO_TARGET_TMPDIR").into());
    let dir = tmp.join("sim-reports");
    let out = report.write(&dir).unwrap();
    println!("report: {}", out.display());
    (report, out)
}

/// The browser check of a run's report.html: headless Chromium renders it without a console
/// error or a failed load, the DOM it renders to holds the chart's lanes (one per server) and
/// the verdict's rows, and a screenshot is taken (beside the report). Skips, saying why, where
/// there is no chromium.
async fn check_page_in_browser(report: &Report, dir: &std::path::Path) {
    use sim::testkit::browser;
    if let Err(why) = browser::chromium() {
        println!("SKIP the report page's browser check: {why}");
        return;
    }
    let page = dir.join("report.html").canonicalize().unwrap();
    let dom = browser::dump_dom(&page, dir).await.unwrap();
    assert!(
        browser::page_errors(&dom.stderr).is_empty(),
        "{:?}",
        browser::page_errors(&dom.stderr)
    );
    let mut lanes = vec![
        "latency".to_string(),
        "throughput".into(),
        "marks".into(),
        "meta-leader".into(),
        "time-axis".into(),
    ];
    let servers: std::collections::BTreeSet<&str> =
        report.servers.iter().map(|e| e.server.as_str()).collect();
    assert_eq!(servers.len(), 3, "{:?}", report.servers);
    lanes.extend(servers.iter().map(|s| format!("server:{s}")));
    lanes.push("stream-leader:ORDERS".into());
    for lane in &lanes {
        assert!(
            dom.stdout.contains(&format!(r#"data-lane="{lane}""#)),
            "the rendered DOM has no lane {lane}"
        );
    }
    assert_eq!(
        dom.stdout.matches(r#"<tr class="expectation">"#).count(),
        report.expectations.len()
    );
    let png = dir.join("report.png");
    browser::screenshot(&page, &png, (1320, 1100), dir)
        .await
        .unwrap();
    println!(
        "the report page rendered with {} lanes; screenshot {} ({} bytes)",
        dom.stdout.matches(r#"class="lane""#).count(),
        png.display(),
        std::fs::metadata(&png).unwrap().len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_baseline_30s() {
    let (r, dir) = run_written("baseline").await;
    check_page_in_browser(&r, &dir).await;
    assert!(r.passed, "{}", r.summary());
    assert_eq!(r.figures.lost, 0);
    assert_eq!(r.figures.duplicated, 0);
    assert!(r.figures.acknowledged >= 5_900, "{}", r.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_leader_crash_30s() {
    let r = run("leader-crash").await;
    assert!(r.passed, "{}", r.summary());
    assert_eq!(r.figures.lost, 0);
    assert_eq!(r.figures.duplicated, 0);
    assert!(r.figures.leadership_changes >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_lame_duck_30s() {
    let r = run("lame-duck").await;
    assert!(r.passed, "{}", r.summary());
    // A timing: reported (the summary above), judged only where SIM_TIMINGS=judge.
    println!("publish-ack timeouts: {}", r.figures.ack_timeouts);
}

/// Controller steps run against the host: a manifest applied, a condition waited for, an
/// annotation, the JetStream controller restarted under traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_controller_restart() {
    let r = run("controller-restart").await;
    assert!(r.passed, "{}", r.summary());
    assert_eq!(r.controller_restarts.get("jetstream"), Some(&1));
    assert!(r.steps.iter().all(|s| s.ok), "{:?}", r.steps);
    assert_eq!(
        r.steps[0].target.as_deref(),
        Some("NatsConnection/nats/local, NatsStream/nats/audit")
    );
}

/// Issue #6's rolling restart through the cluster controller on the local server lifecycle: every
/// server restarted exactly once, highest ordinal first, the meta leader last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_rolling_restart() {
    let r = run("rolling-restart").await;
    assert!(r.passed, "{}", r.summary());
    let once: Vec<u32> = r.server_restarts.values().copied().collect();
    assert_eq!(once, vec![1, 1, 1], "{:?}", r.server_restarts);
    assert_eq!(r.server_restart_order.len(), 3, "{}", r.summary());
    assert_eq!(
        r.server_restart_order.last(),
        r.meta_leader_at_start.as_ref(),
        "{}",
        r.summary()
    );
}

/// Issue #14's leader-elected rollout: the cluster controller as two replicas, the leader killed
/// once the first server is rolled; the standby takes the Lease and finishes the rollout, still
/// one server at a time (`rollout_restarting_max == 1`), each once, the meta leader last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_leader_kill_rollout() {
    let r = run("leader-kill-rollout").await;
    assert!(r.passed, "{}", r.summary());
    let kill = r
        .steps
        .iter()
        .find(|s| s.action.starts_with("kill the leading replica"))
        .expect("the kill step");
    assert!(
        kill.target
            .as_deref()
            .is_some_and(|t| t.starts_with("cluster-")),
        "{kill:?}"
    );
    // Mid-rollout: at least one server was rolled after the kill, by the other replica.
    let after = r
        .rollout_steps
        .iter()
        .filter(|s| s.lame_duck_at_ms > kill.at_ms)
        .count();
    assert!(
        after >= 1,
        "no server rolled after the kill: {}",
        r.summary()
    );
    let once: Vec<u32> = r.server_restarts.values().copied().collect();
    assert_eq!(once, vec![1, 1, 1], "{:?}", r.server_restarts);
}

/// Issue #6's rollout faults: a not-yet-updated server killed and the controller restarted
/// mid-rollout; every server is rolled exactly once and the killed one also came back once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_rollout_faults() {
    let r = run("rollout-faults").await;
    assert!(r.passed, "{}", r.summary());
    let mut order = r.server_restart_order.clone();
    order.sort();
    assert_eq!(order, vec!["demo-0", "demo-1", "demo-2"], "{}", r.summary());
    assert_eq!(r.controller_restarts.get("cluster"), Some(&1));
    // demo-0: started again after the kill, then rolled.
    assert_eq!(r.server_restarts.get("demo-0"), Some(&2), "{}", r.summary());
    assert_eq!(r.server_restarts.get("demo-1"), Some(&1), "{}", r.summary());
    assert_eq!(r.server_restarts.get("demo-2"), Some(&1), "{}", r.summary());
}

/// The short server replacement: `replace-server-held` under traffic, evacuated, removed,
/// deleted and recreated until the recreated server is ready and the gate holds on the removal
/// tombstone (about two minutes): no server restarted, nothing acknowledged lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_replace_server_held() {
    replaced_restarting_nothing(&run("replace-server-held").await);
}

/// A replacement's report: passed, every step done, no server restarted.
fn replaced_restarting_nothing(r: &Report) {
    assert!(r.passed, "{}", r.summary());
    assert!(r.steps.iter().all(|s| s.ok), "{:?}", r.steps);
    assert!(
        r.server_restarts.values().all(|n| *n == 0),
        "a replacement restarts nothing: {}",
        r.summary()
    );
}

/// Nightly tier. Issue #6's server replacement: `replace-server` under traffic, through the
/// five-minute removal tombstone (the longest test here, about six minutes): the gate held until
/// the meta leader listed the server again, no server restarted, nothing acknowledged lost or
/// doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_replace_server() {
    replaced_restarting_nothing(&run("replace-server").await);
}

/// Issue #17's revocation recovery, two clusters of three under trust the auth controller signs:
/// a user deleted while c1-2 is paused is held naming c1-2, its connections (one on c1-2) closed
/// and the user released once c1-2 returns; a wiped account status
/// recovers its revocations from the servers and the revoked creds are refused by all six; an
/// account deleted while c1-2 is stopped is gone from it after its return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_revocation_recovery() {
    let r = run("revocation-recovery").await;
    assert!(r.passed, "{}", r.summary());
    assert!(r.steps.iter().all(|s| s.ok), "{:?}", r.steps);
    // Timings: reported (the summary above), judged only where SIM_TIMINGS=judge.
    for f in [
        "alice_closed_after_delete_ms",
        "kick_after_delete_ms",
        "recovery_ms",
        "account_gone_after_return_ms",
    ] {
        assert!(r.step_figures.contains_key(f), "{f}: {}", r.summary());
    }
    for client in &r.clients {
        assert!(client.published > 0, "{}", r.summary());
        assert!(client.closed_at_ms.is_some(), "{}", r.summary());
    }
}

/// Issue #16's evacuation (story 11), short: both R3 streams leave c1 for the servers tagged
/// region:c2 under 200 msg/s, one move at a time (each MoveDone before the next MoveStarted),
/// nothing acknowledged lost or stored twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_evacuation_short() {
    let r = run("evacuation-short").await;
    assert!(r.passed, "{}", r.summary());
    let moves: Vec<(&str, &str)> = r
        .controller_events
        .iter()
        .filter(|e| e.object == "NatsClusterEvacuation/leave-c1")
        .filter(|e| e.reason.starts_with("Move"))
        .map(|e| (e.reason.as_str(), e.note.as_str()))
        .collect();
    let reasons: Vec<&str> = moves.iter().map(|(r, _)| *r).collect();
    assert_eq!(
        reasons,
        vec!["MoveStarted", "MoveDone", "MoveStarted", "MoveDone"],
        "{moves:?}"
    );
    for stream in ["AUDIT", "ORDERS"] {
        assert!(
            moves
                .iter()
                .any(|(_, n)| n.contains(&format!("stream {stream} "))),
            "{stream} moved: {moves:?}"
        );
    }
}

/// Issue #16's evacuation in full (nightly only: about four and a half minutes quiet): 51 R3
/// groups over three accounts the sim signs (a key-value bucket and an object store among them)
/// leave c1 for region:c2 under three publishers, one move at a time; the same moves by hand back (the
/// floor) in the same run; every publisher's ledger clean, the timings and their ratio reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_evacuation() {
    let r = run("evacuation").await;
    assert!(r.passed, "{}", r.summary());
    assert_eq!(r.publishers.len(), 3, "{}", r.summary());
    for p in &r.publishers {
        assert!(p.figures.acknowledged > 0, "{}", r.summary());
        assert_eq!(
            (
                p.figures.lost,
                p.figures.duplicated,
                p.figures.unacknowledged
            ),
            (0, 0, 0),
            "{}",
            r.summary()
        );
    }
    for f in ["evacuation_ms", "floor_ms"] {
        assert!(r.step_figures.contains_key(f), "{f}: {}", r.summary());
    }
    assert!(
        r.ratios.contains_key("evacuation_over_floor"),
        "{}",
        r.summary()
    );
    let moves: Vec<&str> = r
        .controller_events
        .iter()
        .filter(|e| e.object == "NatsClusterEvacuation/leave-c1")
        .filter(|e| e.reason.starts_with("Move"))
        .map(|e| e.reason.as_str())
        .collect();
    for pair in moves.chunks(2) {
        assert_eq!(pair, ["MoveStarted", "MoveDone"], "{moves:?}");
    }
}

/// Issue #16's balance: a rolling restart by hand (c1-0, c1-1, then c1-2, each through lame
/// duck) leaves c1-2 leading none of six R3 streams; a NatsSystemBalancer evens the leaders to
/// within one, one move per pass (each MoveStarted seen done before the next), nothing
/// acknowledged lost or stored twice. The spreads are counted from the servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_balance() {
    let r = run("balance").await;
    assert!(r.passed, "{}", r.summary());
    let count = |figure: &str| {
        r.stream_leaders
            .iter()
            .find(|c| c.figure == figure)
            .unwrap_or_else(|| panic!("no count {figure}: {}", r.summary()))
    };
    let before = count("stream_leader_spread_before_balance");
    assert_eq!(before.leaders.get("c1-2"), Some(&0), "{}", r.summary());
    let after = count("stream_leader_spread");
    assert!(after.spread <= 1, "{}", r.summary());
    assert_eq!(after.leaders.values().sum::<u64>(), 6, "{}", r.summary());
    let moves: Vec<(&str, &str)> = r
        .controller_events
        .iter()
        .filter(|e| e.object == "NatsSystemBalancer/system")
        .filter(|e| e.reason.starts_with("Move"))
        .map(|e| (e.reason.as_str(), e.note.as_str()))
        .collect();
    assert!(!moves.is_empty(), "{}", r.summary());
    for pair in moves.chunks(2) {
        let reasons: Vec<&str> = pair.iter().map(|(r, _)| *r).collect();
        assert_eq!(reasons, vec!["MoveStarted", "MoveDone"], "{moves:?}");
    }
}

/// Issue #16's evacuation under faults: a c1 server killed mid-evacuation holds it
/// (ServersDown) with nothing counted until the server is back, then it ends Evacuated; a
/// second evacuation deleted while its first move is pending cancels that move (MoveCancelled)
/// and every stream is settled in c2 again; nothing acknowledged lost or stored twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_evacuation_faults() {
    let r = run("evacuation-faults").await;
    assert!(r.passed, "{}", r.summary());
    assert_eq!(
        r.status_figures.get("evacuation_moved_while_down"),
        Some(&0),
        "{:?}",
        r.status_figures
    );
    let reasons = |object: &str| -> Vec<&str> {
        r.controller_events
            .iter()
            .filter(|e| e.object == object && e.reason.starts_with("Move"))
            .map(|e| e.reason.as_str())
            .collect()
    };
    assert_eq!(
        reasons("NatsClusterEvacuation/leave-c1"),
        vec![
            "MoveStarted",
            "MoveDone",
            "MoveStarted",
            "MoveDone",
            "MoveStarted",
            "MoveDone",
            "MoveStarted",
            "MoveDone"
        ],
        "{:?}",
        r.controller_events
    );
    // PAYMENTS' move, done on the servers while the killed server was down, is counted once it
    // is back: its MoveDone comes after the restart step.
    let restarted_at = r
        .steps
        .iter()
        .find(|s| s.action.starts_with("restart "))
        .map(|s| s.done_at_ms())
        .expect("a restart step");
    let payments_done = r
        .controller_events
        .iter()
        .find(|e| e.reason == "MoveDone" && e.note.contains("stream PAYMENTS "))
        .map(|e| e.at_ms)
        .expect("PAYMENTS moved");
    assert!(
        payments_done >= restarted_at,
        "PAYMENTS counted at {payments_done} ms, before the restart at {restarted_at} ms"
    );
    assert_eq!(
        reasons("NatsClusterEvacuation/back-to-c1"),
        vec!["MoveStarted", "MoveCancelled"],
        "{:?}",
        r.controller_events
    );
}

/// Issue #38's power loss: the fault layer under every store, c1 on nats-server's default
/// `sync_interval` (2m), c2 on `always`. Each cluster's three servers lose their unsynced
/// writes at once and restart; the audit reads each stream back. `always` keeps every
/// acknowledged message (the verdict); 2m loses some, which the test requires too, so a fault
/// layer that stopped biting would fail here rather than pass quietly. Skipped, saying why,
/// where FUSE is not available.
async fn power_loss(name: &str) {
    if let Err(e) = faultfs::available() {
        println!("SKIP scenario {name}: {e}");
        return;
    }
    let r = run(name).await;
    assert!(r.passed, "{}", r.summary());
    let count = |f: &str| r.status_figures.get(f).copied();
    assert_eq!(
        count("acknowledged_lost_sync_always"),
        Some(0),
        "{}",
        r.summary()
    );
    let lost = count("acknowledged_lost_sync_2m").unwrap_or(0);
    assert!(
        lost > 0,
        "under sync_interval 2m the power loss took nothing: the fault did not bite\n{}",
        r.summary()
    );
    println!("sync_interval 2m: {lost} acknowledged messages lost; always: 0");
}

/// The short power loss (the gate): losses 10 s and 20 s into 35 s of traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_power_loss_short() {
    power_loss("power-loss-short").await;
}

/// The full power loss (nightly): 150 s of traffic, c1's loss 90 s in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_power_loss() {
    power_loss("power-loss").await;
}

/// One crash plus a partition (nightly): per cluster one server cut from its peers, another
/// loses its unsynced writes, the first two form the majority without the third. `always` 0
/// lost is the verdict; 2m's loss is reported, not required: on this machine it was the 10 s in
/// some runs and 0 in others, as the stream's leadership fell, under a pause as under a cut
/// (docs/durability.md). Skipped, saying why, without FUSE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_single_crash_plus_partition() {
    let name = "single-crash-plus-partition";
    if let Err(e) = faultfs::available() {
        println!("SKIP scenario {name}: {e}");
        return;
    }
    let r = run(name).await;
    assert!(r.passed, "{}", r.summary());
    let count = |f: &str| r.status_figures.get(f).copied();
    assert_eq!(
        count("acknowledged_lost_sync_always"),
        Some(0),
        "{}",
        r.summary()
    );
    println!(
        "sync_interval 2m: {:?} acknowledged messages lost (reported); always: 0",
        count("acknowledged_lost_sync_2m")
    );
}

/// One replica's block file bit-flipped (c1) or truncated (c2) while its server is down
/// (nightly): what the audit sees after it rejoins, and what each replica's own copy holds, is
/// reported, not asserted (nats-server decides how a damaged block is recovered); that every
/// replica of both streams was read is asserted. Skipped, saying why, without FUSE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_minority_corruption() {
    if let Err(e) = faultfs::available() {
        println!("SKIP scenario minority-corruption: {e}");
        return;
    }
    let r = run("minority-corruption").await;
    assert!(r.passed, "{}", r.summary());
    for f in ["acknowledged_lost_bitflip", "acknowledged_lost_truncate"] {
        println!("{f}: {:?}", r.status_figures.get(f));
    }
    let read: Vec<(&str, &str)> = r
        .replicas
        .iter()
        .map(|x| (x.stream.as_str(), x.server.as_str()))
        .collect();
    assert_eq!(
        read,
        [
            ("BITFLIP", "c1-0"),
            ("BITFLIP", "c1-1"),
            ("BITFLIP", "c1-2"),
            ("TRUNCATE", "c2-0"),
            ("TRUNCATE", "c2-1"),
            ("TRUNCATE", "c2-2"),
        ],
        "{}",
        r.summary()
    );
}
