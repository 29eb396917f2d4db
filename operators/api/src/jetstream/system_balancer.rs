//! NatsSystemBalancer: evens leaders and replicas over every account of a NATS cluster.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::balancer::default_interval;
use super::{GoDuration, Move, Moves};
use crate::common::{Conditions, ObjectReference};

/// How far the system balancer can move leaders.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum LeaderCapability {
    /// Every account with streams exports jetstream-stepdown.
    Full,
    /// Some accounts do not export jetstream-stepdown; their leaders are not moved.
    Partial,
    /// No account exports jetstream-stepdown.
    None,
}

/// What the system balancer can do.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// Whether placement moves are possible (ACCOUNT.STREAM.MOVE over the system account).
    #[serde(default)]
    pub placement: bool,
    /// How far leader moves are possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<LeaderCapability>,
    /// Why leader moves are not Full, naming the accounts without the export.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_reason: Option<String>,
}

/// What one server holds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerLoad {
    /// The server's server_name.
    pub name: String,
    /// Group leaders the server holds.
    #[serde(default)]
    pub leaders: u32,
    /// Replicas the server holds.
    #[serde(default)]
    pub replicas: u32,
}

/// The difference between the most and fewest a server holds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Skew {
    /// Leader skew: the larger of the stream leaders' and the consumer leaders' skews (each kind
    /// is evened apart).
    #[serde(default)]
    pub leaders: u32,
    /// Replica skew.
    #[serde(default)]
    pub replicas: u32,
}

/// The balancer of a whole NATS cluster over system credentials: placement moves by
/// ACCOUNT.STREAM.MOVE and leader moves through each account's jetstream-stepdown export.
/// At most one per NATS cluster.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "jetstream.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsSystemBalancer",
    namespaced,
    status = "NatsSystemBalancerStatus",
    category = "nats",
    category = "nats-jetstream",
    doc = "Balances leaders, and optionally replicas, over every account of a NATS cluster.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Holding",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Holding\")].reason"
    ),
    printcolumn(
        name = "Leaders",
        type_ = "string",
        json_path = ".status.capabilities.leader",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self.connectionRef == oldSelf.connectionRef").message("connectionRef cannot change"))]
#[x_kube(validation = Rule::new("duration(self.interval) >= duration('5s')").message("interval must be at least 5s, the floor that bounds what one balancer's passes cost"))]
#[serde(rename_all = "camelCase")]
pub struct NatsSystemBalancerSpec {
    /// A NatsConnection with system account credentials to the NATS cluster. Cannot change.
    pub connection_ref: ObjectReference,
    /// Which kinds of move to make: leader moves on, placement moves off by default.
    #[serde(default)]
    pub moves: Moves,
    /// The pace of passes, at most one move each (Go duration, at least `5s`; default `1m`). An
    /// object stored below the floor (before the CEL rule) is paced at the floor.
    #[serde(default = "default_interval")]
    pub interval: GoDuration,
}

/// The observed state of the system balancer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsSystemBalancerStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready and Holding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Conditions,
    /// What the balancer can do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// What every server of the NATS cluster holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<ServerLoad>,
    /// The current skew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew: Option<Skew>,
    /// The last move made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_move: Option<Move>,
    /// Moves requested and not yet done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Move>,
    /// Streams whose replicas, at the same last sequence, hold other messages than their peers,
    /// as every server's own JSZ answer reports its replica: with how many passes in a row found
    /// it. ReplicasConsistent reads False once an entry persists (docs/durability.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverged: Vec<DivergedReplicas>,
}

/// A stream whose replicas diverged: the servers holding other than most of their peers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DivergedReplicas {
    /// The stream's account (public key or name, as JSZ names it).
    pub account: String,
    /// The stream's server-side name.
    pub stream: String,
    /// The last sequence the diverged replicas share with their peers.
    pub last_seq: i64,
    /// The servers whose replica differs.
    pub servers: Vec<String>,
    /// Passes in a row that found these servers diverged.
    pub passes: i32,
}
