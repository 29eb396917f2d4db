//! Scenarios as data: a YAML file under `scenarios/` naming a topology, a workload, timed steps and
//! expectations; a runner that prints a progress line per step; a report (human summary + JSON).
//!
//! This module holds the format and its checks; [`run`] runs a scenario, `steps` carries out the
//! steps on servers and links, `host_steps` the steps on the host, `auth_steps` the steps on
//! objects and clients of an auth plane (`auth_plane` boots one, `client_run` connects its users),
//! `report` judges and writes, `timeline` derives what the report's page draws, `status_watch`
//! samples the controller's view of each NatsCluster, and `html` draws it all.
//!
//! What runs on a host (kube-apiserver and the controllers) builds with the sim's `kube` feature:
//! `run/host.rs` and the step modules it names; without it `run/without_host.rs` refuses a
//! scenario that needs one ([`Scenario::needs_harnesses`]), and the format, its checks and the
//! report build all the same (sim/README.md).

mod action;
#[cfg(feature = "kube")]
mod auth_plane;
#[cfg(feature = "kube")]
mod auth_steps;
#[cfg(feature = "kube")]
mod client_run;
mod clients;
mod compare;
mod deployed;
mod fleet;
#[cfg(feature = "kube")]
mod hand_moves;
#[cfg(feature = "kube")]
mod host_steps;
pub mod html;
mod leader_count;
mod leaders;
mod place;
mod placement;
mod progress;
mod replica_reads;
mod report;
mod route_steps;
mod run;
mod status_steps;
pub mod status_watch;
mod step_context;
mod steps;
mod store_faults;
#[cfg(feature = "kube")]
mod system_access;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fleet;
#[cfg(test)]
mod tests_store_faults;
pub mod timeline;
mod topology_decl;
mod validate;
mod validate_fleet;
mod workload;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backend::BackendError;

pub use action::Action;
pub use clients::{ClientDecl, ClientReport};
pub use compare::side_by_side;
pub use fleet::{
    BucketDecl, Home, INDEX, PublisherDecl, PublisherLane, PublisherReport, StreamDecl, Workload,
};
pub use leader_count::{LeaderCount, leader_spread, leaders_per_server};
pub use leaders::{LEADER_FIGURES, leader_figure};
pub use place::Place;
pub use progress::Progress;
pub use replica_reads::{ReplicaRead, judge_replica};
pub use report::{
    DRAIN_DEADLINE, ExpectationOutcome, ROLLOUT_FIGURES, Report, RolloutStep, Rule, Second,
    StepOutcome, TIMING_FIGURES, figure, judges_timings, rollout_figure, rollout_steps,
    set_judge_timings, step_figures, undrained_unless,
};
#[cfg(feature = "kube")]
pub use run::run_on_node;
pub use run::{run, run_at};
pub use store_faults::CorruptKind;

/// The controllers a scenario may name (`controllers:`, `replicas:`, the controller steps): the
/// host's (`control_plane::controllers`, whose keys a test holds to this list).
pub const CONTROLLER_NAMES: [&str; 3] = ["auth", "cluster", "jetstream"];

/// The kube-apiserver and controllers a run's steps reach (feature `kube`).
#[cfg(feature = "kube")]
pub(crate) type HostPlane = crate::control_plane::ControlPlane;

/// Built without the Kubernetes harnesses (feature `kube`), a run has no host and nothing can
/// make one: a scenario that needs one is refused before it starts ([`Scenario::needs_harnesses`]).
#[cfg(not(feature = "kube"))]
#[derive(Clone)]
pub(crate) enum HostPlane {}

/// Why a sim built without the Kubernetes harnesses refuses `what`, and how to build it with them.
#[cfg(not(feature = "kube"))]
pub fn without_harnesses(what: &str) -> String {
    format!(
        "{what} needs the Kubernetes harnesses (kube-apiserver and the controllers), which this sim \
         was built without: build it with `--features kube` (`cargo run -p sim --features kube -- \
         scenario NAME`, or `just scenario NAME`)"
    )
}

