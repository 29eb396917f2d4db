//! Judging and writing a run: the figures, the expectations on them, the report (JSON and a
//! human summary).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::clients::ClientReport;
use super::leader_count::LeaderCount;
use super::status_watch::StatusChange;
use super::timeline::{ControllerEvent, ServerEvent, ack_latency_per_second, max_ack_gap};
use super::{Scenario, ScenarioError, Step};
use crate::ledger::{Event, Figures};

/// A comparison from the `expect` map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Eq(u64),
    Le(u64),
    Lt(u64),
    Ge(u64),
    Gt(u64),
}

impl Rule {
    pub fn parse(text: &str) -> Result<Rule, String> {
        let t = text.trim();
        let (ctor, rest): (fn(u64) -> Rule, &str) = if let Some(r) = t.strip_prefix("<=") {
            (Rule::Le, r)
        } else if let Some(r) = t.strip_prefix(">=") {
            (Rule::Ge, r)
        } else if let Some(r) = t.strip_prefix("==") {
            (Rule::Eq, r)
        } else if let Some(r) = t.strip_prefix('<') {
            (Rule::Lt, r)
        } else if let Some(r) = t.strip_prefix('>') {
            (Rule::Gt, r)
        } else {
            (Rule::Eq, t)
        };
        rest.trim()
            .parse()
            .map(ctor)
            .map_err(|_| format!("rule {text:?} is not `[<=|>=|==|<|>] <number>`"))
    }

    pub fn holds(self, v: u64) -> bool {
        match self {
            Rule::Eq(n) => v == n,
            Rule::Le(n) => v <= n,
            Rule::Lt(n) => v < n,
            Rule::Ge(n) => v >= n,
            Rule::Gt(n) => v > n,
        }
    }
}

/// Figures from the cluster controller's rollout rather than the traffic ledger:
/// `rollout_restarts_max` / `rollout_restarts_min` (per server the controller ran, how many times
/// it restarted it under a new revision), `meta_leader_restarted_last` (1 when the last server
/// restarted was the meta leader at the start, else 0), `rollout_restarting_max` (the most
/// servers between lame duck and up again at one moment: 1 when the rollout went one server at a
/// time).
pub const ROLLOUT_FIGURES: &[&str] = &[
    "rollout_restarts_max",
    "rollout_restarts_min",
    "meta_leader_restarted_last",
    "rollout_restarting_max",
];

/// The most of `steps` under way at one moment (lame duck to restarted, both ends included).
pub fn restarting_at_once(steps: &[RolloutStep]) -> u64 {
    // +1 at each lame duck, -1 just after each restart: a step ending when another begins
    // counts as overlapping, so a controller that starts the next before the last is up is seen.
    let mut edges: Vec<(u64, i8)> = steps
        .iter()
        .flat_map(|s| [(s.lame_duck_at_ms, -1), (s.restarted_at_ms, 1)])
        .collect();
    edges.sort();
    let (mut now, mut most) = (0i64, 0i64);
    for (_, e) in edges {
        now -= i64::from(e);
        most = most.max(now);
    }
    most as u64
}

/// The value of a rollout figure from a finished report.
pub fn rollout_figure(r: &Report, name: &str) -> Option<u64> {
    let per_server = || {
        r.server_restarts.keys().map(|server| {
            r.server_restart_order
                .iter()
                .filter(|s| *s == server)
                .count() as u64
        })
    };
    Some(match name {
        "rollout_restarts_max" => per_server().max().unwrap_or(0),
        "rollout_restarts_min" => per_server().min().unwrap_or(0),
        "rollout_restarting_max" => restarting_at_once(&r.rollout_steps),
        "meta_leader_restarted_last" => u64::from(
            r.meta_leader_at_start.is_some()
                && r.server_restart_order.last() == r.meta_leader_at_start.as_ref(),
        ),
        _ => return None,
    })
}

