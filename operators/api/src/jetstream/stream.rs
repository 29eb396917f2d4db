//! NatsStream: a JetStream stream, nats-server's `StreamConfig` in camelCase.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    AdoptionPolicy, DeletionPolicy, GoDuration, Metadata, Placement, ReplicaState, Republish,
    ServerState, StorageType, StreamSource, SubjectTransform, TerminalPolicy,
};
use crate::common::{Conditions, ObjectReference};

/// How a stream retains messages (nats-server `retention`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum RetentionPolicy {
    /// Keep messages until a limit discards them (the server's default).
    Limits,
    /// Keep a message while a consumer has yet to acknowledge it.
    Interest,
    /// Keep a message until one consumer acknowledges it.
    WorkQueue,
}

/// What a full stream discards (nats-server `discard`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum DiscardPolicy {
    /// Drop the oldest messages to make room (the server's default).
    Old,
    /// Refuse new messages.
    New,
}

/// Compression of stored messages (nats-server `compression`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum StoreCompression {
    /// No compression (the server's default).
    None,
    /// S2 compression.
    S2,
}

/// When stored messages are flushed (nats-server `persist_mode`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum PersistMode {
    /// The server's default persistence.
    Default,
    /// Acknowledge before the write is flushed.
    Async,
}

/// Defaults a stream gives the consumers created on it (nats-server `consumer_limits`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamConsumerLimits {
    /// Delete a consumer inactive this long (Go duration, e.g. `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inactive_threshold: Option<GoDuration>,
    /// The highest maxAckPending a consumer may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ack_pending: Option<i64>,
}

/// A JetStream stream. Every NATS field is nats-server's StreamConfig field of the same name in
/// camelCase; an omitted field takes the server's value, which AdoptOrCreate then writes back into spec.
/// Durations are Go duration strings (`90s`, `1h30m`); sizes are quantities (`1Gi`) or plain bytes.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "jetstream.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsStream",
    namespaced,
    status = "NatsStreamStatus",
    category = "nats",
    category = "nats-jetstream",
    doc = "A JetStream stream managed through a NatsConnection.",
    printcolumn(name = "Stream", type_ = "string", json_path = ".spec.name"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Synced", type_ = "string", json_path = ".status.conditions[?(@.type==\"Synced\")].status"),
    printcolumn(name = "Leader", type_ = "string", json_path = ".status.server.leader", priority = 1),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("(has(self.spec.name) ? self.spec.name : self.metadata.name) == (has(oldSelf.spec.name) ? oldSelf.spec.name : oldSelf.metadata.name)").message("the stream's server-side name (spec.name, or metadata.name when omitted) cannot change")
)]
#[x_kube(validation = Rule::new("self.connectionRef == oldSelf.connectionRef").message("connectionRef cannot change"))]
#[x_kube(validation = Rule::new("!has(oldSelf.storage) || (has(self.storage) && self.storage == oldSelf.storage)").message("storage cannot change once set"))]
#[x_kube(validation = Rule::new("!has(oldSelf.mirror) || (has(self.mirror) && self.mirror == oldSelf.mirror)").message("mirror cannot change once set"))]
#[x_kube(validation = Rule::new("!has(oldSelf.allowMsgCounter) || (has(self.allowMsgCounter) && self.allowMsgCounter == oldSelf.allowMsgCounter)").message("allowMsgCounter cannot change once set"))]
#[x_kube(validation = Rule::new("!has(oldSelf.persistMode) || (has(self.persistMode) && self.persistMode == oldSelf.persistMode)").message("persistMode cannot change once set"))]
#[x_kube(validation = Rule::new("!has(oldSelf.retention) || ((has(self.retention) && self.retention == 'WorkQueue') == (oldSelf.retention == 'WorkQueue'))").message("retention cannot change to or from WorkQueue"))]
#[x_kube(validation = Rule::new("!has(oldSelf.sealed) || !oldSelf.sealed || (has(self.sealed) && self.sealed)").message("sealed cannot be turned off once true"))]
#[x_kube(validation = Rule::new("!has(oldSelf.denyDelete) || !oldSelf.denyDelete || (has(self.denyDelete) && self.denyDelete)").message("denyDelete cannot be turned off once true"))]
#[x_kube(validation = Rule::new("!has(oldSelf.denyPurge) || !oldSelf.denyPurge || (has(self.denyPurge) && self.denyPurge)").message("denyPurge cannot be turned off once true"))]
#[x_kube(validation = Rule::new("!has(oldSelf.allowMsgTTL) || !oldSelf.allowMsgTTL || (has(self.allowMsgTTL) && self.allowMsgTTL)").message("allowMsgTTL cannot be turned off once true"))]
#[x_kube(validation = Rule::new("!has(oldSelf.allowMsgSchedules) || !oldSelf.allowMsgSchedules || (has(self.allowMsgSchedules) && self.allowMsgSchedules)").message("allowMsgSchedules cannot be turned off once true"))]
#[serde(rename_all = "camelCase")]
pub struct NatsStreamSpec {
    /// The NatsConnection the stream is managed through; its credentials decide the account.
    /// Cannot change.
    pub connection_ref: ObjectReference,
    /// What to do about a stream of this name the controller does not own.
    #[serde(default)]
    pub adoption_policy: AdoptionPolicy,
    /// What deleting this resource does to the stream: Retain (default) keeps it on the server.
    #[serde(default = "super::lifecycle::default_retain")]
    pub deletion_policy: DeletionPolicy,
    /// What a Terminal condition waits for: an edit (Hold, default) or a recheck every resync (Retry).
    #[serde(default)]
    pub terminal_policy: TerminalPolicy,

