//! NatsClusterEvacuation: moves every stream off a NATS cluster to servers matching tags.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Conditions, ObjectReference};

/// The NATS cluster evacuated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvacuationSource {
    /// The NATS cluster name (as servers report it) every stream leaves.
    #[schemars(length(min = 1, max = 253))]
    pub cluster: String,
}

/// Where evacuated streams go.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvacuationTarget {
    /// Server tags every new replica's server must carry (at least one); the move falls back to
    /// any NATS cluster of the supercluster whose servers match them.
    #[schemars(length(min = 1, max = 32), inner(length(min = 1, max = 256)))]
    pub server_tags: Vec<String>,
}

/// A stream whose move was requested.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestedMove {
    /// The stream's account (public key).
    pub account: String,
    /// The server-side stream name.
    pub stream: String,
    /// When the move was requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
}

/// A resource whose own spec pins it to the source with placement.cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PinnedResource {
    /// NatsStream, NatsKeyValue or NatsObjectStore.
    pub kind: String,
    /// The resource's namespace.
    pub namespace: String,
    /// The resource's name.
    pub name: String,
}

/// A moved stream with no resource whose config still names the source cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StalePlacement {
    /// The stream's account (public key).
    pub account: String,
    /// The server-side stream name.
    pub name: String,
}

/// Moves every stream, key-value bucket and object store of every account off a NATS cluster,
/// one ACCOUNT.STREAM.MOVE at a time, to servers matching the target tags. Resources whose spec
/// sets placement.cluster are never moved. Deleting it mid-run cancels pending moves.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "jetstream.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsClusterEvacuation",
    namespaced,
    status = "NatsClusterEvacuationStatus",
    category = "nats",
    category = "nats-jetstream",
    doc = "Moves every stream off a NATS cluster to servers matching tags.",
    printcolumn(name = "From", type_ = "string", json_path = ".spec.from.cluster"),
    printcolumn(name = "Moved", type_ = "integer", json_path = ".status.moved"),
    printcolumn(name = "Remaining", type_ = "integer", json_path = ".status.remaining"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self.connectionRef == oldSelf.connectionRef").message("connectionRef cannot change"))]
#[x_kube(validation = Rule::new("self.from == oldSelf.from").message("from cannot change"))]
#[x_kube(validation = Rule::new("self.to == oldSelf.to").message("to cannot change"))]
#[serde(rename_all = "camelCase")]
pub struct NatsClusterEvacuationSpec {
    /// A NatsConnection with system account credentials. Cannot change.
    pub connection_ref: ObjectReference,
    /// The NATS cluster to empty. Cannot change.
    pub from: EvacuationSource,
    /// Where the streams go. Cannot change.
    pub to: EvacuationTarget,
}

/// The observed state of an evacuation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsClusterEvacuationStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready (never True while pinned resources remain) and Holding (ServersDown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Conditions,
    /// Streams moved off the source.
    #[serde(default)]
    pub moved: u32,
    /// Moves requested and not yet done.
    #[serde(default)]
    pub in_flight: u32,
    /// Streams still on the source, pinned ones excluded.
    #[serde(default)]
    pub remaining: u32,
    /// Moves requested and not yet done, one per stream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requested: Vec<RequestedMove>,
    /// Resources whose spec pins them to the source; the evacuation is not Ready while any remains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<PinnedResource>,
    /// Moved streams with no resource whose config still names the source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_placement: Vec<StalePlacement>,
}
