//! The page of small hand-built reports: the lanes, marks and verdict rows it must hold.

use super::*;
use crate::ledger::Event;
use crate::scenario::status_watch::{StatusChange, StatusView};
use crate::scenario::timeline::{ControllerEvent, ServerChange, ServerEvent};
use crate::scenario::{ExpectationOutcome, RolloutStep, Second, StepOutcome};

/// A report as an old sim wrote it: none of the fields the page added (per-server lives,
/// latency, the meta leader watch, the max gap's place).
const OLD_REPORT: &str = r#"{
  "scenario": "old", "description": "written before report.html", "backend": "local",
  "started_at": "2026-01-01T00:00:00Z", "duration_ms": 3000, "passed": true, "failures": [],
  "figures": { "published": 2, "acknowledged": 2, "lost": 0, "duplicated": 0,
    "delivered_twice": 0, "redeliveries": 0, "ack_timeouts": 0, "publish_errors": 0,
    "unacknowledged": 0, "max_ack_gap_ms": 5, "leadership_changes": 0, "lost_by_consumer": {} },
  "expectations": [], "steps": [],
  "timeline": [ { "kind": "leader", "at_ms": 10, "stream": "ORDERS", "leader": "n1" } ],
  "per_second": [ { "second": 0, "published": 2, "acked": 2, "delivered": 2, "ack_timeouts": 0, "publish_errors": 0 } ]
}"#;

