//! The report's chart: one inline SVG on a shared time axis, a panel or lane per question a
//! reader asks — publish-ack latency, traffic per second, ack timeouts and publish errors, each
//! server's life, who led the stream and the meta group, the controller's rollout and the steps.
//! Every lane is a `<g class="lane" data-lane="…">`, so a test (or a browser) can find it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::esc;
use super::svg::{LANE, LEFT, RIGHT, Scale, Svg, WIDTH};
use crate::ledger::Event;
use crate::scenario::Report;
use crate::scenario::timeline::{ServerChange, ServerState};

/// Saturated colours, one per server, for who leads what.
const PALETTE: &[&str] = &[
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f",
];

/// Where the time axis ends: the last thing the report knows of.
pub fn end_ms(r: &Report) -> u64 {
    let mut end = r.duration_ms.max(r.per_second.len() as u64 * 1000);
    end = end.max(r.timeline.iter().map(Event::at_ms).max().unwrap_or(0));
    end = end.max(r.servers.iter().map(|e| e.at_ms).max().unwrap_or(0));
    end = end.max(r.steps.iter().map(|s| s.done_at_ms()).max().unwrap_or(0));
    end = end.max(
        r.controller_events
            .iter()
            .map(|e| e.at_ms)
            .max()
            .unwrap_or(0),
    );
    end.max(1000)
}

/// A tick interval (s) giving at most ~16 ticks over `end_ms`.
pub fn tick_seconds(end_ms: u64) -> u64 {
    let secs = end_ms.div_ceil(1000);
    [1, 2, 5, 10, 15, 30, 60, 120, 300, 600]
        .into_iter()
        .find(|t| secs / t <= 16)
        .unwrap_or(1200)
}

/// Consecutive values as spans: each from its change to the next change (the last to `end`).
pub fn spans<T: Clone + PartialEq>(changes: &[(u64, T)], end: u64) -> Vec<(u64, u64, T)> {
    let mut out: Vec<(u64, u64, T)> = Vec::new();
    for (i, (at, v)) in changes.iter().enumerate() {
        let to = changes.get(i + 1).map(|(t, _)| *t).unwrap_or(end).max(*at);
        match out.last_mut() {
            Some(last) if last.2 == *v && last.1 == *at => last.1 = to,
            _ => out.push((*at, to, v.clone())),
        }
    }
    out.retain(|(a, b, _)| b > a);
    out
}

/// Every server the report names, in order: its lanes and its colour.
pub fn server_names(r: &Report) -> Vec<String> {
    let mut names: BTreeSet<String> = r.servers.iter().map(|e| e.server.clone()).collect();
    for e in &r.timeline {
        match e {
            Event::Leader {
                leader: Some(l), ..
            }
            | Event::MetaLeader {
                leader: Some(l), ..
            } => {
                names.insert(l.clone());
            }
            _ => {}
        }
    }
    names.extend(r.meta_leader_at_start.clone());
    names.into_iter().collect()
}

/// The colour of server `name` among `names`.
pub fn server_colour(names: &[String], name: &str) -> &'static str {
    let i = names.iter().position(|n| n == name).unwrap_or(names.len());
    PALETTE[i % PALETTE.len()]
}

/// The state colour of a server lane.
pub fn state_class(s: ServerState) -> (&'static str, &'static str) {
    match s {
        ServerState::Up => ("up", "up"),
        ServerState::LameDuck => ("lame-duck", "lame duck"),
        ServerState::Down => ("down", "down"),
        ServerState::Paused => ("paused", "paused (SIGSTOP)"),
    }
}

/// A round top for a value axis: 1, 1.5, 2, 3, 5 or 7.5 times a power of ten.
pub fn nice_max(v: u64) -> u64 {
    let v = v.max(1);
    if v <= 10 {
        return [1, 2, 3, 5, 10].into_iter().find(|m| *m >= v).unwrap_or(10);
    }
    let mag = 10u64.pow(v.ilog10() - 1);
    [10, 15, 20, 30, 50, 75, 100]
        .into_iter()
        .map(|m| m * mag)
        .find(|m| *m >= v)
        .unwrap_or(100 * mag)
}