/// The `server` of a `wait_server_restarted` step that any server satisfies.
pub const ANY_SERVER: &str = "any";

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
    #[error("reading the report {path}: {source}")]
    ReadReport {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a scenario report: {message}")]
    NotAReport { path: PathBuf, message: String },
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
    /// JetStream traffic; optional (a scenario with only `clients` has none).
    #[serde(default)]
    pub workload: Workload,
    /// Core-NATS clients connected with creds the auth controller wrote (see [`ClientDecl`]).
    #[serde(default)]
    pub clients: Vec<ClientDecl>,
    #[serde(default)]
    pub steps: Vec<Step>,
    /// The controllers the host runs when a step or the topology needs them (default: every
    /// controller the host knows, see `control_plane::controllers`).
    #[serde(default)]
    pub controllers: Option<Vec<String>>,
    /// Controllers run as replicas under leader election (name → how many, 2 or 3), as the
    /// chart runs them; `kill_leader` kills the one leading (see `crate::elected`).
    #[serde(default)]
    pub replicas: std::collections::BTreeMap<String, u32>,
    /// Namespaces the host creates before anything is applied (default: `nats`).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Figure name → rule (`"== 0"`, `"<= 1"`, `">= 1"`; a bare number means `==`).
    #[serde(default)]
    pub expect: std::collections::BTreeMap<String, String>,
    /// Ratios of two step figures the report gives: name → `[of, to]` (of / to).
    #[serde(default)]
    pub ratios: std::collections::BTreeMap<String, [String; 2]>,
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
    /// the workload account's user. `auth`: the auth controller signs them from `auth_plane`
    /// and the sim servers boot under them.
    #[serde(default)]
    pub trust: Option<TrustDecl>,
    /// With `trust: auth`: manifests (paths from the workspace root) of the auth plane — a
    /// NatsOperator, its NatsSystemAccount and NatsOperatorTrust, a NatsUser of preset
    /// `auth-controller`, and whatever accounts and users the scenario needs.
    #[serde(default)]
    pub auth_plane: Vec<String>,
    /// With `trust: generated` on a sim topology: the JetStream accounts the sim signs, each
    /// with one user the traffic in it connects as (default: one, APP).
    #[serde(default)]
    pub accounts: Vec<String>,
    #[serde(default)]
    pub gateways: Option<GatewayDecl>,
    /// Server tags per cluster of a sim topology (`c1: [region:east]`): every server of the
    /// cluster carries them.
    #[serde(default)]
    pub server_tags: std::collections::BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub leafs: Vec<LeafSpecDecl>,
    #[serde(default)]
    pub version: Option<String>,
    /// `sync_interval` per cluster of a sim topology (`c1: 2m`, `c2: always`); a cluster not
    /// named keeps nats-server's default (2m).
    #[serde(default)]
    pub sync_interval: std::collections::BTreeMap<String, String>,
    /// Servers of a sim topology whose JetStream store runs on the filesystem fault layer
    /// (`[c1-0, c1-2]`, or `[all]` for every hub server): the servers `lose_unsynced` and
    /// `corrupt` act on. Needs FUSE and root; without them the scenario cannot run.
    #[serde(default)]
    pub fault_layer: Vec<String>,
    /// A sim topology's routes inside each cluster through a proxy per ordered pair of servers,
    /// so `cut_routes` can cut a server from its peers (default off: direct routes).
    #[serde(default)]
    pub route_proxies: bool,
}

fn one() -> usize {
    1
}

/// Where the trust roots of a NatsCluster topology come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustDecl {
    /// Signed by the sim for this run: for NatsClusters, or for a sim topology's servers.
    Generated,
    /// Signed by the auth controller from the `auth_plane` manifests; the auth controller runs
    /// with a system connection to the sim servers and pushes every JWT to them.
    Auth,
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

/// A timed step: `at` is measured from the start of the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    #[serde(with = "crate::duration")]
    pub at: Duration,
    /// A name a later step's `figure.since` measures from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A figure this step records (see [`StepFigure`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figure: Option<StepFigure>,
    /// On a `wait_status` step: how much the status field it read grew since the `wait_status`
    /// step `since` read it, as a figure (a count, always judged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_growth: Option<StepFigure>,
    #[serde(flatten)]
    pub action: Action,
}

/// A timing a step records into the report's figures: the milliseconds from the completion of
/// step `since` (its `id`) to the completion of this step — or, for a step that observes when
/// something happened (`wait_disconnected`: when the server closed the connection), to that
/// moment. A timing: reported always, judged only where timings are ([`judges_timings`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepFigure {
    pub name: String,
    pub since: String,
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

    /// Whether the run needs the host: a controller step, NatsClusters as the topology, an
    /// auth plane, or clients (their creds are Secrets).
    pub fn needs_host(&self) -> bool {
        !self.topology.nats_clusters.is_empty()
            || self.topology.trust == Some(TrustDecl::Auth)
            || !self.clients.is_empty()
            || self.steps.iter().any(|s| s.action.needs_controllers())
    }

    /// Whether the scenario needs the Kubernetes harnesses built in (feature `kube`): a host, or
    /// a step that reads the system as the JetStream controller does (the moves by hand).
    pub fn needs_harnesses(&self) -> bool {
        self.needs_host()
            || self
                .steps
                .iter()
                .any(|s| s.action.reads_as_the_controller())
    }
}

/// The directory a scenario's manifest paths are relative to: the workspace root.
pub fn workspace_root() -> PathBuf {
    crate::checkout::root()
}

#[cfg(feature = "kube")]
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
    crate::checkout::path("scenarios")
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
