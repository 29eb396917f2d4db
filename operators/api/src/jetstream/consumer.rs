//! NatsConsumer: a JetStream consumer, nats-server's `ConsumerConfig` in camelCase.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AdoptionPolicy, DeletionPolicy, GoDuration, Metadata, SyncStatus, TerminalPolicy};
use crate::common::ObjectReference;

/// Where in the stream a consumer starts (nats-server `deliver_policy`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 32))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum DeliverPolicy {
    /// From the first message (the server's default).
    All,
    /// From the last message.
    Last,
    /// From messages stored after the consumer is created.
    New,
    /// From optStartSeq.
    ByStartSequence,
    /// From the first message at or after optStartTime.
    ByStartTime,
    /// From the last message of every subject.
    LastPerSubject,
}

/// How deliveries are acknowledged (nats-server `ack_policy`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 32))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum AckPolicy {
    /// No acknowledgement.
    None,
    /// Acknowledging a message acknowledges every one before it.
    All,
    /// Every message is acknowledged on its own (the server's default for pull consumers).
    Explicit,
    /// Acknowledged through flow-control responses.
    FlowControl,
}

/// The pace of delivering stored messages (nats-server `replay_policy`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 32))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum ReplayPolicy {
    /// As fast as possible (the server's default).
    Instant,
    /// At the pace they were stored.
    Original,
}

/// How pull requests of priority groups are served (nats-server `priority_policy`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 32))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum PriorityPolicy {
    /// No priority.
    None,
    /// Serve a request only past its overflow criteria.
    Overflow,
    /// One client is pinned and served; the others stand by.
    PinnedClient,
    /// Requests of lower priority number are served first.
    Prioritized,
}

