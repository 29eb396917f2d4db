//! Shapes every JetStream object kind shares: lifecycle policies, placement, sources, status.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::Conditions;

/// The longest server-side name nats-server accepts for a stream or consumer (JSMaxNameLen).
pub const MAX_NAME_LENGTH: u32 = 255;

/// What the controller does about an object on the server of the same name that it does not own.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum AdoptionPolicy {
    /// Create the object; an object of the same name not owned by this resource makes the
    /// resource Terminal and is left untouched.
    #[default]
    Never,
    /// The object must exist; its configuration is adopted and written into spec.
    Adopt,
    /// Apply spec whether or not the object exists; fields spec omits are then filled in from the server.
    AdoptOrCreate,
}

/// What deleting the resource does to the object on the server.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum DeletionPolicy {
    /// Keep the object on the server.
    Retain,
    /// Delete the object from the server.
    Delete,
}

/// What a Terminal condition waits for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum TerminalPolicy {
    /// Wait for an edit of the resource.
    #[default]
    Hold,
    /// Recheck every resync period and clear the condition once its cause is gone.
    Retry,
}

/// Where JetStream keeps an object's messages.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum StorageType {
    /// On disk (nats-server `file`), the server's default.
    File,
    /// In memory (nats-server `memory`).
    Memory,
}

/// Where a stream's replicas are placed (nats-server `placement`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// The NATS cluster the replicas live in. A declared cluster pins the stream: balancers and
    /// evacuations never move it, and changing it moves the stream there (a placement move).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Server tags every replica's server must carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The server_name preferred as the group's leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred: Option<String>,
}

/// A subject transform (nats-server `SubjectTransformConfig`): messages on `src` are stored under `dest`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubjectTransform {
    /// Subjects transformed (a subject filter); every subject when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub src: Option<String>,
    /// The subject they become, with `{{wildcard(n)}}` and similar mapping functions.
    #[schemars(length(max = 1024))]
    pub dest: String,
}

/// Republishing of stored messages (nats-server `RePublish`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Republish {
    /// Stored subjects republished (a subject filter); every subject when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// The subject they are republished to.
    pub dest: String,
    /// Republish headers only, without the payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_only: Option<bool>,
}

/// API and deliver prefixes of an origin stream in another account or JetStream domain
/// (nats-server `ExternalStream`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalStream {
    /// The JetStream API prefix the origin is reached under, e.g. `$JS.hub.API`.
    #[schemars(length(min = 1, max = 1024))]
    pub api: String,
    /// The prefix of the subjects messages are delivered on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub deliver: Option<String>,
}

/// A durable consumer on the origin used for sourcing (nats-server `StreamConsumerSource`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamConsumerSource {
    /// The consumer's name on the origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub name: Option<String>,
    /// The consumer's deliver subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub deliver_subject: Option<String>,
}

/// A stream a mirror or source copies from (nats-server `StreamSource`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("!(has(self.domain) && has(self.external))").message("a source sets at most one of domain and external: domain is short for external.api $JS.<domain>.API"))]
#[serde(rename_all = "camelCase")]
pub struct StreamSource {
    /// The origin's server-side stream name.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,
    /// The origin sequence to start at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub opt_start_seq: Option<i64>,
    /// The origin time to start at (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opt_start_time: Option<Time>,
    /// Copy only messages on this subject filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub filter_subject: Option<String>,
    /// Filters with transforms; exclusive with filterSubject on the server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub subject_transforms: Vec<SubjectTransform>,
    /// The origin is in another account or domain, reached under these prefixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalStream>,
    /// The origin is in this JetStream domain (a client-side shorthand for `external`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub domain: Option<String>,
    /// A durable consumer on the origin to source through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<StreamConsumerSource>,
}

/// How the controller came to own an object on the server.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum OwnershipOrigin {
    /// The controller created it.
    Created,
    /// It existed and was adopted.
    Adopted,
}

/// The ownership marker in the server object's own metadata, naming the resource that owns it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ownership {
    /// How the object came to be owned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<OwnershipOrigin>,
    /// The owning resource's UID, as written into the object's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// One replica of a Raft group as the server reports it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaState {
    /// server_name of the server holding the replica.
    pub name: String,
    /// Whether the replica is current with its leader.
    #[serde(default)]
    pub current: bool,
    /// How many operations the replica is behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<u64>,
}

/// The object's state as the server reports it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerState {
    /// When the object was created on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Time>,
    /// server_name of the group's leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// The group's followers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaState>,
    /// Messages stored (streams, buckets, object stores) or pending delivery (consumers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<u64>,
    /// Bytes stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

/// The status every JetStream object kind reports (NatsConsumer, NatsKeyValue, NatsObjectStore;
/// NatsStream adds a placement move in progress).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, Synced, Terminal and Adopted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Conditions,
    /// When the server object was last compared with spec; a comparison that found nothing to change is written at most every
    /// 30 minutes (a resync writes no status), so it may be up to that much older than the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced_time: Option<Time>,
    /// When a Terminal condition under terminalPolicy Retry is rechecked next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_check_time: Option<Time>,
    /// The ownership marker found on the server object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<Ownership>,
    /// The object's state on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerState>,
}

/// A user-supplied metadata map of a server object; the controller merges its ownership marker in.
pub type Metadata = BTreeMap<String, String>;

pub(crate) fn default_retain() -> DeletionPolicy {
    DeletionPolicy::Retain
}

pub(crate) fn default_delete() -> DeletionPolicy {
    DeletionPolicy::Delete
}

/// Removes a type's own description from its schema. Applied to enums: kube hoists the schema of an
/// `Option<Enum>` field over the field's, so the type's text would replace the field's doc comment
/// in `kubectl explain`; the field's doc comment says it better.
pub(crate) fn drop_type_description(schema: &mut schemars::Schema) {
    schema.remove("description");
}
