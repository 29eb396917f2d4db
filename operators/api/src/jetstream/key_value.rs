//! NatsKeyValue: a JetStream key-value bucket, nats.go's `jetstream.KeyValueConfig` in camelCase.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::{
    AdoptionPolicy, DeletionPolicy, GoDuration, Metadata, Placement, Republish, StorageType,
    StreamSource, SyncStatus, TerminalPolicy,
};
use crate::common::ObjectReference;

/// A JetStream key-value bucket. Fields are nats.go's KeyValueConfig in camelCase, its bucket
/// being `name`; an omitted field takes the client library's default. Durations are Go duration
/// strings; sizes are quantities (`64Ki`) or plain bytes.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "jetstream.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsKeyValue",
    namespaced,
    status = "SyncStatus",
    category = "nats",
    category = "nats-jetstream",
    doc = "A JetStream key-value bucket managed through a NatsConnection.",
    printcolumn(name = "Bucket", type_ = "string", json_path = ".spec.name"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Synced", type_ = "string", json_path = ".status.conditions[?(@.type==\"Synced\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("(has(self.spec.name) ? self.spec.name : self.metadata.name) == (has(oldSelf.spec.name) ? oldSelf.spec.name : oldSelf.metadata.name)").message("the bucket name (spec.name, or metadata.name when omitted) cannot change")
)]
#[x_kube(validation = Rule::new("self.connectionRef == oldSelf.connectionRef").message("connectionRef cannot change"))]
#[x_kube(validation = Rule::new("!has(oldSelf.storage) || (has(self.storage) && self.storage == oldSelf.storage)").message("storage cannot change once set"))]
#[serde(rename_all = "camelCase")]
pub struct NatsKeyValueSpec {
    /// The NatsConnection the bucket is managed through; its credentials decide the account.
    /// Cannot change.
    pub connection_ref: ObjectReference,
    /// What to do about a bucket of this name the controller does not own.
    #[serde(default)]
    pub adoption_policy: AdoptionPolicy,
    /// What deleting this resource does to the bucket: Retain (default) keeps it on the server.
    #[serde(default = "super::lifecycle::default_retain")]
    pub deletion_policy: DeletionPolicy,
    /// What a Terminal condition waits for: an edit (Hold, default) or a recheck every resync (Retry).
    #[serde(default)]
    pub terminal_policy: TerminalPolicy,

    /// The bucket name (its stream is `KV_<name>`); metadata.name when omitted. Cannot change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 252), regex(pattern = r"^[a-zA-Z0-9_-]+$"))]
    pub name: Option<String>,
    /// A description of the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub description: Option<String>,
    /// The largest value accepted (e.g. `64Ki`); -1 for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_value_size: Option<Quantity>,
    /// How many values are kept per key, 1 to 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub history: Option<i32>,
    /// How long a value lives (Go duration, e.g. `24h`); `0` keeps it forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<GoDuration>,
    /// The most bytes the bucket holds (e.g. `1Gi`); -1 for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<Quantity>,
    /// Where values are stored: File (default) or Memory. Cannot change once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageType>,
    /// How many servers hold a copy, 1 to 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 5))]
    pub replicas: Option<i32>,
    /// Where the replicas are placed. A declared cluster pins the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// Republish stored values to another subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub republish: Option<Republish>,
    /// The bucket this one mirrors (by bucket name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<StreamSource>,
    /// Buckets this one sources values from (by bucket name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub sources: Vec<StreamSource>,
    /// Compress stored values (S2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<bool>,
    /// Enables per-key TTLs and how long the markers of keys removed by a limit live (Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "limitMarkerTTL")]
    pub limit_marker_ttl: Option<GoDuration>,
    /// Metadata of the bucket's stream. The controller merges its ownership marker into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl NatsKeyValue {
    /// The bucket name: spec.name, or metadata.name when omitted.
    pub fn bucket_name(&self) -> &str {
        self.spec
            .name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}
