//! Observed state of a NatsCluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::JetStreamLimits;
use crate::common::{Conditions, list_map_by_name};

/// Observed state of a NatsCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsClusterStatus {
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, Settled, Progressing, Deleting, and where they apply GatewaysConnected and
    /// LeafnodesConnected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::common::conditions_schema")]
    pub conditions: Conditions,
    /// The nats-server version every server has reached; empty while servers differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The number of servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The number of servers whose pod is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Where clients and peers reach the NATS cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<Endpoints>,
    /// The rendered config revision and how it was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigStatus>,
    /// The rollout: which servers are on the target revision, which is being stepped, which wait,
    /// and what the gate waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// Servers whose removal (scale-down) or replacement has begun, and how far each has gone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = list_map_by_name)]
    pub removals: Vec<ServerRemoval>,
    /// JetStream state of the NATS cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<JetStreamStatus>,
    /// The gateway connection to each other member of the supercluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = list_map_by_name)]
    pub gateways: Vec<GatewayStatus>,
    /// The connection to each hub, per leaf remote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaf_remotes: Vec<LeafRemoteStatus>,
    /// One entry per server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = list_map_by_name)]
    pub servers: Vec<ServerStatus>,
}

/// A NATS cluster's addresses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Endpoints {
    /// The client URL, `tls://` when the client listener runs TLS, such as `nats://demo.nats.svc:4222`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The monitoring URL, on the headless Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// The gateway address other members dial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

/// The rendered config revision and how it reached the servers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigStatus {
    /// Digest of the rendered config (and what else restarts a server); each server reports the one
    /// it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// How the revision is applied: `Reload` where every changed field reloads, `Restart` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::common::optional_enum_field)]
    pub applied_by: Option<ConfigAppliedBy>,
    /// What made a restart necessary, such as the first restart-only field that changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_reason: Option<String>,
}

/// How a rendered config reached the servers.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ConfigAppliedBy {
    /// A reload requested over the system account, confirmed by the server's config digest.
    Reload,
    /// A rolling restart, one server at a time.
    Restart,
}

/// A rollout in progress.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The config revision being rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_revision: Option<String>,
    /// Servers on the target revision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub updated: Vec<String>,
    /// The server being stepped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// Servers still to step, in the order they will be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// What the rollout waits for before its next step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<RolloutGate>,
}

/// What a closed rollout gate waits for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutGate {
    /// What the gate waits for, such as the groups that are not current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// When the gate closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// One server's removal or replacement.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerRemoval {
    /// The server_name.
    pub name: String,
    /// How far the removal has gone.
    pub phase: RemovalPhase,
    /// When the removal entered this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// How far a server's removal has gone.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum RemovalPhase {
    /// Named by replace-server or beyond spec.replicas, waiting its turn.
    Requested,
    /// Its evacuation was accepted by the meta leader; its Raft groups are moving off.
    Evacuating,
    /// Its removal from the meta group was committed.
    Removed,
    /// Its StatefulSet, volume claim and (beyond spec.replicas) ConfigMap are being deleted.
    Deleting,
    /// Recreated by a replacement, until the meta leader lists it again and the gate opens.
    Rejoining,
}

/// A NATS cluster's JetStream state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JetStreamStatus {
    /// The server_name of the meta group's leader; empty while none is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta_leader: Option<String>,
    /// The store limits in effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<JetStreamLimits>,
}

/// The gateway connection to one supercluster member.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    /// The member's gateway name.
    pub name: String,
    /// Whether the member is reachable.
    #[serde(default)]
    pub connected: bool,
    /// Inbound gateway connections from the member, over all servers.
    #[serde(default)]
    pub inbound: i32,
    /// Outbound gateway connections to the member, over all servers.
    #[serde(default)]
    pub outbound: i32,
}

/// The connection to one hub.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeafRemoteStatus {
    /// Namespace of the remote's NatsConnection.
    pub connection_namespace: String,
    /// Name of the remote's NatsConnection.
    pub connection_name: String,
    /// The number of servers holding a connection to the hub.
    #[serde(default)]
    pub connected: i32,
    /// The local account the remote binds (its public key), empty for the global account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
}

/// One server's state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    /// The server_name.
    pub name: String,
    /// The nats-server version it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether its pod is Ready.
    #[serde(default)]
    pub ready: bool,
    /// The config revision it reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_revision: Option<String>,
}

crate::impl_observed_status!(NatsClusterStatus);