    /// The server-side stream name; metadata.name when omitted. Cannot change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255), regex(pattern = r"^[^.*>/\\\s]+$"))]
    pub name: Option<String>,
    /// A description of the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub description: Option<String>,
    /// Subjects the stream captures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    /// How messages are retained: Limits (server default), Interest or WorkQueue.
    /// Cannot change to or from WorkQueue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<RetentionPolicy>,
    /// The most consumers the stream may have; -1 for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_consumers: Option<i64>,
    /// The most messages the stream keeps; -1 for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_msgs: Option<i64>,
    /// The most bytes the stream keeps (e.g. `10Gi`); -1 for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<Quantity>,
    /// What a full stream discards: Old (server default) or New.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discard: Option<DiscardPolicy>,
    /// With discard New, refuse new messages per subject once maxMsgsPerSubject is reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discard_new_per_subject: Option<bool>,
    /// How long a message is kept (Go duration, e.g. `720h`); `0` keeps it forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<GoDuration>,
    /// The most messages kept per subject; -1 for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_msgs_per_subject: Option<i64>,
    /// The largest message accepted (e.g. `1Mi`); -1 for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_msg_size: Option<Quantity>,
    /// Where messages are stored: File (server default) or Memory. Cannot change once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageType>,
    /// How many servers hold a copy, 1 to 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 5))]
    pub replicas: Option<i32>,
    /// Do not acknowledge publishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_ack: Option<bool>,
    /// The window in which a repeated Nats-Msg-Id is discarded as a duplicate (Go duration, e.g. `2m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<GoDuration>,
    /// Where the replicas are placed. A declared cluster pins the stream; changing it moves the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// The stream this one mirrors. Cannot change once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<StreamSource>,
    /// Streams this one sources messages from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub sources: Vec<StreamSource>,
    /// Seal the stream: no message can be added, deleted or purged. Cannot be turned off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<bool>,
    /// Refuse deleting single messages. Cannot be turned off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_delete: Option<bool>,
    /// Refuse purging the stream. Cannot be turned off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_purge: Option<bool>,
    /// Allow the Nats-Rollup header to purge older messages (nats-server `allow_rollup_hdrs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_rollup: Option<bool>,
    /// Compression of stored messages: None (server default) or S2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<StoreCompression>,
    /// The sequence number of the first message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub first_seq: Option<i64>,
    /// A transform applied to incoming subjects before storing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_transform: Option<SubjectTransform>,
    /// Republish stored messages to another subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub republish: Option<Republish>,
    /// Allow direct get of single messages from any replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_direct: Option<bool>,
    /// Serve direct gets of the mirrored stream from this mirror too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_direct: Option<bool>,
    /// Defaults for the stream's consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_limits: Option<StreamConsumerLimits>,
    /// Metadata of the stream. The controller merges its ownership marker into it and owns that key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Honour the Nats-TTL header (per-message TTLs). Cannot be turned off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "allowMsgTTL")]
    pub allow_msg_ttl: Option<bool>,
    /// How long the delete markers left by subject deletes live (Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "subjectDeleteMarkerTTL")]
    pub subject_delete_marker_ttl: Option<GoDuration>,
    /// Make this a counter stream. Cannot change once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_msg_counter: Option<bool>,
    /// Allow atomic batch publishes (nats-server `allow_atomic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_atomic_publish: Option<bool>,
    /// Allow scheduled messages. Cannot be turned off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_msg_schedules: Option<bool>,
    /// When stored messages are flushed: Default or Async. Cannot change once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persist_mode: Option<PersistMode>,
    /// Allow fast batch publishes (nats-server `allow_batched`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_batch_publish: Option<bool>,
}

/// Consumers moved with a stream.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferConsumers {
    /// Consumers already moved.
    #[serde(default)]
    pub moved: u32,
    /// Consumers to move.
    #[serde(default)]
    pub total: u32,
}

/// A placement move of the stream in progress.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamTransfer {
    /// The NATS cluster the stream leaves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The NATS cluster the stream moves to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// When the move began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<Time>,
    /// The replicas in the destination.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaState>,
    /// The stream's consumers moved so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumers: Option<TransferConsumers>,
}

/// The observed state of a stream.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsStreamStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, Synced, Terminal and Adopted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Conditions,
    /// When the stream was last compared with spec; a comparison that found nothing to change is written at most every
    /// 30 minutes (a resync writes no status), so it may be up to that much older than the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced_time: Option<Time>,
    /// When a Terminal condition under terminalPolicy Retry is rechecked next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_check_time: Option<Time>,
    /// The ownership marker found on the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<super::Ownership>,
    /// The stream's state on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerState>,
    /// A placement move to another NATS cluster in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<StreamTransfer>,
}

impl NatsStream {
    /// The server-side stream name: spec.name, or metadata.name when omitted.
    pub fn stream_name(&self) -> &str {
        self.spec
            .name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}