/// The value of a named figure.
pub fn figure(f: &Figures, name: &str) -> Option<u64> {
    Some(match name {
        "published" => f.published,
        "acknowledged" => f.acknowledged,
        "lost" => f.lost,
        "undrained" => f.undrained,
        "duplicated" => f.duplicated,
        "delivered_twice" => f.delivered_twice,
        "redeliveries" => f.redeliveries,
        "ack_timeouts" => f.ack_timeouts,
        "publish_errors" => f.publish_errors,
        "unacknowledged" => f.unacknowledged,
        "max_ack_gap_ms" => f.max_ack_gap_ms,
        "leadership_changes" => f.leadership_changes,
        "ack_timeouts_max_per_publisher" => f.ack_timeouts_max_per_publisher,
        _ => return None,
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepOutcome {
    pub index: usize,
    pub at_ms: u64,
    pub action: String,
    /// The server a selector resolved to, if any.
    pub target: Option<String>,
    pub ok: bool,
    pub error: Option<String>,
    pub took_ms: u64,
    /// The step's `id`, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When what the step waited for happened, where the step can tell (`wait_disconnected`:
    /// when the server closed the connection), in ms since the run began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at_ms: Option<u64>,
    /// The value the step read, where it reads one (`wait_status`: the status field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
}

impl StepOutcome {
    /// When the step was done, in ms since the run began.
    pub fn done_at_ms(&self) -> u64 {
        self.at_ms + self.took_ms
    }
}

/// The figures the steps record: per step with a `figure`, the ms from the completion of step
/// `since` to this step's observed moment (else its completion). A step that failed, whose
/// `since` step failed, or that observed a moment before `since` was done records nothing.
pub fn step_figures(steps: &[Step], outcomes: &[StepOutcome]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (step, o) in steps.iter().zip(outcomes) {
        let Some(f) = &step.figure else { continue };
        let since = outcomes
            .iter()
            .find(|s| s.ok && s.id.as_deref() == Some(f.since.as_str()));
        if let (true, Some(since)) = (o.ok, since) {
            let to = o.observed_at_ms.unwrap_or_else(|| o.done_at_ms());
            // What happened before the step it is measured from has no time since it.
            if let Some(ms) = to.checked_sub(since.done_at_ms()) {
                out.insert(f.name.clone(), ms);
            }
        }
    }
    out
}

/// Judges the expectations on the steps' figures: timings, judged only where timings are
/// ([`judges_timings`]); a figure not recorded (its step failed) is a failure where judged.
pub fn judge_step_figures(scenario: &Scenario, report: &mut Report, judge_timings: bool) {
    let names = scenario.step_figure_names();
    for (k, rule_text) in &scenario.expect {
        let Ok(rule) = Rule::parse(rule_text) else {
            continue;
        };
        if !names.contains(k.as_str()) {
            continue;
        }
        let Some(actual) = report.step_figures.get(k).copied() else {
            if judge_timings {
                report.not_recorded(k, rule_text);
            }
            continue;
        };
        report.judge(k, rule_text, rule, actual, judge_timings);
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectationOutcome {
    pub figure: String,
    pub rule: String,
    pub actual: u64,
    pub ok: bool,
    /// Whether the run was judged by it: an expectation on a timing figure is only reported
    /// unless timings are judged ([`judges_timings`]).
    #[serde(default = "judged_by_default")]
    pub judged: bool,
}

fn judged_by_default() -> bool {
    true
}

/// Figures that measure time on this machine (publish acks missing their deadline, the longest
/// gap between acks): a loaded machine moves them without the software doing anything wrong.
pub const TIMING_FIGURES: &[&str] = &[
    "ack_timeouts",
    "max_ack_gap_ms",
    "ack_timeouts_max_per_publisher",
];

/// How long the consumers get to receive every acknowledged message once the publisher stops.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(30);

pub use crate::timings::{judges_timings, set_judge_timings};

/// The figures of a run whose consumers did not drain before the deadline: what they had not
/// received is undrained, not lost (nobody can tell which it was).
pub fn undrained_unless(drained: bool, mut f: Figures) -> Figures {
    if !drained {
        f.undrained = f.lost;
        f.lost = 0;
        f.lost_by_consumer.clear();
    }
    f
}

/// Per-second traffic counts for the timeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Second {
    pub second: u64,
    pub published: u64,
    pub acked: u64,
    pub delivered: u64,
    pub ack_timeouts: u64,
    pub publish_errors: u64,
    /// Publish-ack latency of the acks of this second (ms): median, 99th percentile, longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_p50_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_p99_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_max_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub scenario: String,
    pub description: String,
    pub backend: String,
    pub started_at: String,
    pub duration_ms: u64,
    pub passed: bool,
    /// Why the run failed, when it did (failed steps, unmet expectations, setup errors).
    pub failures: Vec<String>,
    pub figures: Figures,
    pub expectations: Vec<ExpectationOutcome>,
    pub steps: Vec<StepOutcome>,
    /// Notable events in time order (steps, leader changes, ack timeouts, publish errors).
    pub timeline: Vec<Event>,
    pub per_second: Vec<Second>,
    /// Per server the cluster controller ran: how often it was restarted (lame duck and start
    /// again, or started again after it died).
    #[serde(default)]
    pub server_restarts: BTreeMap<String, u32>,
    /// Per controller the host ran: how often a step restarted it.
    #[serde(default)]
    pub controller_restarts: BTreeMap<String, u32>,
    /// The servers the cluster controller restarted (lame duck, then started under the new
    /// revision), in the order it restarted them.
    #[serde(default)]
    pub server_restart_order: Vec<String>,
    /// The JetStream meta leader once the topology was ready.
    #[serde(default)]
    pub meta_leader_at_start: Option<String>,
    /// Every rollout step the cluster controller took, in order: the figures issue #6 quotes.
    #[serde(default)]
    pub rollout_steps: Vec<RolloutStep>,
    /// The figures the steps recorded (`figure:` on a step), in ms: timings.
    #[serde(default)]
    pub step_figures: BTreeMap<String, u64>,
    /// The counts the steps recorded (`status_growth:` on a `wait_status` step): always judged.
    #[serde(default)]
    pub status_figures: BTreeMap<String, u64>,
    /// Every client of `clients:`: what it published and when the server closed it.
    #[serde(default)]
    pub clients: Vec<ClientReport>,
    /// Where the longest gap between two publish acks fell: (from, to) in ms.
    #[serde(default)]
    pub max_ack_gap: Option<(u64, u64)>,
    /// Every server's life, in time order: started, lame duck, restarted (with its revision),
    /// killed, paused, reloaded.
    #[serde(default)]
    pub servers: Vec<ServerEvent>,
    /// The Kubernetes Events the controllers published during the run (rollout steps, reloads,
    /// refusals), in time order.
    #[serde(default)]
    pub controller_events: Vec<ControllerEvent>,
    /// What the cluster controller's status said of each NatsCluster (its rollout gate, the
    /// server it stepped, each removal's phase), at each change.
    #[serde(default)]
    pub cluster_status: Vec<StatusChange>,
    /// Stream leaders per server, counted from the servers: by each `record_leader_spread`
    /// step, and at the end of the run where an expectation names `stream_leader_spread`.
    #[serde(default)]
    pub stream_leaders: Vec<LeaderCount>,
    /// Each publisher of `publishers` with the figures of its own ledger (`figures` sums them).
    #[serde(default)]
    pub publishers: Vec<super::PublisherReport>,
    /// The scenario's `ratios`: one step figure over another (a timing, never judged).
    #[serde(default)]
    pub ratios: BTreeMap<String, f64>,
    /// What each `read_replicas` step found in each replica's own copy of its stream.
    #[serde(default)]
    pub replicas: Vec<super::ReplicaRead>,
}

/// One server restarted by the cluster controller: when lame duck began, when the server was
/// up under the new revision, and how long the gate held before this step (since the previous
/// step's server was up; none for the first step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RolloutStep {
    pub server: String,
    pub lame_duck_at_ms: u64,
    pub restarted_at_ms: u64,
    /// Lame duck to up again: the time per step.
    pub step_ms: u64,
    pub gate_ms: Option<u64>,
}

/// The rollout steps from the server lifecycle's log, as (at_ms, server, event) in time order.
pub fn rollout_steps(log: &[(u64, String, crate::server::events::LocalEvent)]) -> Vec<RolloutStep> {
    use crate::server::events::LocalEvent;
    let mut out: Vec<RolloutStep> = Vec::new();
    let mut pending: BTreeMap<&str, u64> = BTreeMap::new();
    for (at, server, event) in log {
        match event {
            LocalEvent::LameDuck => {
                pending.insert(server, *at);
            }
            LocalEvent::Restarted => {
                if let Some(ld) = pending.remove(server.as_str()) {
                    let gate_ms = out.last().map(|p| ld.saturating_sub(p.restarted_at_ms));
                    out.push(RolloutStep {
                        server: server.clone(),
                        lame_duck_at_ms: ld,
                        restarted_at_ms: *at,
                        step_ms: at.saturating_sub(ld),
                        gate_ms,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

impl Report {
    /// Records one expectation's outcome: a failure where it is judged and not met.
    pub(super) fn judge(
        &mut self,
        figure: &str,
        rule_text: &str,
        rule: Rule,
        actual: u64,
        judged: bool,
    ) {
        let ok = rule.holds(actual);
        if !ok && judged {
            self.failures.push(format!(
                "expectation {figure} {rule_text} not met: {actual}"
            ));
        }
        self.expectations.push(ExpectationOutcome {
            figure: figure.to_string(),
            rule: rule_text.to_string(),
            actual,
            ok,
            judged,
        });
    }

    /// An expectation whose figure was not recorded: a failure of the run.
    pub(super) fn not_recorded(&mut self, figure: &str, rule_text: &str) {
        self.failures.push(format!(
            "expectation {figure} {rule_text}: the figure was not recorded"
        ));
    }

    /// The human summary.
    pub fn summary(&self) -> String {
        let f = &self.figures;
        let mut s = format!(
            "scenario {} ({} backend): {}\n",
            self.scenario,
            self.backend,
            if self.passed { "PASSED" } else { "FAILED" }
        );
        // A run of clients only has no JetStream traffic to count.
        if f.published > 0 || self.clients.is_empty() {
            s.push_str(&format!(
                "  published {}  acknowledged {}  lost {}  duplicated {}  delivered twice {}  redeliveries {}\n",
                f.published, f.acknowledged, f.lost, f.duplicated, f.delivered_twice, f.redeliveries
            ));
            s.push_str(&format!(
                "  publish-ack timeouts {}  publish errors {}  unacknowledged {}  max ack gap {} ms  leadership changes {}\n",
                f.ack_timeouts, f.publish_errors, f.unacknowledged, f.max_ack_gap_ms, f.leadership_changes
            ));
        }
        if f.undrained > 0 {
            s.push_str(&format!(
                "  undrained {} (acknowledged, not yet delivered when the drain deadline passed)\n",
                f.undrained
            ));
        }
        if !self.step_figures.is_empty() {
            let list: Vec<String> = self
                .step_figures
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            s.push_str(&format!("  figures from steps (ms): {}\n", list.join(", ")));
        }
        if !self.status_figures.is_empty() {
            let list: Vec<String> = self
                .status_figures
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            s.push_str(&format!("  counts from steps: {}\n", list.join(", ")));
        }
        if !self.ratios.is_empty() {
            let list: Vec<String> = self
                .ratios
                .iter()
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect();
            s.push_str(&format!("  ratios: {}\n", list.join(", ")));
        }
        for p in &self.publishers {
            let f = &p.figures;
            s.push_str(&format!(
                "  publisher {} ({}, {}): published {}  acknowledged {}  lost {}  duplicated {}  unacknowledged {}  ack timeouts {}  max ack gap {} ms\n",
                p.name,
                p.account.as_deref().unwrap_or("-"),
                p.stream,
                f.published,
                f.acknowledged,
                f.lost,
                f.duplicated,
                f.unacknowledged,
                f.ack_timeouts,
                f.max_ack_gap_ms
            ));
        }
        for c in &self.clients {
            s.push_str(&format!("  {}\n", c.summary()));
        }
        for c in &self.stream_leaders {
            s.push_str(&format!(
                "  stream leaders ({}, at {:.1} s): {}\n",
                c.figure,
                c.at_ms as f64 / 1000.0,
                c.describe()
            ));
        }
        for r in &self.replicas {
            s.push_str(&format!("  replica {}\n", r.describe()));
        }
        for e in &self.expectations {
            s.push_str(&format!(
                "  expect {} {}: {} ({})\n",
                e.figure,
                e.rule,
                e.actual,
                match (e.ok, e.judged) {
                    (true, _) => "ok",
                    (false, true) => "NOT MET",
                    (false, false) => "not met; a timing, reported but not judged in this run",
                }
            ));
        }
        if !self.server_restart_order.is_empty() {
            s.push_str(&format!(
                "  restart order: {} (meta leader at start: {})\n",
                self.server_restart_order.join(" -> "),
                self.meta_leader_at_start.as_deref().unwrap_or("-")
            ));
        }
        for st in &self.rollout_steps {
            s.push_str(&format!(
                "  rollout step {}: lame duck at {:.1} s, up after {} ms{}\n",
                st.server,
                st.lame_duck_at_ms as f64 / 1000.0,
                st.step_ms,
                st.gate_ms
                    .map(|g| format!(", gate held {g} ms before it"))
                    .unwrap_or_default()
            ));
        }
        if !self.server_restarts.is_empty() {
            let list: Vec<String> = self
                .server_restarts
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            s.push_str(&format!("  server restarts: {}\n", list.join(", ")));
        }
        for fl in &self.failures {
            s.push_str(&format!("  failure: {fl}\n"));
        }
        s.push_str(&format!(
            "  took {:.1} s\n",
            self.duration_ms as f64 / 1000.0
        ));
        s
    }

    /// Writes `<dir>/<scenario>-<timestamp>/report.json`, `summary.txt` and `report.html`;
    /// returns the folder.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, ScenarioError> {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
        let out = dir.join(format!("{}-{stamp}", self.scenario));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ScenarioError::Report { path, source }
        };
        std::fs::create_dir_all(&out).map_err(io(&out))?;
        let json =
            serde_json::to_string_pretty(self).map_err(|e| io(&out)(std::io::Error::other(e)))?;
        std::fs::write(out.join("report.json"), json).map_err(io(&out.join("report.json")))?;
        std::fs::write(out.join("summary.txt"), self.summary())
            .map_err(io(&out.join("summary.txt")))?;
        super::html::write(self, &out)?;
        Ok(out)
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn finish(
    scenario: &Scenario,
    backend: &str,
    started_at: String,
    clock: std::time::Instant,
    (events, figures): (Vec<Event>, Figures),
    mut failures: Vec<String>,
    steps: Vec<StepOutcome>,
) -> Report {
    let judge_timings = judges_timings();
    let mut expectations = Vec::new();
    for (k, rule_text) in &scenario.expect {
        // validate() guarantees both parse.
        let (Some(actual), Ok(rule)) = (figure(&figures, k), Rule::parse(rule_text)) else {
            continue;
        };
        let ok = rule.holds(actual);
        let judged = judge_timings || !TIMING_FIGURES.contains(&k.as_str());
        if !ok && judged {
            failures.push(format!("expectation {k} {rule_text} not met: {actual}"));
        }
        expectations.push(ExpectationOutcome {
            figure: k.clone(),
            rule: rule_text.clone(),
            actual,
            ok,
            judged,
        });
    }
    let mut per_second: Vec<Second> = Vec::new();
    let mut timeline = Vec::new();
    for e in &events {
        let sec = e.at_ms() / 1000;
        while per_second.len() as u64 <= sec {
            let n = per_second.len() as u64;
            per_second.push(Second {
                second: n,
                ..Default::default()
            });
        }
        let b = &mut per_second[sec as usize];
        match e {
            Event::Publish { attempt: 1, .. } => b.published += 1,
            Event::Publish { .. } => {}
            Event::Ack { .. } => b.acked += 1,
            Event::Delivery { .. } => b.delivered += 1,
            Event::AckTimeout { .. } => {
                b.ack_timeouts += 1;
                timeline.push(e.clone());
            }
            Event::PublishError { .. } => {
                b.publish_errors += 1;
                // The per-second counts carry the volume; the timeline keeps the first few.
                if b.publish_errors <= 3 {
                    timeline.push(e.clone());
                }
            }
            Event::GaveUp { .. }
            | Event::Leader { .. }
            | Event::MetaLeader { .. }
            | Event::Step { .. } => timeline.push(e.clone()),
        }
    }
    timeline.sort_by_key(Event::at_ms);
    for (sec, (p50, p99, max)) in ack_latency_per_second(&events) {
        if let Some(b) = per_second.get_mut(sec as usize) {
            (b.ack_p50_ms, b.ack_p99_ms, b.ack_max_ms) = (Some(p50), Some(p99), Some(max));
        }
    }
    Report {
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        backend: backend.to_string(),
        started_at,
        duration_ms: clock.elapsed().as_millis() as u64,
        passed: failures.is_empty(),
        failures,
        figures,
        expectations,
        steps,
        timeline,
        per_second,
        server_restarts: BTreeMap::new(),
        controller_restarts: BTreeMap::new(),
        server_restart_order: Vec::new(),
        meta_leader_at_start: None,
        rollout_steps: Vec::new(),
        step_figures: BTreeMap::new(),
        status_figures: BTreeMap::new(),
        clients: Vec::new(),
        max_ack_gap: max_ack_gap(&events),
        servers: Vec::new(),
        controller_events: Vec::new(),
        cluster_status: Vec::new(),
        stream_leaders: Vec::new(),
        replicas: Vec::new(),
        publishers: Vec::new(),
        ratios: BTreeMap::new(),
    }
}

/// The scenario's `ratios` over the recorded step figures: `of / to`, where both were
/// recorded and `to` is not 0.
pub fn ratios(
    declared: &BTreeMap<String, [String; 2]>,
    figures: &BTreeMap<String, u64>,
) -> BTreeMap<String, f64> {
    declared
        .iter()
        .filter_map(|(name, [of, to])| {
            let (a, b) = (figures.get(of)?, figures.get(to)?);
            (*b > 0).then(|| (name.clone(), *a as f64 / *b as f64))
        })
        .collect()
}

/// Expectations on the rollout, judged once the report holds it.
pub(super) fn judge_rollout_expectations(scenario: &super::Scenario, report: &mut Report) {
    for (k, rule_text) in &scenario.expect {
        let (Some(actual), Ok(rule)) = (rollout_figure(report, k), super::Rule::parse(rule_text))
        else {
            continue;
        };
        report.judge(k, rule_text, rule, actual, true);
    }
}