/// The chart of a report, as an inline `<svg>`.
pub fn render(r: &Report) -> String {
    let scale = Scale { end_ms: end_ms(r) };
    let mut s = Svg {
        body: String::new(),
        y: 8.0,
        scale,
    };
    let names = server_names(r);
    latency_panel(&mut s, r);
    traffic_panel(&mut s, r);
    marks_lane(&mut s, r);
    for name in &names {
        server_lane(&mut s, r, name, &names);
    }
    leader_lanes(&mut s, r, &names);
    super::controller::rollout_lane(&mut s, r);
    super::controller::status_lanes(&mut s, r);
    super::controller::events_lane(&mut s, r);
    steps_lane(&mut s, r);
    let height = s.y + 40.0;
    let grid = grid(scale, height - 40.0);
    let gap = r
        .max_ack_gap
        .map(|(from, to)| {
            let (x0, x1) = (scale.x(from), scale.x(to));
            format!(
                r#"<g class="max-gap" data-lane="max-gap"><rect class="max-gap-band" x="{x0:.1}" y="8" width="{:.1}" height="{:.1}"><title>longest gap between two publish acks: {} ms (from {:.1} s to {:.1} s)</title></rect><text class="max-gap-text" x="{:.1}" y="20">max ack gap {} ms</text></g>"#,
                (x1 - x0).max(3.0),
                height - 48.0,
                to - from,
                from as f64 / 1000.0,
                to as f64 / 1000.0,
                x1 + 4.0,
                to - from
            )
        })
        .unwrap_or_default();
    // The grid under the lanes' backgrounds would be hidden: it goes over them, the gap too.
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="timeline of the run">{}{grid}{gap}</svg>"#,
        s.body
    )
}

