//! The controller's lanes of the chart: its rollout steps and the gate between them, what its
//! status said of each NatsCluster (gate closed and why, the server it stepped, removals), and
//! the Events it published.

use std::fmt::Write as _;

use super::esc;
use super::svg::{LANE, Svg};
use crate::scenario::Report;
use crate::scenario::status_watch::StatusChange;
use crate::scenario::timeline::ServerChange;

/// The rollout's steps (lame duck to up) and the gate holding between them, with config
/// reloads.
pub(super) fn rollout_lane(s: &mut Svg, r: &Report) {
    if r.rollout_steps.is_empty() && !r.servers.iter().any(|e| e.change == ServerChange::Reloaded) {
        return;
    }
    let top = s.lane("controller", "cluster controller rollout", LANE);
    let mut prev_up: Option<u64> = None;
    for (i, st) in r.rollout_steps.iter().enumerate() {
        if let (Some(up), Some(g)) = (prev_up, st.gate_ms) {
            let title = format!(
                "gate closed {g} ms: waiting for the cluster to settle before the next step"
            );
            s.rect("gate-held", (up, st.lame_duck_at_ms), top, LANE, "", &title);
            s.span_text(up, st.lame_duck_at_ms, top, "gate held");
        }
        let title = format!(
            "step {}: {} lame duck at {:.1} s, up again after {} ms",
            i + 1,
            st.server,
            st.lame_duck_at_ms as f64 / 1000.0,
            st.step_ms
        );
        s.rect(
            "rollout-step",
            (st.lame_duck_at_ms, st.restarted_at_ms),
            top,
            LANE,
            "",
            &title,
        );
        s.span_text(st.lame_duck_at_ms, st.restarted_at_ms, top, &st.server);
        prev_up = Some(st.restarted_at_ms);
    }
    for e in r
        .servers
        .iter()
        .filter(|e| e.change == ServerChange::Reloaded)
    {
        let x = s.scale.x(e.at_ms);
        let _ = write!(
            s.body,
            r#"<path class="reload" d="M{x:.1},{:.1} l5,6 l-5,6 l-5,-6 z"><title>{}: config rewritten for a reload at {:.1} s</title></path>"#,
            top + 6.0,
            esc(&e.server),
            e.at_ms as f64 / 1000.0
        );
    }
    s.end_lane();
}

/// The Kubernetes Events the controllers published, one dot each (red: a warning).
pub(super) fn events_lane(s: &mut Svg, r: &Report) {
    if r.controller_events.is_empty() {
        return;
    }
    let top = s.lane("controller-events", "controller Events", LANE);
    for e in &r.controller_events {
        let class = if e.warning { "warning" } else { "normal" };
        let title = format!(
            "{:.1} s: {} {} {}: {}{}",
            e.at_ms as f64 / 1000.0,
            e.controller,
            e.reason,
            e.object,
            e.note,
            if e.count > 1 {
                format!(" (×{})", e.count)
            } else {
                String::new()
            }
        );
        let _ = write!(
            s.body,
            r#"<circle class="controller-event {class}" cx="{:.1}" cy="{:.1}" r="4"><title>{}</title></circle>"#,
            s.scale.x(e.at_ms),
            top + LANE / 2.0,
            esc(&title)
        );
    }
    s.end_lane();
}

/// Per NatsCluster the controller's status named: the gate closed (and what it waited for), the
/// server it stepped, and each removal's phase as it changed.
pub(super) fn status_lanes(s: &mut Svg, r: &Report) {
    let mut clusters: Vec<&str> = r
        .cluster_status
        .iter()
        .map(|c| c.cluster.as_str())
        .collect();
    clusters.dedup();
    clusters.sort_unstable();
    clusters.dedup();
    for cluster in clusters {
        let mine: Vec<&StatusChange> = r
            .cluster_status
            .iter()
            .filter(|c| c.cluster == cluster)
            .collect();
        let top = s.lane(
            &format!("status:{cluster}"),
            &format!("{cluster} status"),
            LANE,
        );
        let end = s.scale.end_ms;
        let at = |ms: u64| ms as f64 / 1000.0;
        for (i, c) in mine.iter().enumerate() {
            let to = mine.get(i + 1).map(|n| n.at_ms).unwrap_or(end);
            if let Some(why) = &c.view.gate {
                let title = format!(
                    "gate closed from {:.1} s to {:.1} s: waiting for {why}",
                    at(c.at_ms),
                    at(to)
                );
                s.rect("gate-closed", (c.at_ms, to), top, LANE / 2.0, "", &title);
            }
            if let Some(server) = &c.view.stepping {
                let title = format!(
                    "stepping {server} from {:.1} s to {:.1} s",
                    at(c.at_ms),
                    at(to)
                );
                s.rect(
                    "stepping",
                    (c.at_ms, to),
                    top + LANE / 2.0,
                    LANE / 2.0,
                    "",
                    &title,
                );
            }
            let before = i.checked_sub(1).map(|j| &mine[j].view.removals);
            for (server, phase) in &c.view.removals {
                if before.is_some_and(|b| b.contains(&(server.clone(), phase.clone()))) {
                    continue;
                }
                let x = s.scale.x(c.at_ms);
                let _ = write!(
                    s.body,
                    r#"<path class="removal" d="M{x:.1},{:.1} l5,6 l-5,6 l-5,-6 z"><title>{} {} at {:.1} s</title></path>"#,
                    top + 6.0,
                    esc(server),
                    esc(phase),
                    at(c.at_ms)
                );
            }
        }
        s.end_lane();
    }
}
