//! Scenarios as data: a YAML file under `scenarios/` naming a topology, a workload, timed steps and
//! expectations; a runner that prints a progress line per step; a report (human summary + JSON).
//!
//! This module holds the format and its checks; [`run`] runs a scenario, `steps` carries out the
//! steps on servers and links, `auth_steps` the steps on objects and clients of an auth plane
//! (`auth_plane` boots one, `clients` connects its users), `report` judges and writes, `timeline`
//! derives what the report's page draws, `status_watch` samples the controller's view of each
//! NatsCluster, and `html` draws it all.

mod auth_plane;
mod auth_steps;
mod clients;
mod compare;
mod deployed;
mod fleet;
mod hand_moves;
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

pub use clients::{ClientDecl, ClientReport};
pub use compare::side_by_side;
pub use fleet::{
    BucketDecl, INDEX, PublisherDecl, PublisherLane, PublisherReport, StreamDecl, Workload,
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
pub use run::{run, run_at, run_on_node};
pub use store_faults::CorruptKind;

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
    /// controller the host knows, see `host::controllers`).
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

/// What a step does. Servers are named (`c1-0`) or chosen: `stream-leader:<stream>`,
/// `stream-follower:<stream>`, `meta-leader`, `meta-follower:<cluster>`, `last-faulted`.
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
    /// A power loss: every server named (selectors too) is SIGKILLed at once, then every byte
    /// each wrote since its last fsync of that file is dropped. Their stores must be on the
    /// fault layer (`topology.fault_layer`). The servers stay down until a `restart`.
    LoseUnsynced {
        servers: Vec<String>,
    },
    /// Reads every message stream `stream` holds (its publisher's, by `Nats-Msg-Id`) and records
    /// as count `count` how many messages its publisher had acknowledged are not there: what
    /// a fault took from the store, whatever the consumers had already received.
    AuditStream {
        stream: String,
        count: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Reads each replica's own copy of stream `stream` (sim topologies: each server holding one
    /// is stopped, its store copied and opened by a standalone server, then restarted, one at a
    /// time) and reports per replica its messages, first and last sequence, and which
    /// acknowledged messages of its publisher it lacks or holds otherwise (`replica_reads`).
    ReadReplicas {
        stream: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Damages every file of a stopped server's store matching `file_glob` (relative to the
    /// store directory; `*` within a segment, `**` across): `kind` `bitflip` flips the low bit
    /// of the middle byte, `truncate` cuts the second half. A glob matching nothing fails.
    Corrupt {
        server: String,
        #[serde(alias = "file-glob")]
        file_glob: String,
        kind: CorruptKind,
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
    /// Cuts `server`'s routes to the peers `from` names (every peer of its cluster when empty),
    /// as a partition does: the server and its clients run on (`topology.route_proxies`).
    CutRoutes {
        server: String,
        #[serde(default)]
        from: Vec<String>,
    },
    /// Lifts what `cut_routes` of `server` (from the peers `from` names, all when empty) cut.
    RestoreRoutes {
        server: String,
        #[serde(default)]
        from: Vec<String>,
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
    /// Waits until the server's process has exited by itself: a lame duck's end, once the
    /// server closed its clients (sim topologies only).
    WaitExited {
        server: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Counts, from the servers, how many of the workload's streams each server leads and
    /// records the spread (most minus fewest) as figure `name` (see `leaders`).
    RecordLeaderSpread {
        name: String,
    },
    // Steps on the host: its kube-apiserver and the controllers running against it (a scenario
    // with any of them runs on the local backend, see `Scenario::needs_host`).
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
    /// Kills the replica of `controller` that holds its Lease (no release: a SIGKILL) and starts
    /// a fresh standby in its place; the controller must run as `replicas:`.
    KillLeader {
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
    /// `server: any` ([`ANY_SERVER`]) waits for the first server restarted, whichever it is: the
    /// order of a rollout depends on which server leads the meta group, which is chance.
    WaitServerRestarted {
        server: String,
        #[serde(with = "crate::duration", default = "default_cluster_wait")]
        timeout: Duration,
    },
    /// Waits until `status.<field>` of the object (a number, or a list's length; a dotted path
    /// reaches deeper) meets `rule` (`">= 1"`); the value it read is the step's value.
    WaitStatus {
        object: String,
        field: String,
        rule: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Waits until every stream of the workload's account (or each of `streams`) is led in NATS
    /// cluster `cluster` with exactly its replicas, every one current: no move under way, none
    /// left half done.
    WaitStreamsSettled {
        cluster: String,
        #[serde(default)]
        streams: Vec<String>,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    // Steps through the system account (`hand_moves`).
    /// Moves every stream group of every account off NATS cluster `from` into the servers
    /// tagged `to`, one ACCOUNT.STREAM.MOVE after the other, each waited for until done (at
    /// most `timeout` each): the floor an evacuation's time is measured against.
    MoveByHand {
        from: String,
        to: Vec<String>,
        #[serde(with = "crate::duration", default = "default_cluster_wait")]
        timeout: Duration,
    },
    /// Waits until every stream group of every account, read through the system account, is
    /// led in NATS cluster `cluster` with exactly its replicas, all in it.
    WaitGroupsSettled {
        cluster: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Every publisher of `publishers` stops sending new messages now.
    StopPublishers {},
    // Steps on objects and on the clients of an auth plane (`auth_steps`).
    /// Deletes an object; done once the apiserver accepted the delete (finalizers may hold it).
    Delete {
        object: String,
    },
    /// Waits until the object no longer exists: its finalizers released.
    WaitGone {
        object: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Replaces the object's status with `{}` through the status subresource: a lost status.
    WipeStatus {
        object: String,
    },
    /// Waits until the server closed the connection of client `client`.
    WaitDisconnected {
        client: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// A fresh connection with client `client`'s creds to every server of every cluster, one by
    /// one, is refused with an authorization error; fails naming every server that admits it.
    ExpectRefused {
        client: String,
    },
    /// The JWT in the NatsAccount's `status.jwt` revokes the user of client `client` (the key
    /// and issue time of the creds read when the workload started).
    ExpectJwtRevokes {
        object: String,
        client: String,
    },
    /// Waits until server `server` no longer holds the JWT of NatsAccount `object` in its
    /// resolver directory (the account's key as recorded when the workload started).
    WaitAccountAbsent {
        object: String,
        server: String,
        #[serde(with = "crate::duration", default = "default_wait")]
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
                | Action::KillLeader { .. }
                | Action::ApplyNatsCluster { .. }
                | Action::WaitServerRestarted { .. }
                | Action::WaitStatus { .. }
                | Action::Delete { .. }
                | Action::WaitGone { .. }
                | Action::WipeStatus { .. }
                | Action::ExpectJwtRevokes { .. }
                | Action::WaitAccountAbsent { .. }
        )
    }

    /// The client a step names, if any.
    pub fn client(&self) -> Option<&str> {
        match self {
            Action::WaitDisconnected { client, .. }
            | Action::ExpectRefused { client }
            | Action::ExpectJwtRevokes { client, .. } => Some(client),
            _ => None,
        }
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
            Action::AuditStream { stream, count, .. } => {
                format!("count acknowledged messages missing from {stream} as {count}")
            }
            Action::ReadReplicas { stream, .. } => {
                format!("read each replica's own copy of {stream}")
            }
            Action::LoseUnsynced { servers } => {
                format!(
                    "power loss of {}: unsynced writes dropped",
                    servers.join(", ")
                )
            }
            Action::Corrupt {
                server,
                file_glob,
                kind,
            } => format!("{kind:?} {file_glob} in the store of {server}").to_lowercase(),
            Action::Reload { server, .. } => format!("edit config of {server} and reload"),
            Action::CutGateway { a, b } => format!("cut gateway {a} <-> {b}"),
            Action::RestoreGateway { a, b } => format!("restore gateway {a} <-> {b}"),
            Action::CutLeaf { leaf } => format!("cut leaf link of {leaf}"),
            Action::RestoreLeaf { leaf } => format!("restore leaf link of {leaf}"),
            Action::CutRoutes { server, from } => route_steps::describe("cut", server, from),
            Action::RestoreRoutes { server, from } => {
                route_steps::describe("restore", server, from)
            }
            Action::WaitMetaLeader { .. } => "wait for a meta leader with all peers".into(),
            Action::WaitStreamLeader { stream, .. } => format!("wait for a leader of {stream}"),
            Action::WaitHealthz { .. } => "wait for healthz on every server".into(),
            Action::WaitExited { server, .. } => format!("wait until {server} exited"),
            Action::RecordLeaderSpread { name } => {
                format!("count the stream leaders per server as {name}")
            }
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
            Action::KillLeader { controller } => {
                format!("kill the leading replica of controller {controller}")
            }
            Action::ApplyNatsCluster { path, .. } => format!("apply NatsCluster manifest {path}"),
            Action::WaitServerRestarted { server, .. } if server == ANY_SERVER => {
                "wait until the controller restarted a server".to_string()
            }
            Action::WaitServerRestarted { server, .. } => {
                format!("wait until the controller restarted {server}")
            }
            Action::WaitStatus {
                object,
                field,
                rule,
                ..
            } => format!("wait until {object} status.{field} {rule}"),
            Action::WaitStreamsSettled {
                cluster, streams, ..
            } if streams.is_empty() => format!("wait until every stream is settled in {cluster}"),
            Action::WaitStreamsSettled {
                cluster, streams, ..
            } => format!("wait until {} is settled in {cluster}", streams.join(", ")),
            Action::MoveByHand { from, to, .. } => format!(
                "move every stream off {from} into the servers tagged {} by hand",
                to.join(", ")
            ),
            Action::WaitGroupsSettled { cluster, .. } => {
                format!("wait until every group of every account is settled in {cluster}")
            }
            Action::StopPublishers {} => "stop the publishers".into(),
            Action::Delete { object } => format!("delete {object}"),
            Action::WaitGone { object, .. } => format!("wait until {object} is gone"),
            Action::WipeStatus { object } => format!("wipe the status of {object}"),
            Action::WaitDisconnected { client, .. } => {
                format!("wait until the server closed client {client}'s connection")
            }
            Action::ExpectRefused { client } => {
                format!("expect client {client}'s creds refused by every server")
            }
            Action::ExpectJwtRevokes { object, client } => {
                format!("expect the JWT of {object} to revoke client {client}'s user")
            }
            Action::WaitAccountAbsent { object, server, .. } => {
                format!("wait until {server} no longer holds the JWT of {object}")
            }
        }
    }
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
