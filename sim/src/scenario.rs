//! Scenarios as data: a YAML file under `scenarios/` naming a topology, a workload, timed steps and
//! expectations; a runner that prints a progress line per step; a report (human summary + JSON).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendError, Deployment, Fault};
use crate::controlled::{self, Controlled};
use crate::host::{Host, ObjectRef};
use crate::ledger::{Event, Figures, Ledger};
use crate::topology::{ClusterSpec, GatewayMode, LeafSpec, TopologySpec};
use crate::traffic::{self, ConsumerSpec, PublisherSpec};

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("reading scenario file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("scenario file {path} is not valid: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("scenario {name}: {message}")]
    Invalid { name: String, message: String },
    #[error("no scenario named {name} in {dir}")]
    NotFound { name: String, dir: PathBuf },
    #[error("scenario {name}: {source}")]
    Backend {
        name: String,
        #[source]
        source: BackendError,
    },
    #[error("scenario {name}: starting the host (kube-apiserver and controllers): {message}")]
    Host { name: String, message: String },
    #[error("scenario {name}: setting up the workload: {message}")]
    Workload { name: String, message: String },
    #[error("writing the report to {path}: {source}")]
    Report {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub topology: TopologyDecl,
    pub workload: Workload,
    #[serde(default)]
    pub steps: Vec<Step>,
    /// The controllers the host runs when a step or the topology needs them (default: every
    /// controller the host knows, see `host::controllers`).
    #[serde(default)]
    pub controllers: Option<Vec<String>>,
    /// Namespaces the host creates before anything is applied (default: `nats`).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Figure name → rule (`"== 0"`, `"<= 1"`, `">= 1"`; a bare number means `==`).
    #[serde(default)]
    pub expect: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyDecl {
    #[serde(default = "one")]
    pub clusters: usize,
    /// Servers per cluster of a sim topology; 0 with `nats_clusters`.
    #[serde(default)]
    pub servers: usize,
    /// Manifests (paths from the workspace root) holding NatsClusters: the topology is then
    /// what the cluster controller starts from them on the local server lifecycle. Inside a
    /// manifest `${<name>.gateway}`, `${<name>.leafnodes}`, `${<name>.client}` and
    /// `${<name>.clients}` name the ports of any NatsCluster of the scenario.
    #[serde(default)]
    pub nats_clusters: Vec<String>,
    /// `generated`: the sim signs trust roots for NatsClusters under an operator (see
    /// [`crate::trust`]); the manifests name them as `${trust.*}` and the traffic connects as
    /// the workload account's user.
    #[serde(default)]
    pub trust: Option<TrustDecl>,
    #[serde(default)]
    pub gateways: Option<GatewayDecl>,
    #[serde(default)]
    pub leafs: Vec<LeafSpecDecl>,
    #[serde(default)]
    pub version: Option<String>,
}

fn one() -> usize {
    1
}

/// Where the trust roots of a NatsCluster topology come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustDecl {
    /// Signed by the sim for this run.
    Generated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatewayDecl {
    Explicit,
    Gossip,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeafSpecDecl {
    pub name: String,
    pub domain: String,
    pub hub: String,
}

impl TopologyDecl {
    pub fn to_spec(&self) -> TopologySpec {
        let mut spec = TopologySpec::cluster(self.servers);
        spec.clusters = (1..=self.clusters)
            .map(|i| ClusterSpec {
                name: format!("c{i}"),
                servers: self.servers,
                tags: Vec::new(),
            })
            .collect();
        spec.gateways = self.gateways.map(|g| match g {
            GatewayDecl::Explicit => GatewayMode::Explicit,
            GatewayDecl::Gossip => GatewayMode::Gossip,
        });
        spec.leafs = self
            .leafs
            .iter()
            .map(|l| LeafSpec {
                name: l.name.clone(),
                domain: l.domain.clone(),
                hub: l.hub.clone(),
            })
            .collect();
        spec.cuttable_links = spec.gateways.is_some() || !spec.leafs.is_empty();
        if let Some(v) = &self.version {
            spec.version = v.clone();
        }
        spec
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    #[serde(default)]
    pub streams: Vec<StreamDecl>,
    pub publisher: Option<PublisherDecl>,
    #[serde(default)]
    pub consumers: Vec<ConsumerSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamDecl {
    pub name: String,
    pub subjects: Vec<String>,
    #[serde(default = "one")]
    pub replicas: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublisherDecl {
    /// The stream whose leader the ledger watches.
    pub stream: String,
    #[serde(flatten)]
    pub spec: PublisherSpec,
}

/// A timed step: `at` is measured from the start of the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    #[serde(with = "crate::duration")]
    pub at: Duration,
    #[serde(flatten)]
    pub action: Action,
}

/// What a step does. Servers are named (`c1-0`) or chosen: `stream-leader:<stream>`,
/// `stream-follower:<stream>`, `meta-leader`, `last-faulted`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    Kill9 {
        server: String,
    },
    Sigterm {
        server: String,
    },
    LameDuck {
        server: String,
    },
    Pause {
        server: String,
    },
    Resume {
        server: String,
    },
    Restart {
        server: String,
    },
    WipeStore {
        server: String,
    },
    /// Appends raw config text to the server's config and reloads it.
    Reload {
        server: String,
        append: String,
    },
    CutGateway {
        a: String,
        b: String,
    },
    RestoreGateway {
        a: String,
        b: String,
    },
    CutLeaf {
        leaf: String,
    },
    RestoreLeaf {
        leaf: String,
    },
    WaitMetaLeader {
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    WaitStreamLeader {
        stream: String,
        /// A server selector the new leader must differ from (e.g. `last-faulted` after a lame duck,
        /// which still answers for a few milliseconds as leader).
        #[serde(default)]
        other_than: Option<String>,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    WaitHealthz {
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    // Steps that need the controllers (they plug in here when the controller issues land).
    ApplyManifest {
        path: String,
    },
    Annotate {
        object: String,
        annotation: String,
    },
    WaitCondition {
        object: String,
        condition: String,
        /// Text the condition's message must contain, if any.
        #[serde(default)]
        message: Option<String>,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    RestartController {
        controller: String,
    },
    /// Applies a manifest holding NatsClusters and waits until the cluster controller has
    /// every server of each running and healthy on the local lifecycle.
    ApplyNatsCluster {
        path: String,
        #[serde(with = "crate::duration", default = "default_cluster_wait")]
        timeout: Duration,
    },
    /// Waits until the cluster controller has restarted server `server` (lame duck, then
    /// started under a new revision) since the scenario began: a step that follows a rollout.
    WaitServerRestarted {
        server: String,
        #[serde(with = "crate::duration", default = "default_cluster_wait")]
        timeout: Duration,
    },
}

fn default_cluster_wait() -> Duration {
    Duration::from_secs(180)
}

fn default_wait() -> Duration {
    Duration::from_secs(30)
}

impl Action {
    /// Whether the step needs the host (kube-apiserver and controllers).
    pub fn needs_controllers(&self) -> bool {
        matches!(
            self,
            Action::ApplyManifest { .. }
                | Action::Annotate { .. }
                | Action::WaitCondition { .. }
                | Action::RestartController { .. }
                | Action::ApplyNatsCluster { .. }
                | Action::WaitServerRestarted { .. }
        )
    }

    pub fn describe(&self) -> String {
        match self {
            Action::Kill9 { server } => format!("kill -9 {server}"),
            Action::Sigterm { server } => format!("SIGTERM {server}"),
            Action::LameDuck { server } => format!("lame duck {server}"),
            Action::Pause { server } => format!("SIGSTOP {server}"),
            Action::Resume { server } => format!("SIGCONT {server}"),
            Action::Restart { server } => format!("restart {server} on its store"),
            Action::WipeStore { server } => format!("wipe the store of {server}"),
            Action::Reload { server, .. } => format!("edit config of {server} and reload"),
            Action::CutGateway { a, b } => format!("cut gateway {a} <-> {b}"),
            Action::RestoreGateway { a, b } => format!("restore gateway {a} <-> {b}"),
            Action::CutLeaf { leaf } => format!("cut leaf link of {leaf}"),
            Action::RestoreLeaf { leaf } => format!("restore leaf link of {leaf}"),
            Action::WaitMetaLeader { .. } => "wait for a meta leader with all peers".into(),
            Action::WaitStreamLeader { stream, .. } => format!("wait for a leader of {stream}"),
            Action::WaitHealthz { .. } => "wait for healthz on every server".into(),
            Action::ApplyManifest { path } => format!("apply manifest {path}"),
            Action::Annotate { object, annotation } => format!("annotate {object} {annotation}"),
            Action::WaitCondition {
                object,
                condition,
                message,
                ..
            } => match message {
                Some(m) => format!("wait for {object} condition {condition} saying {m:?}"),
                None => format!("wait for {object} condition {condition}"),
            },
            Action::RestartController { controller } => format!("restart controller {controller}"),
            Action::ApplyNatsCluster { path, .. } => format!("apply NatsCluster manifest {path}"),
            Action::WaitServerRestarted { server, .. } => {
                format!("wait until the controller restarted {server}")
            }
        }
    }
}

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
/// restarted was the meta leader at the start, else 0).
pub const ROLLOUT_FIGURES: &[&str] = &[
    "rollout_restarts_max",
    "rollout_restarts_min",
    "meta_leader_restarted_last",
];

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
        _ => return None,
    })
}

impl Scenario {
    pub fn from_yaml(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = serde_yaml::from_str(text).map_err(|source| ScenarioError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        s.validate()?;
        Ok(s)
    }

    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Scenario::from_yaml(path, &text)
    }

    fn invalid(&self, message: String) -> ScenarioError {
        ScenarioError::Invalid {
            name: self.name.clone(),
            message,
        }
    }

    pub fn validate(&self) -> Result<(), ScenarioError> {
        for (k, v) in &self.expect {
            if figure(&Figures::default(), k).is_none() && !ROLLOUT_FIGURES.contains(&k.as_str()) {
                return Err(self.invalid(format!("expectation on unknown figure {k:?}")));
            }
            Rule::parse(v).map_err(|e| self.invalid(format!("expectation {k}: {e}")))?;
        }
        let mut last = Duration::ZERO;
        for s in &self.steps {
            if s.at < last {
                return Err(self.invalid(format!(
                    "steps must be in time order ({} comes after a later step)",
                    s.action.describe()
                )));
            }
            last = s.at;
        }
        let sim_topology = self.topology.servers > 0 && self.topology.clusters > 0;
        let nats_clusters = !self.topology.nats_clusters.is_empty();
        if sim_topology == nats_clusters {
            return Err(self.invalid(
                "the topology needs either servers (a sim topology) or nats_clusters (manifests), not both"
                    .into(),
            ));
        }
        if self.topology.trust.is_some() && !nats_clusters {
            return Err(self.invalid(
                "topology.trust signs trust roots for nats_clusters manifests; a sim topology has its own"
                    .into(),
            ));
        }
        if let Some(c) = &self.controllers {
            let known = crate::host::controllers();
            if let Some(bad) = c.iter().find(|c| !known.contains_key(c.as_str())) {
                return Err(self.invalid(format!("no controller named {bad:?}")));
            }
        }
        Ok(())
    }

    /// Whether the run needs the host: a controller step, or NatsClusters as the topology.
    pub fn needs_host(&self) -> bool {
        !self.topology.nats_clusters.is_empty()
            || self.steps.iter().any(|s| s.action.needs_controllers())
    }
}

/// The directory a scenario's manifest paths are relative to: the workspace root.
pub fn workspace_root() -> PathBuf {
    let sim_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    sim_dir.parent().unwrap_or(sim_dir).to_path_buf()
}

fn manifest_path(path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        workspace_root().join(p)
    }
}

/// The scenarios directory: `$SIM_SCENARIOS`, else `scenarios/` of the workspace.
pub fn scenarios_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SIM_SCENARIOS") {
        return PathBuf::from(d);
    }
    let sim_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    sim_dir.parent().unwrap_or(sim_dir).join("scenarios")
}