fn small() -> Report {
    let mut r: Report = serde_json::from_str(OLD_REPORT).expect("an old report reads");
    r.scenario = "small <rollout>".into();
    r.passed = false;
    r.duration_ms = 10_000;
    r.failures = vec!["expectation lost == 0 not met: 1".into()];
    r.expectations = vec![
        ExpectationOutcome {
            figure: "lost".into(),
            rule: "== 0".into(),
            actual: 1,
            ok: false,
            judged: true,
        },
        ExpectationOutcome {
            figure: "max_ack_gap_ms".into(),
            rule: "<= 100".into(),
            actual: 900,
            ok: false,
            judged: false,
        },
    ];
    r.per_second[0].ack_p50_ms = Some(2);
    r.per_second[0].ack_p99_ms = Some(40);
    r.timeline = vec![
        Event::Leader {
            at_ms: 100,
            stream: "ORDERS".into(),
            leader: Some("n1".into()),
        },
        Event::MetaLeader {
            at_ms: 100,
            leader: Some("n2".into()),
        },
        Event::AckTimeout {
            at_ms: 2_500,
            id: 7,
            attempt: 1,
        },
        Event::Leader {
            at_ms: 3_000,
            stream: "ORDERS".into(),
            leader: None,
        },
        Event::Leader {
            at_ms: 3_400,
            stream: "ORDERS".into(),
            leader: Some("n2".into()),
        },
    ];
    r.per_second.push(Second {
        second: 2,
        publish_errors: 3,
        ..Default::default()
    });
    let ev = |at_ms, server: &str, change, revision: Option<&str>| ServerEvent {
        at_ms,
        server: server.into(),
        change,
        revision: revision.map(str::to_string),
    };
    r.servers = vec![
        ev(0, "n1", ServerChange::Started, Some("aaaaaaaa1111")),
        ev(0, "n2", ServerChange::Started, Some("aaaaaaaa1111")),
        ev(2_000, "n1", ServerChange::LameDuck, None),
        ev(3_000, "n1", ServerChange::Restarted, Some("bbbbbbbb2222")),
        ev(5_000, "n2", ServerChange::Reloaded, Some("cccccccc3333")),
    ];
    r.rollout_steps = vec![
        RolloutStep {
            server: "n1".into(),
            lame_duck_at_ms: 2_000,
            restarted_at_ms: 3_000,
            step_ms: 1_000,
            gate_ms: None,
        },
        RolloutStep {
            server: "n2".into(),
            lame_duck_at_ms: 6_000,
            restarted_at_ms: 7_000,
            step_ms: 1_000,
            gate_ms: Some(3_000),
        },
    ];
    r.steps = vec![StepOutcome {
        index: 1,
        at_ms: 1_000,
        action: "apply NatsCluster manifest x.yaml".into(),
        target: None,
        ok: true,
        error: None,
        took_ms: 300,
        id: None,
        observed_at_ms: None,
        value: None,
    }];
    r.max_ack_gap = Some((2_000, 3_400));
    r.controller_events = vec![
        ControllerEvent {
            at_ms: 2_000,
            controller: "nats-cluster-controller".into(),
            object: "NatsCluster/demo".into(),
            reason: "RolloutStep".into(),
            note: "restarting n1 for revision <b>".into(),
            warning: false,
            count: 1,
        },
        ControllerEvent {
            at_ms: 8_000,
            controller: "nats-cluster-controller".into(),
            object: "NatsCluster/demo".into(),
            reason: "ReplaceServerUnknown".into(),
            note: "replace-server names n9".into(),
            warning: true,
            count: 2,
        },
    ];
    let status = |at_ms, gate: Option<&str>, stepping: Option<&str>, removals: &[(&str, &str)]| {
        StatusChange {
            at_ms,
            cluster: "nats/demo".into(),
            view: StatusView {
                gate: gate.map(str::to_string),
                stepping: stepping.map(str::to_string),
                removals: removals
                    .iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect(),
            },
        }
    };
    r.cluster_status = vec![
        status(0, None, None, &[]),
        status(2_000, None, Some("n1"), &[]),
        status(3_000, Some("stream ORDERS not current"), None, &[]),
        status(6_000, None, Some("n2"), &[("n2", "Evacuating")]),
        status(7_000, None, None, &[("n2", "Evacuating")]),
        status(7_500, None, None, &[("n2", "Removed")]),
    ];
    r
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn escaping_makes_markup_text() {
    assert_eq!(
        esc(r#"<a href="x">'&'</a>"#),
        "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
    );
    assert_eq!(esc("demo-0"), "demo-0");
}

#[test]
fn the_chart_holds_a_lane_per_question_and_one_per_server() {
    let p = page(&small());
    for lane in [
        "latency",
        "throughput",
        "marks",
        "server:n1",
        "server:n2",
        "stream-leader:ORDERS",
        "meta-leader",
        "controller",
        "controller-events",
        "status:nats/demo",
        "steps",
        "time-axis",
        "max-gap",
    ] {
        assert_eq!(
            count(&p, &format!(r#"data-lane="{lane}""#)),
            1,
            "lane {lane}"
        );
    }
}

#[test]
fn marks_spans_and_ticks_are_where_the_report_puts_them() {
    let p = page(&small());
    assert_eq!(count(&p, r#"class="mark ack-timeout""#), 1);
    assert_eq!(count(&p, r#"class="mark publish-error""#), 1);
    assert!(p.contains("3 publish error(s) in second 2"));
    // n1: up, lame duck, up under the new revision; n2: up throughout (a reload is no
    // restart), under the reloaded revision from 5 s.
    assert_eq!(count(&p, r#"class="span up""#), 4);
    assert!(p.contains("n2 up from 5.0 s to 10.0 s, revision …cccc3333"));
    assert_eq!(count(&p, r#"class="span lame-duck""#), 1);
    assert!(p.contains("n1 lame duck from 2.0 s to 3.0 s"));
    assert!(p.contains("rev …bbbb2222"));
    assert_eq!(count(&p, r#"class="restart""#), 1);
    // once on n2's lane, once on the controller's
    assert_eq!(count(&p, r#"class="reload""#), 2);
    // ORDERS: n1, no leader, n2; the meta group: n2
    assert_eq!(count(&p, r#"class="leader-span""#), 3);
    assert_eq!(count(&p, r#"class="leaderless""#), 1);
    assert!(p.contains("n2 led the meta group from 0.1 s to 10.0 s"));
    assert_eq!(count(&p, r#"class="rollout-step""#), 2);
    assert_eq!(count(&p, r#"class="gate-held""#), 1);
    assert!(p.contains("gate closed 3000 ms"));
    assert_eq!(count(&p, r#"class="step ok""#), 1);
    assert_eq!(count(&p, r#"class="controller-event normal""#), 1);
    assert_eq!(count(&p, r#"class="gate-closed""#), 1);
    assert!(p.contains("gate closed from 3.0 s to 6.0 s: waiting for stream ORDERS not current"));
    assert_eq!(count(&p, r#"class="stepping""#), 2);
    // a removal is marked where its phase changes, not at every sample
    assert_eq!(count(&p, r#"class="removal""#), 2);
    assert!(p.contains("n2 Removed at 7.5 s"));
    assert_eq!(count(&p, r#"class="controller-event warning""#), 1);
    assert!(p.contains("replace-server names n9 (×2)"));
    assert!(p.contains("restarting n1 for revision &lt;b&gt;"));
    assert!(p.contains("max ack gap 1400 ms"));
    assert_eq!(count(&p, r#"class="p50""#), 1);
    assert_eq!(count(&p, r#"class="p99""#), 1);
}

#[test]
fn the_verdict_table_has_each_expectation_and_its_outcome() {
    let p = page(&small());
    assert_eq!(count(&p, r#"<tr class="expectation">"#), 2);
    assert!(p.contains(
        r#"<td>lost</td><td>== 0</td><td class="num">1</td><td class="not-met">NOT MET</td>"#
    ));
    assert!(p.contains(r#"<td class="unjudged">not met (a timing"#));
    assert!(p.contains(r#"<span class="verdict failed">FAILED</span>"#));
    assert!(p.contains("<li>expectation lost == 0 not met: 1</li>"));
    // the scenario's name is text, not markup
    assert!(p.contains("scenario small &lt;rollout&gt;"));
}

#[test]
fn the_page_fetches_nothing_and_runs_nothing() {
    let p = page(&small());
    for banned in ["<script", "http://", "https://", "@import", "<link", "src="] {
        // the SVG namespace is a name, not a fetch
        let hits = p.matches(banned).count()
            - usize::from(banned == "http://") * p.matches("http://www.w3.org/2000/svg").count();
        assert_eq!(hits, 0, "{banned}");
    }
}

#[test]
fn an_old_report_still_renders_with_what_it_has() {
    let r: Report = serde_json::from_str(OLD_REPORT).unwrap();
    let p = page(&r);
    assert!(p.contains(r#"data-lane="stream-leader:ORDERS""#));
    // the leader it names has a lane, with no life drawn in it: the old report has none
    assert!(p.contains(r#"data-lane="server:n1""#));
    assert!(!p.contains(r#"class="span "#));
    assert!(p.contains("no publish acks in this run"));
}

#[test]
fn spans_run_from_each_change_to_the_next() {
    let c = [(0, 'a'), (10, 'a'), (20, 'b'), (30, 'a')];
    assert_eq!(
        spans(&c, 50),
        vec![(0, 20, 'a'), (20, 30, 'b'), (30, 50, 'a')]
    );
    assert_eq!(spans::<char>(&[], 50), vec![]);
}

#[test]
fn a_revision_is_cut_to_its_last_eight_characters() {
    assert_eq!(short_revision("775cd760-b108a859"), "…b108a859");
    assert_eq!(short_revision("abc"), "abc");
}

#[test]
fn a_line_breaks_over_seconds_without_a_value() {
    let p = [(500, 1), (1_500, 2), (6_500, 3), (7_500, 4)];
    assert_eq!(runs(&p, 1000), vec![&p[..2], &p[2..]]);
    assert_eq!(runs(&[], 1000), Vec::<&[(u64, u64)]>::new());
}

#[test]
fn axes_round_and_tick_for_a_reader() {
    assert_eq!(nice_max(37), 50);
    assert_eq!(nice_max(200), 200);
    assert_eq!(nice_max(2_600), 3_000);
    assert_eq!(nice_max(7), 10);
    assert_eq!(nice_max(0), 1);
    assert_eq!(tick_seconds(30_000), 2);
    assert_eq!(tick_seconds(90_000), 10);
    assert_eq!(tick_seconds(600_000), 60);
}

#[test]
fn rerender_writes_the_page_beside_the_json() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("report.json"), OLD_REPORT).unwrap();
    let out = rerender(dir.path()).unwrap();
    assert_eq!(out, dir.path().join("report.html"));
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("scenario old")
    );
    let again = rerender(&dir.path().join("report.json")).unwrap();
    assert_eq!(again, out);
    std::fs::write(dir.path().join("bad.json"), "{}").unwrap();
    let err = rerender(&dir.path().join("bad.json"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bad.json is not a scenario report: missing field"),
        "{err}"
    );
    let gone = rerender(&dir.path().join("gone")).unwrap_err().to_string();
    let want = format!("reading the report {}:", dir.path().join("gone").display());
    assert!(gone.starts_with(&want), "{gone}");
}