/// Vertical grid lines and the time axis under them.
fn grid(scale: Scale, bottom: f64) -> String {
    let step = tick_seconds(scale.end_ms);
    let mut g = String::from(r#"<g class="axis" data-lane="time-axis">"#);
    let mut t = 0;
    while t * 1000 <= scale.end_ms {
        let x = scale.x(t * 1000);
        let _ = write!(
            g,
            r#"<line class="vgrid" x1="{x:.1}" x2="{x:.1}" y1="8" y2="{bottom:.1}"/><text class="x-tick" x="{x:.1}" y="{:.1}">{t} s</text>"#,
            bottom + 14.0
        );
        t += step;
    }
    let _ = write!(
        g,
        r#"<text class="x-label" x="{:.1}" y="{:.1}">time since the run began (s)</text></g>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        bottom + 32.0
    );
    g
}

fn latency_panel(s: &mut Svg, r: &Report) {
    let h = 130.0;
    let top = s.lane("latency", "publish-ack latency (ms)", h);
    let at = |sec: u64| sec * 1000 + 500;
    let p50: Vec<(u64, u64)> = r
        .per_second
        .iter()
        .filter_map(|b| b.ack_p50_ms.map(|v| (at(b.second), v)))
        .collect();
    let p99: Vec<(u64, u64)> = r
        .per_second
        .iter()
        .filter_map(|b| b.ack_p99_ms.map(|v| (at(b.second), v)))
        .collect();
    let peak = |v: &[(u64, u64)]| v.iter().map(|(_, v)| *v).max().unwrap_or(0);
    let max = nice_max(peak(&p99));
    s.y_axis(top, h, max, " ms");
    if !p50.is_empty() {
        let text = format!("peaks: p50 {} ms, p99 {} ms", peak(&p50), peak(&p99));
        s.sub_label(top, h, &text);
    }
    s.line("p99", &p99, top, h, max);
    s.line("p50", &p50, top, h, max);
    if p50.is_empty() {
        no_data(s, top, h, "no publish acks in this run");
    }
    s.end_lane();
}

fn traffic_panel(s: &mut Svg, r: &Report) {
    let h = 110.0;
    let top = s.lane("throughput", "messages per second", h);
    let at = |sec: u64| sec * 1000 + 500;
    let series = |f: fn(&crate::scenario::Second) -> u64| -> Vec<(u64, u64)> {
        r.per_second.iter().map(|b| (at(b.second), f(b))).collect()
    };
    let (p, a, d) = (
        series(|b| b.published),
        series(|b| b.acked),
        series(|b| b.delivered),
    );
    let max = nice_max(
        p.iter()
            .chain(&a)
            .chain(&d)
            .map(|(_, v)| *v)
            .max()
            .unwrap_or(1),
    );
    s.y_axis(top, h, max, "/s");
    s.line("delivered", &d, top, h, max);
    s.line("published", &p, top, h, max);
    s.line("acked", &a, top, h, max);
    s.end_lane();
}

fn no_data(s: &mut Svg, top: f64, h: f64, text: &str) {
    let _ = write!(
        s.body,
        r#"<text class="no-data" x="{:.1}" y="{:.1}">{}</text>"#,
        LEFT + 12.0,
        top + h / 2.0,
        esc(text)
    );
}

fn marks_lane(s: &mut Svg, r: &Report) {
    let top = s.lane("marks", "ack timeouts / publish errors", LANE);
    for e in &r.timeline {
        if let Event::AckTimeout { at_ms, id, attempt } = e {
            let x = s.scale.x(*at_ms);
            let _ = write!(
                s.body,
                r#"<path class="mark ack-timeout" d="M{x:.1},{:.1} l-5,-9 h10 z"><title>ack timeout at {:.1} s: message {id}, attempt {attempt}</title></path>"#,
                top + 16.0,
                *at_ms as f64 / 1000.0
            );
        }
    }
    for b in r.per_second.iter().filter(|b| b.publish_errors > 0) {
        let x = s.scale.x(b.second * 1000 + 500);
        let _ = write!(
            s.body,
            r#"<rect class="mark publish-error" x="{:.1}" y="{:.1}" width="8" height="8"><title>{} publish error(s) in second {}</title></rect>"#,
            x - 4.0,
            top + 14.0,
            b.publish_errors,
            b.second
        );
    }
    s.end_lane();
}

fn server_lane(s: &mut Svg, r: &Report, name: &str, names: &[String]) {
    let top = s.lane(&format!("server:{name}"), name, LANE);
    let _ = write!(
        s.body,
        r#"<rect class="swatch" x="{}" y="{:.1}" width="10" height="10" style="fill:{}"/>"#,
        8.0,
        top + 7.0,
        server_colour(names, name)
    );
    let mine: Vec<_> = r.servers.iter().filter(|e| e.server == name).collect();
    let mut revision: Option<String> = None;
    let mut changes: Vec<(u64, (ServerState, Option<String>))> = Vec::new();
    let mut state = None;
    for e in &mine {
        if e.revision.is_some() {
            revision = e.revision.clone();
        }
        if let Some(st) = e.change.state_after() {
            state = Some(st);
        }
        if let Some(st) = state {
            changes.push((e.at_ms, (st, revision.clone())));
        }
    }
    for (from, to, (st, rev)) in spans(&changes, s.scale.end_ms) {
        let (class, what) = state_class(st);
        let rev_text = rev.as_deref().map(short_revision);
        let title = format!(
            "{name} {what} from {:.1} s to {:.1} s{}",
            from as f64 / 1000.0,
            to as f64 / 1000.0,
            rev_text
                .as_ref()
                .map(|r| format!(", revision {r}"))
                .unwrap_or_default()
        );
        s.rect(&format!("span {class}"), (from, to), top, LANE, "", &title);
        let label = match (st, &rev_text) {
            (ServerState::Up, Some(r)) => format!("rev {r}"),
            (ServerState::Up, None) => String::new(),
            _ => what.to_string(),
        };
        s.span_text(from, to, top, &label);
    }
    for e in &mine {
        let x = s.scale.x(e.at_ms);
        let at = e.at_ms as f64 / 1000.0;
        if e.change.is_restart() {
            let _ = write!(
                s.body,
                r#"<path class="restart" d="M{x:.1},{:.1} v{LANE} m-4,0 l4,-6 l4,6"><title>{name} restarted at {at:.1} s</title></path>"#,
                top
            );
        } else if e.change == ServerChange::Reloaded {
            let _ = write!(
                s.body,
                r#"<path class="reload" d="M{x:.1},{:.1} l5,6 l-5,6 l-5,-6 z"><title>{name}: config rewritten for a reload (no restart) at {at:.1} s</title></path>"#,
                top + 6.0
            );
        }
    }
    s.end_lane();
}

/// A revision short enough for a lane: its last 8 characters (where the controller's
/// revisions of one NatsCluster differ from its last spec).
pub fn short_revision(r: &str) -> String {
    let chars: Vec<char> = r.chars().collect();
    match chars.len() {
        0..=8 => r.to_string(),
        n => format!("…{}", chars[n - 8..].iter().collect::<String>()),
    }
}

fn leader_lanes(s: &mut Svg, r: &Report, names: &[String]) {
    let mut streams: BTreeMap<&str, Vec<(u64, Option<String>)>> = BTreeMap::new();
    let mut meta: Vec<(u64, Option<String>)> = Vec::new();
    for e in &r.timeline {
        match e {
            Event::Leader {
                at_ms,
                stream,
                leader,
            } => streams
                .entry(stream.as_str())
                .or_default()
                .push((*at_ms, leader.clone())),
            Event::MetaLeader { at_ms, leader } => meta.push((*at_ms, leader.clone())),
            _ => {}
        }
    }
    for (stream, changes) in &streams {
        let top = s.lane(
            &format!("stream-leader:{stream}"),
            &format!("stream {stream} leader"),
            LANE,
        );
        leader_spans(s, changes, top, names, &format!("stream {stream}"));
        s.end_lane();
    }
    if !meta.is_empty() || r.meta_leader_at_start.is_some() {
        let top = s.lane("meta-leader", "meta leader", LANE);
        if meta.is_empty() {
            let text = format!(
                "{} when the topology was ready (not watched in this run)",
                r.meta_leader_at_start.as_deref().unwrap_or("-")
            );
            no_data(s, top, LANE + 4.0, &text);
        }
        leader_spans(s, &meta, top, names, "the meta group");
        s.end_lane();
    }
}

fn leader_spans(
    s: &mut Svg,
    changes: &[(u64, Option<String>)],
    top: f64,
    names: &[String],
    of: &str,
) {
    for (from, to, leader) in spans(changes, s.scale.end_ms) {
        let span = format!(
            "from {:.1} s to {:.1} s",
            from as f64 / 1000.0,
            to as f64 / 1000.0
        );
        match &leader {
            Some(l) => {
                let title = format!("{l} led {of} {span}");
                s.rect(
                    "leader-span",
                    (from, to),
                    top,
                    LANE,
                    server_colour(names, l),
                    &title,
                );
                s.span_text(from, to, top, l);
            }
            None => {
                let title = format!("no leader of {of} answered {span}");
                s.rect("leaderless", (from, to), top, LANE, "", &title);
            }
        }
    }
}

fn steps_lane(s: &mut Svg, r: &Report) {
    if r.steps.is_empty() {
        return;
    }
    let top = s.lane("steps", "scenario steps", LANE);
    // A step's number sits at its start, moved right past the number before it.
    let mut free_x = 0.0f64;
    for st in &r.steps {
        let class = if st.ok { "step ok" } else { "step failed" };
        let title = format!(
            "step {} at {:.1} s: {}{} — {} ({} ms)",
            st.index,
            st.at_ms as f64 / 1000.0,
            st.action,
            st.target
                .as_ref()
                .map(|t| format!(" -> {t}"))
                .unwrap_or_default(),
            st.error.as_deref().unwrap_or("ok"),
            st.took_ms
        );
        s.rect(
            class,
            (st.at_ms, st.done_at_ms()),
            top + 6.0,
            LANE - 12.0,
            "",
            &title,
        );
        let x = s.scale.x(st.at_ms).max(free_x);
        free_x = x + 7.0 * st.index.to_string().len() as f64 + 3.0;
        let _ = write!(
            s.body,
            r#"<text class="step-no" x="{x:.1}" y="{:.1}">{}</text>"#,
            top + 4.0,
            st.index
        );
    }
    s.end_lane();
}