/// Every scenario file in `dir`, sorted by name.
pub fn list(dir: &Path) -> Result<Vec<(String, Scenario)>, ScenarioError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ScenarioError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            let s = Scenario::load(&p)?;
            out.push((s.name.clone(), s));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Finds the scenario `name` in `dir` (file `<name>.yaml`).
pub fn find(dir: &Path, name: &str) -> Result<Scenario, ScenarioError> {
    for ext in ["yaml", "yml"] {
        let p = dir.join(format!("{name}.{ext}"));
        if p.exists() {
            return Scenario::load(&p);
        }
    }
    Err(ScenarioError::NotFound {
        name: name.to_string(),
        dir: dir.to_path_buf(),
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
pub const TIMING_FIGURES: &[&str] = &["ack_timeouts", "max_ack_gap_ms"];

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

/// The rollout steps from the lifecycle's log, as (at_ms, server, event) in time order.
pub fn rollout_steps(
    log: &[(
        u64,
        String,
        cluster_controller::lifecycle::local::LocalEvent,
    )],
) -> Vec<RolloutStep> {
    use cluster_controller::lifecycle::local::LocalEvent;
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
    /// The human summary.
    pub fn summary(&self) -> String {
        let f = &self.figures;
        let mut s = format!(
            "scenario {} ({} backend): {}\n",
            self.scenario,
            self.backend,
            if self.passed { "PASSED" } else { "FAILED" }
        );
        s.push_str(&format!(
            "  published {}  acknowledged {}  lost {}  duplicated {}  delivered twice {}  redeliveries {}\n",
            f.published, f.acknowledged, f.lost, f.duplicated, f.delivered_twice, f.redeliveries
        ));
        s.push_str(&format!(
            "  publish-ack timeouts {}  publish errors {}  unacknowledged {}  max ack gap {} ms  leadership changes {}\n",
            f.ack_timeouts, f.publish_errors, f.unacknowledged, f.max_ack_gap_ms, f.leadership_changes
        ));
        if f.undrained > 0 {
            s.push_str(&format!(
                "  undrained {} (acknowledged, not yet delivered when the drain deadline passed)\n",
                f.undrained
            ));
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

    /// Writes `<dir>/<scenario>-<timestamp>/report.json` and `summary.txt`; returns the folder.
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
        Ok(out)
    }
}

/// Where progress lines go (stdout for the CLI, captured in tests).
pub type Progress<'a> = &'a mut (dyn FnMut(&str) + Send);

/// Runs a scenario on `backend`; the report says whether it passed.
pub async fn run(
    scenario: &Scenario,
    backend: &dyn Backend,
    progress: Progress<'_>,
) -> Result<Report, ScenarioError> {
    let started_at = chrono::Utc::now().to_rfc3339();
    let clock = std::time::Instant::now();
    let name = scenario.name.clone();
    let ledger = Ledger::new();
    let mut failures = Vec::new();
    let mut steps_out = Vec::new();
    let line = |t: u64, text: &str| format!("[{:>6.1}s] {text}", t as f64 / 1000.0);

    let host_err = |message: String| ScenarioError::Host {
        name: name.clone(),
        message,
    };
    let mut ctx = StepContext::default();
    if scenario.needs_host() {
        if backend.name() != "local" {
            return Err(host_err(format!(
                "controller steps and NatsCluster topologies run on the local backend only, not {}",
                backend.name()
            )));
        }
        let namespaces: Vec<&str> = if scenario.namespaces.is_empty() {
            vec![crate::host::DEFAULT_NAMESPACE]
        } else {
            scenario.namespaces.iter().map(String::as_str).collect()
        };
        let known = crate::host::controllers();
        let controllers: Vec<&str> = match &scenario.controllers {
            Some(c) => c.iter().map(String::as_str).collect(),
            None => known.keys().copied().collect(),
        };
        progress(&line(
            ledger.now_ms(),
            &format!(
                "starting kube-apiserver and the {} controller(s) in-process",
                controllers.join(", ")
            ),
        ));
        let host = Host::start(&namespaces, &controllers)
            .await
            .map_err(|e| host_err(e.to_string()))?;
        ctx.host = Some(Arc::new(host));
    }

    // The workload user's creds when the sim signed the trust roots.
    let mut workload_creds: Option<String> = None;
    let mut dep: Box<dyn Deployment> = if scenario.topology.nats_clusters.is_empty() {
        let spec = scenario.topology.to_spec();
        progress(&line(
            0,
            &format!(
                "starting {} cluster(s) × {} server(s){}{} on the {} backend",
                spec.clusters.len(),
                scenario.topology.servers,
                spec.gateways
                    .map(|g| format!(", gateways {g:?}"))
                    .unwrap_or_default(),
                if spec.leafs.is_empty() {
                    String::new()
                } else {
                    format!(", {} leaf(s)", spec.leafs.len())
                },
                backend.name()
            ),
        ));
        backend
            .start(&spec)
            .await
            .map_err(|source| ScenarioError::Backend {
                name: name.clone(),
                source,
            })?
    } else {
        let host = ctx.host.clone().ok_or_else(|| host_err("no host".into()))?;
        if scenario.topology.trust == Some(TrustDecl::Generated) {
            let trust = crate::trust::generate().map_err(&host_err)?;
            ctx.vars.extend(trust.vars.clone());
            workload_creds = Some(trust.workload_creds);
            progress(&line(
                ledger.now_ms(),
                "trust roots signed: operator, system account, workload account APP",
            ));
        }
        let mut applied = Vec::new();
        // Every NatsCluster's ports first, so one manifest can name another's.
        let paths: Vec<PathBuf> = scenario
            .topology
            .nats_clusters
            .iter()
            .map(|p| manifest_path(p))
            .collect();
        for p in &paths {
            applied.extend(ctx.reserve(p).map_err(|e| host_err(e.to_string()))?);
        }
        for p in &paths {
            progress(&line(
                ledger.now_ms(),
                &format!("applying NatsCluster manifest {}", p.display()),
            ));
            host.apply_manifest(p, &ctx.vars)
                .await
                .map_err(|e| host_err(e.to_string()))?;
        }
        for (ns, n) in &applied {
            controlled::wait_servers(&host, ns, n, default_cluster_wait())
                .await
                .map_err(&host_err)?;
            progress(&line(
                ledger.now_ms(),
                &format!("NatsCluster {ns}/{n}: every server running"),
            ));
        }
        Box::new(Controlled::new(host, &applied).await.map_err(&host_err)?)
    };
    ctx.vars.insert(
        "servers".into(),
        serde_json::to_string(&dep.client_urls()).unwrap_or_default(),
    );
    let meta = dep
        .meta_leader(Duration::from_secs(30))
        .await
        .map_err(|source| ScenarioError::Backend {
            name: name.clone(),
            source,
        })?;
    progress(&line(
        ledger.now_ms(),
        &format!("topology ready, meta leader {meta}"),
    ));

    let addrs: Vec<async_nats::ServerAddr> = dep
        .client_urls()
        .iter()
        .filter_map(|u| u.parse().ok())
        .collect();
    let workload_err = |message: String| ScenarioError::Workload {
        name: name.clone(),
        message,
    };
    let options = match &workload_creds {
        Some(creds) => async_nats::ConnectOptions::with_credentials(creds)
            .map_err(|e| workload_err(format!("the workload user's creds: {e}")))?,
        None => async_nats::ConnectOptions::new(),
    };
    let client = options
        .retry_on_initial_connect()
        .connect(addrs)
        .await
        .map_err(|e| workload_err(e.to_string()))?;
    let js = jetstream::new(client);
    for st in &scenario.workload.streams {
        let cfg = jetstream::stream::Config {
            name: st.name.clone(),
            subjects: st.subjects.clone(),
            num_replicas: st.replicas,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        };
        crate::wait::poll(
            &format!("stream {} created", st.name),
            Duration::from_secs(30),
            || async {
                js.get_or_create_stream(cfg.clone())
                    .await
                    .map(Some)
                    .map_err(|e| e.to_string())
            },
        )
        .await
        .map_err(|e| workload_err(e.to_string()))?;
        let leader = dep
            .stream_leader(&st.name, Duration::from_secs(30))
            .await
            .map_err(|source| ScenarioError::Backend {
                name: name.clone(),
                source,
            })?;
        progress(&line(
            ledger.now_ms(),
            &format!("stream {} R{} led by {leader}", st.name, st.replicas),
        ));
    }

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut consumer_tasks = Vec::new();
    for c in &scenario.workload.consumers {
        let h = traffic::spawn_consumer(js.clone(), c.clone(), ledger.clone(), stop_rx.clone())
            .await
            .map_err(|e| workload_err(e.to_string()))?;
        consumer_tasks.push(h);
    }
    let consumer_names: Vec<String> = scenario
        .workload
        .consumers
        .iter()
        .map(|c| c.name.clone())
        .collect();
    let mut watch_task = None;
    let mut publisher = None;
    let workload_start = ledger.now_ms();
    if let Some(p) = &scenario.workload.publisher {
        watch_task = Some(traffic::spawn_leader_watch(
            js.clone(),
            p.stream.clone(),
            ledger.clone(),
            stop_rx.clone(),
        ));
        progress(&line(
            ledger.now_ms(),
            &format!(
                "publishing {} msg/s to {} for {:.0} s",
                p.spec.rate,
                p.spec.subject,
                p.spec.duration.as_secs_f64()
            ),
        ));
        publisher = Some(traffic::spawn_publisher(
            js.clone(),
            p.spec.clone(),
            ledger.clone(),
        ));
    }

    let mut last_faulted: Option<String> = None;
    for (i, step) in scenario.steps.iter().enumerate() {
        let due = workload_start + step.at.as_millis() as u64;
        let now = ledger.now_ms();
        if due > now {
            tokio::time::sleep(Duration::from_millis(due - now)).await;
        }
        let t0 = ledger.now_ms();
        ledger.step(format!("step {}: {}", i + 1, step.action.describe()));
        let result = run_step(dep.as_mut(), &step.action, &mut last_faulted, &mut ctx).await;
        let took = ledger.now_ms() - t0;
        let (ok, target, error) = match result {
            Ok(target) => (true, target, None),
            Err(e) => (false, None, Some(e)),
        };
        progress(&line(
            t0,
            &format!(
                "step {}/{} {}{}: {} ({} ms)",
                i + 1,
                scenario.steps.len(),
                step.action.describe(),
                target
                    .as_ref()
                    .map(|t| format!(" -> {t}"))
                    .unwrap_or_default(),
                match &error {
                    None => "ok".to_string(),
                    Some(e) => format!("FAILED: {e}"),
                },
                took
            ),
        ));
        if let Some(e) = &error {
            failures.push(format!(
                "step {} ({}) failed: {e}",
                i + 1,
                step.action.describe()
            ));
        }
        steps_out.push(StepOutcome {
            index: i + 1,
            at_ms: t0,
            action: step.action.describe(),
            target,
            ok,
            error,
            took_ms: took,
        });
    }

    if let Some(p) = publisher {
        let _ = p.await;
        progress(&line(ledger.now_ms(), "publisher done"));
    }
    let mut drained = true;
    if !consumer_names.is_empty() {
        match traffic::wait_drained(&ledger, &consumer_names, DRAIN_DEADLINE).await {
            Ok(()) => progress(&line(ledger.now_ms(), "consumers drained")),
            Err(e) => {
                drained = false;
                progress(&line(
                    ledger.now_ms(),
                    &format!("consumers not drained: {e}"),
                ));
                failures.push(format!(
                    "consumers not drained {}s after the publisher stopped: {e} (counted as undrained, not lost)",
                    DRAIN_DEADLINE.as_secs()
                ));
            }
        }
    }
    let _ = stop_tx.send(true);
    for h in consumer_tasks {
        let _ = h.await;
    }
    if let Some(w) = watch_task {
        let _ = w.await;
    }
    let backend_name = dep.backend();
    let restarts = ctx.restarts().await;
    let mut restart_order = Vec::new();
    let mut log = Vec::new();
    if let Some(host) = &ctx.host {
        use cluster_controller::lifecycle::local::LocalEvent;
        // The servers' lives go into the timeline beside the steps and the traffic.
        for e in host.lifecycle().events() {
            let at_ms = ledger
                .now_ms()
                .saturating_sub(e.at.elapsed().as_millis() as u64);
            ledger.record(Event::Step {
                at_ms,
                text: format!("server {} {:?}", e.server, e.event),
            });
            if e.event == LocalEvent::Restarted {
                restart_order.push(e.server.clone());
            }
            log.push((at_ms, e.server, e.event));
        }
    }
    drop(dep);
    let mut report = finish(
        scenario,
        backend_name,
        started_at,
        clock,
        &ledger,
        (&consumer_names, drained),
        failures,
        steps_out,
    );
    (report.server_restarts, report.controller_restarts) = restarts;
    report.server_restart_order = restart_order;
    report.meta_leader_at_start = Some(meta);
    report.rollout_steps = rollout_steps(&log);
    // Expectations on the rollout are judged once the report holds it.
    for (k, rule_text) in &scenario.expect {
        let (Some(actual), Ok(rule)) = (rollout_figure(&report, k), Rule::parse(rule_text)) else {
            continue;
        };
        let ok = rule.holds(actual);
        if !ok {
            report
                .failures
                .push(format!("expectation {k} {rule_text} not met: {actual}"));
        }
        report.expectations.push(ExpectationOutcome {
            figure: k.clone(),
            rule: rule_text.clone(),
            actual,
            ok,
            judged: true,
        });
    }
    report.passed = report.failures.is_empty();
    Ok(report)
}

/// What controller steps share: the host, the manifests' variables, the NatsClusters applied.
#[derive(Default)]
struct StepContext {
    host: Option<Arc<Host>>,
    vars: BTreeMap<String, String>,
    /// (namespace, name) of every NatsCluster the scenario applied.
    clusters: Vec<(String, String)>,
}

impl StepContext {
    fn host(&self) -> Result<&Arc<Host>, String> {
        self.host
            .as_ref()
            .ok_or_else(|| "the host is not running".to_string())
    }

    /// Reserves the ports of the manifest's NatsClusters and records them and their variables.
    fn reserve(&mut self, path: &Path) -> Result<Vec<(String, String)>, String> {
        let host = self.host()?.clone();
        let found = controlled::reserve(&host, path).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for (cluster, vars) in found {
            self.vars.extend(vars);
            if !self.clusters.contains(&cluster) {
                self.clusters.push(cluster.clone());
            }
            out.push(cluster);
        }
        Ok(out)
    }

    /// Per server of every NatsCluster applied, its restarts; per controller, its restarts.
    async fn restarts(&self) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
        use cluster_controller::lifecycle::ServerLifecycle;
        let mut servers = BTreeMap::new();
        let mut controllers = BTreeMap::new();
        let Some(host) = &self.host else {
            return (servers, controllers);
        };
        for (ns, name) in &self.clusters {
            let Ok(cluster) = controlled::read_cluster(host, ns, name).await else {
                continue;
            };
            if let Ok(observed) = host.lifecycle().observe(&cluster).await {
                for o in observed {
                    servers.insert(o.server_name, o.restarts);
                }
            }
        }
        for c in host.controller_names() {
            controllers.insert(c.clone(), host.controller_restarts(&c).unwrap_or(0));
        }
        (servers, controllers)
    }
}

#[allow(clippy::too_many_arguments)]
fn finish(
    scenario: &Scenario,
    backend: &str,
    started_at: String,
    clock: std::time::Instant,
    ledger: &Ledger,
    (consumers, drained): (&[String], bool),
    mut failures: Vec<String>,
    steps: Vec<StepOutcome>,
) -> Report {
    let events = ledger.events();
    let figures = undrained_unless(drained, crate::ledger::figures(&events, consumers));
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
            Event::GaveUp { .. } | Event::Leader { .. } | Event::Step { .. } => {
                timeline.push(e.clone())
            }
        }
    }
    timeline.sort_by_key(Event::at_ms);
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
    }
}

