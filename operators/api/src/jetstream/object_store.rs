//! NatsObjectStore: a JetStream object store, nats.go's `jetstream.ObjectStoreConfig` in camelCase.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::{
    AdoptionPolicy, DeletionPolicy, GoDuration, Metadata, Placement, StorageType, SyncStatus,
    TerminalPolicy,
};
use crate::common::ObjectReference;

/// A JetStream object store. Fields are nats.go's ObjectStoreConfig in camelCase, its bucket being
/// `name`; an omitted field takes the client library's default.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "jetstream.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsObjectStore",
    namespaced,
    status = "SyncStatus",
    category = "nats",
    category = "nats-jetstream",
    doc = "A JetStream object store managed through a NatsConnection.",
    printcolumn(name = "Bucket", type_ = "string", json_path = ".spec.name"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Synced", type_ = "string", json_path = ".status.conditions[?(@.type==\"Synced\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("(has(self.spec.name) ? self.spec.name : self.metadata.name) == (has(oldSelf.spec.name) ? oldSelf.spec.name : oldSelf.metadata.name)").message("the bucket name (spec.name, or metadata.name when omitted) cannot change")
)]
#[x_kube(validation = Rule::new("self.connectionRef == oldSelf.connectionRef").message("connectionRef cannot change"))]
#[x_kube(validation = Rule::new("!has(oldSelf.storage) || (has(self.storage) && self.storage == oldSelf.storage)").message("storage cannot change once set"))]
#[serde(rename_all = "camelCase")]
pub struct NatsObjectStoreSpec {
    /// The NatsConnection the object store is managed through; its credentials decide the account.
    /// Cannot change.
    pub connection_ref: ObjectReference,
    /// What to do about an object store of this name the controller does not own.
    #[serde(default)]
    pub adoption_policy: AdoptionPolicy,
    /// What deleting this resource does to the object store: Retain (default) keeps it on the server.
    #[serde(default = "super::lifecycle::default_retain")]
    pub deletion_policy: DeletionPolicy,
    /// What a Terminal condition waits for: an edit (Hold, default) or a recheck every resync (Retry).
    #[serde(default)]
    pub terminal_policy: TerminalPolicy,

    /// The bucket name (its stream is `OBJ_<name>`); metadata.name when omitted. Cannot change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 251), regex(pattern = r"^[a-zA-Z0-9_-]+$"))]
    pub name: Option<String>,
    /// A description of the object store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub description: Option<String>,
    /// How long an object lives (Go duration, e.g. `2160h`); `0` keeps it forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<GoDuration>,
    /// The most bytes the store holds (e.g. `50Gi`); -1 for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<Quantity>,
    /// Where objects are stored: File (default) or Memory. Cannot change once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageType>,
    /// How many servers hold a copy, 1 to 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 5))]
    pub replicas: Option<i32>,
    /// Where the replicas are placed. A declared cluster pins the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// Compress stored objects (S2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<bool>,
    /// Metadata of the store's stream. The controller merges its ownership marker into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl NatsObjectStore {
    /// The bucket name: spec.name, or metadata.name when omitted.
    pub fn bucket_name(&self) -> &str {
        self.spec
            .name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}