/// A JetStream consumer: pull, or push when deliverSubject is set. Every NATS field is
/// nats-server's ConsumerConfig field of the same name in camelCase; an omitted field takes the
/// server's value. Durations are Go duration strings (`30s`, `1h30m`); times are RFC 3339.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "jetstream.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsConsumer",
    namespaced,
    status = "SyncStatus",
    category = "nats",
    category = "nats-jetstream",
    doc = "A JetStream consumer of a stream, managed through a NatsConnection or its NatsStream.",
    printcolumn(name = "Stream", type_ = "string", json_path = ".spec.stream"),
    printcolumn(name = "Stream Ref", type_ = "string", json_path = ".spec.streamRef.name"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Synced", type_ = "string", json_path = ".status.conditions[?(@.type==\"Synced\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("(has(self.spec.name) ? self.spec.name : self.metadata.name) == (has(oldSelf.spec.name) ? oldSelf.spec.name : oldSelf.metadata.name)").message("the consumer's server-side name (spec.name, or metadata.name when omitted) cannot change")
)]
#[x_kube(validation = Rule::new("has(self.stream) != has(self.streamRef)").message("set exactly one of stream (a server-side stream name) and streamRef (a NatsStream)"))]
#[x_kube(validation = Rule::new("!has(self.stream) || has(self.connectionRef)").message("a consumer naming its stream by stream needs connectionRef"))]
#[x_kube(validation = Rule::new("!has(self.streamRef) || !has(self.connectionRef)").message("a consumer naming its stream by streamRef inherits the NatsStream's connection: leave connectionRef unset"))]
#[x_kube(validation = Rule::new("has(self.connectionRef) == has(oldSelf.connectionRef) && (!has(self.connectionRef) || self.connectionRef == oldSelf.connectionRef)").message("connectionRef cannot change"))]
#[x_kube(validation = Rule::new("has(self.stream) == has(oldSelf.stream) && (!has(self.stream) || self.stream == oldSelf.stream)").message("stream cannot change"))]
#[x_kube(validation = Rule::new("has(self.streamRef) == has(oldSelf.streamRef) && (!has(self.streamRef) || self.streamRef == oldSelf.streamRef)").message("streamRef cannot change"))]
#[x_kube(validation = Rule::new("!(has(self.filterSubject) && has(self.filterSubjects) && size(self.filterSubjects) > 0)").message("set at most one of filterSubject and filterSubjects"))]
#[x_kube(validation = Rule::new("self.recreateOnImmutableChange || !has(oldSelf.deliverPolicy) || (has(self.deliverPolicy) && self.deliverPolicy == oldSelf.deliverPolicy)").message("deliverPolicy cannot change unless recreateOnImmutableChange is true"))]
#[x_kube(validation = Rule::new("self.recreateOnImmutableChange || !has(oldSelf.ackPolicy) || (has(self.ackPolicy) && self.ackPolicy == oldSelf.ackPolicy)").message("ackPolicy cannot change unless recreateOnImmutableChange is true"))]
#[x_kube(validation = Rule::new("self.recreateOnImmutableChange || !has(oldSelf.replayPolicy) || (has(self.replayPolicy) && self.replayPolicy == oldSelf.replayPolicy)").message("replayPolicy cannot change unless recreateOnImmutableChange is true"))]
#[x_kube(validation = Rule::new("self.recreateOnImmutableChange || !has(oldSelf.optStartSeq) || (has(self.optStartSeq) && self.optStartSeq == oldSelf.optStartSeq)").message("optStartSeq cannot change unless recreateOnImmutableChange is true"))]
#[x_kube(validation = Rule::new("self.recreateOnImmutableChange || !has(oldSelf.optStartTime) || (has(self.optStartTime) && self.optStartTime == oldSelf.optStartTime)").message("optStartTime cannot change unless recreateOnImmutableChange is true"))]
#[x_kube(validation = Rule::new("self.recreateOnImmutableChange || !has(oldSelf.heartbeat) || (has(self.heartbeat) && self.heartbeat == oldSelf.heartbeat)").message("heartbeat cannot change unless recreateOnImmutableChange is true"))]
#[x_kube(validation = Rule::new("self.recreateOnImmutableChange || !has(oldSelf.flowControl) || (has(self.flowControl) && self.flowControl == oldSelf.flowControl)").message("flowControl cannot change unless recreateOnImmutableChange is true"))]
#[x_kube(validation = Rule::new("self.recreateOnImmutableChange || !has(oldSelf.maxWaiting) || (has(self.maxWaiting) && self.maxWaiting == oldSelf.maxWaiting)").message("maxWaiting cannot change unless recreateOnImmutableChange is true"))]
#[serde(rename_all = "camelCase")]
pub struct NatsConsumerSpec {
    /// The NatsConnection the consumer is managed through; required with stream, left unset with
    /// streamRef (the NatsStream's connection is used). Cannot change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<ObjectReference>,
    /// The server-side name of the consumer's stream, for a stream with no NatsStream.
    /// Exclusive with streamRef; cannot change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub stream: Option<String>,
    /// The NatsStream of the consumer; the consumer waits for it and uses its connection.
    /// Exclusive with stream; cannot change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_ref: Option<ObjectReference>,
    /// Delete and recreate the consumer when a field nats-server cannot change is edited
    /// (deliverPolicy, ackPolicy, replayPolicy, optStartSeq, optStartTime, heartbeat, flowControl,
    /// maxWaiting); otherwise such an edit is refused. Recreating loses the consumer's delivery state.
    #[serde(default)]
    pub recreate_on_immutable_change: bool,
    /// What to do about a consumer of this name the controller does not own.
    #[serde(default)]
    pub adoption_policy: AdoptionPolicy,
    /// What deleting this resource does to the consumer: Delete (default) removes it from the server.
    #[serde(default = "super::lifecycle::default_delete")]
    pub deletion_policy: DeletionPolicy,
    /// What a Terminal condition waits for: an edit (Hold, default) or a recheck every resync (Retry).
    #[serde(default)]
    pub terminal_policy: TerminalPolicy,

    /// The server-side consumer name (a durable consumer); metadata.name when omitted. Cannot change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255), regex(pattern = r"^[^.*>/\\\s]+$"))]
    pub name: Option<String>,
    /// A description of the consumer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub description: Option<String>,
    /// Where in the stream delivery starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver_policy: Option<DeliverPolicy>,
    /// The stream sequence to start at, with deliverPolicy ByStartSequence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub opt_start_seq: Option<i64>,
    /// The time to start at, with deliverPolicy ByStartTime (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opt_start_time: Option<Time>,
    /// How deliveries are acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_policy: Option<AckPolicy>,
    /// How long the server waits for an acknowledgement before redelivering (Go duration, e.g. `30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_wait: Option<GoDuration>,
    /// How many times a message is delivered at most; -1 for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deliver: Option<i64>,
    /// Redelivery delays, one per attempt (Go durations); overrides ackWait.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub back_off: Vec<GoDuration>,
    /// Deliver only messages on this subject filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_subject: Option<String>,
    /// Deliver only messages on these subject filters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filter_subjects: Vec<String>,
    /// The pace of delivering stored messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_policy: Option<ReplayPolicy>,
    /// The delivery rate limit in bits per second (nats-server `rate_limit_bps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub rate_limit: Option<i64>,
    /// The share of acknowledgements sampled as advisories, e.g. `100%` (nats-server `sample_freq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_frequency: Option<String>,
    /// The most pull requests waiting at once (pull consumers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_waiting: Option<i64>,
    /// The most messages delivered and not yet acknowledged; -1 for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ack_pending: Option<i64>,
    /// Use flow control (push consumers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_control: Option<bool>,
    /// Deliver headers only, without payloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_only: Option<bool>,
    /// The largest batch a pull request may ask for (nats-server `max_batch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_batch: Option<i64>,
    /// The longest expiry a pull request may ask for (Go duration; nats-server `max_expires`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_expires: Option<GoDuration>,
    /// The most bytes a pull request may ask for (nats-server `max_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_max_bytes: Option<Quantity>,
    /// Deliver to this subject: set, the consumer is a push consumer; omitted, a pull consumer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver_subject: Option<String>,
    /// The queue group of a push consumer's subscribers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver_group: Option<String>,
    /// The idle heartbeat interval of a push consumer (Go duration; nats-server `idle_heartbeat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<GoDuration>,
    /// Delete the consumer after this long without activity (Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inactive_threshold: Option<GoDuration>,
    /// How many servers hold the consumer's state, 0 to 5; 0 takes the stream's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 5))]
    pub replicas: Option<i32>,
    /// Keep the consumer's state in memory (nats-server `mem_storage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_storage: Option<bool>,
    /// Metadata of the consumer. The controller merges its ownership marker into it and owns that key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Pause delivery until this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_until: Option<Time>,
    /// The priority groups pull requests may name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub priority_groups: Vec<String>,
    /// How requests of the priority groups are served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_policy: Option<PriorityPolicy>,
    /// How long a pinned client keeps its pin without pulling (Go duration; nats-server `priority_timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "pinnedTTL")]
    pub pinned_ttl: Option<GoDuration>,
}

impl NatsConsumer {
    /// The server-side consumer name: spec.name, or metadata.name when omitted.
    pub fn consumer_name(&self) -> &str {
        self.spec
            .name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}

/// The tail of the message refusing an edit of a consumer field nats-server cannot change.
pub const IMMUTABLE_CONSUMER_FIELD: &str = "cannot change unless recreateOnImmutableChange is true";