/// Resolves a server selector against the deployment.
async fn resolve(
    dep: &dyn Deployment,
    selector: &str,
    last_faulted: &Option<String>,
) -> Result<String, String> {
    if selector == "last-faulted" {
        return last_faulted
            .clone()
            .ok_or_else(|| "no server was faulted yet".to_string());
    }
    if selector == "meta-leader" {
        return dep
            .meta_leader(Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string());
    }
    if let Some(stream) = selector.strip_prefix("stream-leader:") {
        return dep
            .stream_leader(stream, Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string());
    }
    if let Some(stream) = selector.strip_prefix("stream-follower:") {
        let leader = dep
            .stream_leader(stream, Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string())?;
        return dep
            .server_names()
            .into_iter()
            .find(|n| *n != leader)
            .ok_or_else(|| format!("stream {stream} has no follower"));
    }
    if dep.server_names().iter().any(|n| n == selector) {
        return Ok(selector.to_string());
    }
    Err(format!("no server matches {selector:?}"))
}

async fn run_step(
    dep: &mut dyn Deployment,
    action: &Action,
    last_faulted: &mut Option<String>,
    ctx: &mut StepContext,
) -> Result<Option<String>, String> {
    let (selector, f) = match action {
        Action::Kill9 { server } => (server, Fault::Kill9),
        Action::Sigterm { server } => (server, Fault::Sigterm),
        Action::LameDuck { server } => (server, Fault::LameDuck),
        Action::Pause { server } => (server, Fault::Pause),
        Action::Resume { server } => (server, Fault::Resume),
        Action::Restart { server } => (server, Fault::Restart),
        Action::WipeStore { server } => (server, Fault::WipeStore),
        Action::Reload { server, append } => {
            let s = resolve(dep, server, last_faulted).await?;
            dep.reload_with(&s, append)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(Some(s));
        }
        Action::CutGateway { a, b } => {
            dep.gateway_link(a, b, true)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(None);
        }
        Action::RestoreGateway { a, b } => {
            dep.gateway_link(a, b, false)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(None);
        }
        Action::CutLeaf { leaf } => {
            dep.leaf_link(leaf, true).await.map_err(|e| e.to_string())?;
            return Ok(None);
        }
        Action::RestoreLeaf { leaf } => {
            dep.leaf_link(leaf, false)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(None);
        }
        Action::WaitMetaLeader { timeout } => {
            return dep
                .meta_leader(*timeout)
                .await
                .map(Some)
                .map_err(|e| e.to_string());
        }
        Action::WaitStreamLeader {
            stream,
            other_than,
            timeout,
        } => {
            let avoid = match other_than {
                Some(sel) => Some(resolve(dep, sel, last_faulted).await?),
                None => None,
            };
            let deadline = tokio::time::Instant::now() + *timeout;
            loop {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let leader = dep
                    .stream_leader(stream, left)
                    .await
                    .map_err(|e| e.to_string())?;
                if avoid.as_deref() != Some(leader.as_str()) {
                    return Ok(Some(leader));
                }
                if left.is_zero() {
                    return Err(format!("{stream} is still led by {leader}"));
                }
                tokio::time::sleep(crate::wait::POLL_INTERVAL).await;
            }
        }
        Action::WaitHealthz { timeout } => {
            dep.wait_healthz(*timeout)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(None);
        }
        Action::ApplyManifest { path } => {
            let applied = ctx
                .host()?
                .apply_manifest(&manifest_path(path), &ctx.vars)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(Some(applied.join(", ")));
        }
        Action::ApplyNatsCluster { path, timeout } => {
            let p = manifest_path(path);
            let clusters = ctx.reserve(&p)?;
            if clusters.is_empty() {
                return Err(format!("{} holds no NatsCluster", p.display()));
            }
            let host = ctx.host()?.clone();
            host.apply_manifest(&p, &ctx.vars)
                .await
                .map_err(|e| e.to_string())?;
            for (ns, n) in &clusters {
                controlled::wait_servers(&host, ns, n, *timeout).await?;
            }
            let names: Vec<String> = clusters.iter().map(|(ns, n)| format!("{ns}/{n}")).collect();
            return Ok(Some(names.join(", ")));
        }
        Action::WaitServerRestarted { server, timeout } => {
            use cluster_controller::lifecycle::local::LocalEvent;
            let host = ctx.host()?.clone();
            crate::wait::poll(
                &format!("the controller restarting {server}"),
                *timeout,
                || async {
                    let done = host
                        .lifecycle()
                        .events()
                        .iter()
                        .any(|e| e.server == *server && e.event == LocalEvent::Restarted);
                    if done {
                        Ok(Some(()))
                    } else {
                        Err(format!("{server} not restarted yet"))
                    }
                },
            )
            .await
            .map_err(|e| e.to_string())?;
            return Ok(Some(server.clone()));
        }
        Action::Annotate { object, annotation } => {
            let r = ObjectRef::parse(object).map_err(|e| e.to_string())?;
            ctx.host()?
                .annotate(&r, annotation)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(Some(r.to_string()));
        }
        Action::WaitCondition {
            object,
            condition,
            message,
            timeout,
        } => {
            let r = ObjectRef::parse(object).map_err(|e| e.to_string())?;
            ctx.host()?
                .wait_condition_saying(&r, condition, message.as_deref(), *timeout)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(Some(r.to_string()));
        }
        Action::RestartController { controller } => {
            ctx.host()?
                .restart_controller(controller)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(Some(controller.clone()));
        }
    };
    let s = resolve(dep, selector, last_faulted).await?;
    dep.fault(&s, f).await.map_err(|e| e.to_string())?;
    *last_faulted = Some(s.clone());
    Ok(Some(s))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        use cluster_controller::lifecycle::local::LocalEvent::*;
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
            &Ledger::new(),
            (&[], true),
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
        for want in ["baseline", "leader-crash", "lame-duck"] {
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
}
