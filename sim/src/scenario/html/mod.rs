//! `report.html`: a scenario's report as one self-contained page a person reads at a glance —
//! the verdict and each expectation, then one chart on a shared time axis (latency, traffic,
//! marks, a lane per server, leaders, the controller's rollout and Events, the steps), then the
//! steps, the rollout and the controllers' Events as tables. No scripts, no fonts, nothing fetched: inline SVG and CSS only.
//!
//! Pure: [`page`] takes a report and returns the page; [`write`] and [`rerender`] are the shells.

mod chart;
mod controller;
mod svg;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{Report, ScenarioError};

pub use chart::{end_ms, nice_max, server_names, short_revision, spans, tick_seconds};
pub use svg::runs;

/// Text made safe for HTML and SVG text and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 16px 24px; color: #222; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 20px 0 6px; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 4px; color: #fff; font-weight: 600; }
.verdict.passed { background: #2e7d32; } .verdict.failed { background: #c62828; }
.meta { color: #555; margin-bottom: 8px; }
table { border-collapse: collapse; margin: 4px 0 8px; } th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.ok { color: #2e7d32; font-weight: 600; } td.not-met { color: #c62828; font-weight: 600; } td.unjudged { color: #8d6e00; }
.failures li { color: #c62828; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 6px 0; font-size: 13px; }
.legend span { display: inline-flex; align-items: center; gap: 5px; }
.legend svg { vertical-align: middle; }
svg.chart { font: 12px system-ui, "DejaVu Sans", sans-serif; display: block; }
.lane-bg { fill: #fafafa; stroke: #e3e3e3; }
.lane-label { text-anchor: end; fill: #222; font-weight: 600; }
.lane-sub { text-anchor: end; fill: #666; font-size: 11px; }
.vgrid { stroke: #000; stroke-opacity: 0.07; } .hgrid { stroke: #eee; }
.x-tick { text-anchor: middle; fill: #555; } .x-label { text-anchor: middle; fill: #333; font-weight: 600; }
.y-tick { fill: #777; font-size: 10px; }
.p50 { fill: none; stroke: #1565c0; stroke-width: 2; } .p99 { fill: none; stroke: #ef6c00; stroke-width: 1.6; }
.published { fill: none; stroke: #9e9e9e; stroke-width: 4; stroke-opacity: 0.6; } .acked { fill: none; stroke: #2e7d32; stroke-width: 1.6; }
.delivered { fill: none; stroke: #8e24aa; stroke-width: 1.2; stroke-dasharray: 4 2; }
.ack-timeout { fill: #d32f2f; } .publish-error { fill: #6a1b9a; }
.span.up { fill: #a5d6a7; } .span.lame-duck { fill: #ffcc80; } .span.down { fill: #ef9a9a; } .span.paused { fill: #b0bec5; }
.restart { stroke: #000; stroke-width: 1.5; fill: none; } .reload { fill: #0277bd; stroke: #fff; }
.leaderless { fill: #eee; stroke: #bbb; stroke-dasharray: 3 2; }
.leader-span { stroke: #fff; stroke-width: 1; }
.span-text { fill: #111; font-size: 11px; pointer-events: none; }
.leader-span + .span-text { fill: #fff; font-weight: 600; }
.gate-closed { fill: #9e9e9e; } .stepping { fill: #ffcc80; } .removal { fill: #6d4c41; stroke: #fff; }
.rollout-step { fill: #ffcc80; stroke: #e65100; } .gate-held { fill: #e0e0e0; stroke: #9e9e9e; stroke-dasharray: 3 2; }
.controller-event.normal { fill: #0277bd; stroke: #fff; } .controller-event.warning { fill: #c62828; stroke: #fff; }
.step.ok { fill: #546e7a; } .step.failed { fill: #c62828; } .step-no { fill: #333; font-size: 10px; }
.max-gap-band { fill: #e53935; fill-opacity: 0.22; } .max-gap-text { fill: #b71c1c; font-weight: 600; }
.no-data { fill: #888; font-style: italic; }
.swatch { stroke: #fff; }
"#;

/// One legend entry: a small SVG sample and its words.
fn legend_item(sample: &str, words: &str) -> String {
    format!(
        r#"<span><svg width="22" height="14" viewBox="0 0 22 14">{sample}</svg>{}</span>"#,
        esc(words)
    )
}

fn legend() -> String {
    let rect =
        |style: &str| format!(r#"<rect x="1" y="2" width="20" height="10" style="{style}"/>"#);
    let line = |style: &str| format!(r#"<line x1="1" y1="7" x2="21" y2="7" style="{style}"/>"#);
    let items = [
        legend_item(&line("stroke:#1565c0;stroke-width:2"), "ack latency p50"),
        legend_item(&line("stroke:#ef6c00;stroke-width:2"), "ack latency p99"),
        legend_item(
            &rect("fill:#e53935;fill-opacity:0.22"),
            "longest gap between acks",
        ),
        legend_item(
            &line("stroke:#9e9e9e;stroke-width:4;stroke-opacity:0.6"),
            "published/s",
        ),
        legend_item(&line("stroke:#2e7d32;stroke-width:2"), "acked/s"),
        legend_item(
            &line("stroke:#8e24aa;stroke-width:2;stroke-dasharray:4 2"),
            "delivered/s",
        ),
        legend_item(
            r##"<path d="M11,12 l-5,-9 h10 z" style="fill:#d32f2f"/>"##,
            "ack timeout",
        ),
        legend_item(
            r##"<rect x="7" y="3" width="8" height="8" style="fill:#6a1b9a"/>"##,
            "publish errors",
        ),
        legend_item(&rect("fill:#a5d6a7"), "server up (rev = revision)"),
        legend_item(&rect("fill:#ffcc80"), "lame duck"),
        legend_item(&rect("fill:#ef9a9a"), "down"),
        legend_item(&rect("fill:#b0bec5"), "paused"),
        legend_item(
            r##"<path d="M11,1 v12 m-4,0 l4,-6 l4,6" style="stroke:#000;fill:none;stroke-width:1.5"/>"##,
            "restart",
        ),
        legend_item(
            r##"<path d="M11,1 l5,6 l-5,6 l-5,-6 z" style="fill:#0277bd"/>"##,
            "config reload",
        ),
        legend_item(
            &rect("fill:#1f77b4"),
            "leader (the server's colour, its swatch by its lane)",
        ),
        legend_item(
            &rect("fill:#eee;stroke:#bbb;stroke-dasharray:3 2"),
            "no leader",
        ),
        legend_item(
            &rect("fill:#ffcc80;stroke:#e65100"),
            "rollout step (lame duck to up)",
        ),
        legend_item(
            &rect("fill:#e0e0e0;stroke:#9e9e9e;stroke-dasharray:3 2"),
            "gate held",
        ),
        legend_item(
            r##"<rect x="1" y="1" width="20" height="6" style="fill:#9e9e9e"/><rect x="1" y="7" width="20" height="6" style="fill:#ffcc80"/>"##,
            "status: gate closed (top), server stepped (bottom)",
        ),
        legend_item(
            r##"<path d="M11,1 l5,6 l-5,6 l-5,-6 z" style="fill:#6d4c41"/>"##,
            "removal phase",
        ),
        legend_item(
            r##"<circle cx="11" cy="7" r="4" style="fill:#0277bd"/>"##,
            "controller Event (red: a warning)",
        ),
        legend_item(&rect("fill:#546e7a"), "scenario step (red: failed)"),
    ];
    format!(r#"<div class="legend">{}</div>"#, items.concat())
}

fn outcome(ok: bool, judged: bool) -> (&'static str, &'static str) {
    match (ok, judged) {
        (true, _) => ("ok", "ok"),
        (false, true) => ("not-met", "NOT MET"),
        (false, false) => ("unjudged", "not met (a timing: reported, not judged)"),
    }
}

fn verdict(r: &Report) -> String {
    let mut h = String::from(
        r#"<h2>Verdict</h2><table class="expectations"><tr><th>expectation</th><th>rule</th><th>actual</th><th>outcome</th></tr>"#,
    );
    for e in &r.expectations {
        let (class, words) = outcome(e.ok, e.judged);
        let _ = write!(
            h,
            r#"<tr class="expectation"><td>{}</td><td>{}</td><td class="num">{}</td><td class="{class}">{words}</td></tr>"#,
            esc(&e.figure),
            esc(&e.rule),
            e.actual
        );
    }
    if r.expectations.is_empty() {
        h.push_str(r#"<tr><td colspan="4">no expectations</td></tr>"#);
    }
    h.push_str("</table>");
    if !r.failures.is_empty() {
        h.push_str(r#"<ul class="failures">"#);
        for f in &r.failures {
            let _ = write!(h, "<li>{}</li>", esc(f));
        }
        h.push_str("</ul>");
    }
    h
}

fn figures(r: &Report) -> String {
    let f = &r.figures;
    let rows = [
        ("published", f.published),
        ("acknowledged", f.acknowledged),
        ("lost", f.lost),
        ("undrained", f.undrained),
        ("duplicated", f.duplicated),
        ("delivered twice", f.delivered_twice),
        ("redeliveries", f.redeliveries),
        ("publish-ack timeouts", f.ack_timeouts),
        ("publish errors", f.publish_errors),
        ("unacknowledged", f.unacknowledged),
        ("max ack gap (ms)", f.max_ack_gap_ms),
        ("leadership changes", f.leadership_changes),
    ];
    let mut h = String::from(r#"<table class="figures"><tr>"#);
    for (k, _) in rows {
        let _ = write!(h, "<th>{k}</th>");
    }
    h.push_str("</tr><tr>");
    for (_, v) in rows {
        let _ = write!(h, r#"<td class="num">{v}</td>"#);
    }
    h.push_str("</tr></table>");
    for (k, v) in &r.step_figures {
        let _ = write!(h, "<div>figure from the steps: {} = {v} ms</div>", esc(k));
    }
    h
}

fn steps_table(r: &Report) -> String {
    if r.steps.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        r#"<h2>Steps</h2><table class="steps"><tr><th>#</th><th>at (s)</th><th>action</th><th>target</th><th>outcome</th><th>took (ms)</th></tr>"#,
    );
    for s in &r.steps {
        let (class, words) = if s.ok {
            ("ok", "ok".to_string())
        } else {
            (
                "not-met",
                s.error.clone().unwrap_or_else(|| "failed".into()),
            )
        };
        let _ = write!(
            h,
            r#"<tr><td class="num">{}</td><td class="num">{:.1}</td><td>{}</td><td>{}</td><td class="{class}">{}</td><td class="num">{}</td></tr>"#,
            s.index,
            s.at_ms as f64 / 1000.0,
            esc(&s.action),
            esc(s.target.as_deref().unwrap_or("")),
            esc(&words),
            s.took_ms
        );
    }
    h.push_str("</table>");
    h
}

fn rollout_table(r: &Report) -> String {
    if r.rollout_steps.is_empty() {
        return String::new();
    }
    let mut h = format!(
        r#"<h2>Rollout</h2><div>restart order: {} (meta leader at start: {})</div><table class="rollout"><tr><th>server</th><th>lame duck at (s)</th><th>up after (ms)</th><th>gate held before it (ms)</th></tr>"#,
        esc(&r.server_restart_order.join(" → ")),
        esc(r.meta_leader_at_start.as_deref().unwrap_or("-"))
    );
    for s in &r.rollout_steps {
        let _ = write!(
            h,
            r#"<tr><td>{}</td><td class="num">{:.1}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
            esc(&s.server),
            s.lame_duck_at_ms as f64 / 1000.0,
            s.step_ms,
            s.gate_ms
                .map(|g| g.to_string())
                .unwrap_or_else(|| "-".into())
        );
    }
    h.push_str("</table>");
    h
}

fn controller_events_table(r: &Report) -> String {
    if r.controller_events.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        r#"<h2>Controller Events</h2><table class="controller-events"><tr><th>at (s)</th><th>controller</th><th>object</th><th>reason</th><th>note</th><th>count</th></tr>"#,
    );
    for e in &r.controller_events {
        let class = if e.warning { r#" class="not-met""# } else { "" };
        let _ = write!(
            h,
            r#"<tr><td class="num">{:.1}</td><td>{}</td><td>{}</td><td{class}>{}</td><td>{}</td><td class="num">{}</td></tr>"#,
            e.at_ms as f64 / 1000.0,
            esc(&e.controller),
            esc(&e.object),
            esc(&e.reason),
            esc(&e.note),
            e.count
        );
    }
    h.push_str("</table>");
    h
}

/// The whole page of a report.
pub fn page(r: &Report) -> String {
    let (class, words) = if r.passed {
        ("passed", "PASSED")
    } else {
        ("failed", "FAILED")
    };
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>scenario {name}: {words}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{STYLE}</style></head>
<body>
<h1>scenario {name} <span class="verdict {class}">{words}</span></h1>
<div class="meta">{desc}<br>{backend} backend, started {started}, took {took:.1} s</div>
{verdict}
{figures}
<h2>Timeline</h2>
{legend}
{chart}
{steps}
{rollout}
{events}
</body></html>
"#,
        name = esc(&r.scenario),
        desc = esc(&r.description),
        backend = esc(&r.backend),
        started = esc(&r.started_at),
        took = r.duration_ms as f64 / 1000.0,
        verdict = verdict(r),
        figures = figures(r),
        legend = legend(),
        chart = chart::render(r),
        steps = steps_table(r),
        rollout = rollout_table(r),
        events = controller_events_table(r),
    )
}

/// Writes `report.html` of `r` into the folder `dir`; returns its path.
pub fn write(r: &Report, dir: &Path) -> Result<PathBuf, ScenarioError> {
    let path = dir.join("report.html");
    std::fs::write(&path, page(r)).map_err(|source| ScenarioError::Report {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Renders `report.html` again from a report.json (`path` is the file or its folder), beside
/// it; returns the page's path.
pub fn rerender(path: &Path) -> Result<PathBuf, ScenarioError> {
    let json = if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&json).map_err(|source| ScenarioError::ReadReport {
        path: json.clone(),
        source,
    })?;
    let report: Report = serde_json::from_str(&text).map_err(|e| ScenarioError::NotAReport {
        path: json.clone(),
        message: e.to_string(),
    })?;
    write(&report, json.parent().unwrap_or(Path::new(".")))
}
