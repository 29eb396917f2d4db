//! NatsBalancer: evens one account's stream leaders (and optionally replicas) within pools.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::GoDuration;
use crate::common::{Conditions, ObjectReference};

/// The default pace of balancing passes.
pub const DEFAULT_BALANCE_INTERVAL: &str = "1m";

/// The floor of every balancer's `interval` (NatsBalancer and NatsSystemBalancer), refused below
/// it at apply by CEL and raised to it at reconcile for an object stored before the rule (a
/// cluster older than Kubernetes 1.25 stores it unjudged).
///
/// Why this value: a quiet pass is not free. Measured on the sim (3 servers, 3 streams;
/// `live_tenant_cost`), a NatsBalancer pass makes about 3 apiserver requests (its fresh read,
/// the NatsConnection, status) and a NATS request per stream, and holds one of the
/// controller's request slots 0.35–0.7 s, mostly waiting on NATS; a NatsSystemBalancer's JSZ
/// ping waits on every server. At 5 s one balancer costs at most about 0.6 apiserver requests a
/// second and a seventh of one slot, however short its tenant sets it (at `1ns` it held a slot
/// for good and asked the apiserver as fast as it answered). A pass after a move (every 2 s while
/// it is pending) and the first pass after a change are not paced by it. docs/controllers.md,
/// "What a tenant's balancer costs". Must match the literal of the CEL rules on both specs.
pub const MIN_BALANCE_INTERVAL: &str = "5s";

/// Which kinds of move a balancer makes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Moves {
    /// Leader moves (a group's leader steps down to a server holding fewer leaders). On by default.
    #[serde(default = "default_true")]
    pub leader: bool,
    /// Placement moves (a replica moves to a server holding fewer). Off by default.
    #[serde(default)]
    pub placement: bool,
}

impl Default for Moves {
    fn default() -> Self {
        Self {
            leader: true,
            placement: false,
        }
    }
}

fn default_true() -> bool {
    true
}

pub(crate) fn default_interval() -> GoDuration {
    GoDuration::new(DEFAULT_BALANCE_INTERVAL)
}

/// The kind of a move.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum MoveKind {
    /// A group's leader steps down to another of its servers.
    Leader,
    /// A replica moves to another server.
    Placement,
}

/// One move a balancer or evacuation made or has pending.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Move {
    /// Leader or Placement.
    pub kind: MoveKind,
    /// The account (public key) of the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The server-side stream name.
    pub stream: String,
    /// The consumer whose leader moves, for a consumer leader move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<String>,
    /// server_name the leader or replica leaves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// server_name the leader or replica goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// When the move was requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
}

/// A pool: the streams of the resources a label selector matches, balanced among themselves.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[x_kube(validation = Rule::new("self.name != 'default'").message("pool name 'default' is reserved for streams in no pool"))]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    /// The pool's name, a DNS label (lowercase letters, digits and '-', at most 63 characters).
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    /// Selects NatsStream, NatsKeyValue and NatsObjectStore resources of the balancer's namespace
    /// by label. A stream matching several pools belongs to the first.
    pub selector: LabelSelector,
}

/// One pool as the balancer last judged it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// The pool's name; `default` for streams in no pool.
    pub name: String,
    /// Streams in the pool.
    #[serde(default)]
    pub streams: u32,
    /// The difference between the most and fewest leaders a server of the pool holds.
    #[serde(default)]
    pub leader_skew: u32,
}

/// A balancer of one account's streams within pools, through the account's own connection. It
/// yields to the NatsSystemBalancer, including any stream the system balancer has a move pending on.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "jetstream.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsBalancer",
    namespaced,
    status = "NatsBalancerStatus",
    category = "nats",
    category = "nats-jetstream",
    doc = "Balances one account's stream leaders, and optionally replicas, within pools.",
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
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self.connectionRef == oldSelf.connectionRef").message("connectionRef cannot change"))]
#[x_kube(validation = Rule::new("duration(self.interval) >= duration('5s')").message("interval must be at least 5s, the floor that bounds what one balancer's passes cost"))]
#[serde(rename_all = "camelCase")]
pub struct NatsBalancerSpec {
    /// The NatsConnection of the account to balance. Cannot change.
    pub connection_ref: ObjectReference,
    /// The pools, balanced each on its own; streams in no pool form the default pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub pools: Vec<Pool>,
    /// Which kinds of move to make: leader moves on, placement moves off by default.
    #[serde(default)]
    pub moves: Moves,
    /// The pace of passes, at most one move each (Go duration, at least `5s`; default `1m`). An
    /// object stored below the floor (before the CEL rule) is paced at the floor.
    #[serde(default = "default_interval")]
    pub interval: GoDuration,
}

/// The observed state of a balancer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsBalancerStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, Holding and Overlapping.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Conditions,
    /// Every pool, the default pool included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolStatus>,
    /// The last move made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_move: Option<Move>,
}
