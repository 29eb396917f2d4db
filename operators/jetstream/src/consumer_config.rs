//! NatsConsumer spec ↔ nats-server's `ConsumerConfig` JSON (the `config` of
//! `$JS.API.CONSUMER.CREATE.<stream>.<consumer>` and of `$JS.API.CONSUMER.INFO`).
//!
//! Every consumer the controller manages is durable: `name` and `durable_name` are both the
//! server-side name.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nats_api::jetstream::{
    AckPolicy, DeliverPolicy, NatsConsumerSpec, PriorityPolicy, ReplayPolicy,
};
use serde_json::{Map, Value, json};

use crate::drift::{Field, Mutability as M, ServerDefault as D};
use crate::ownership::{merge_marker, user_metadata};
use crate::server_config::{MappingError, bool_of, bytes, nanos, put, some, str_of, strings};
use crate::units::{bytes_quantity, duration_nanos, nanos_duration};

/// Every ConsumerConfig field the controller compares (consumer.go setConsumerConfigDefaults and
/// the update checks; the immutable ones are design §6.4's list).
pub const CONSUMER_FIELDS: &[Field] = &[
    Field::new("name", "name", D::Derived, M::Immutable),
    Field::new("durable_name", "name", D::Derived, M::Immutable),
    Field::new("description", "description", D::Fixed("\"\""), M::Mutable),
    Field::new(
        "deliver_policy",
        "deliverPolicy",
        D::Fixed("\"all\""),
        M::Immutable,
    ),
    Field::new("opt_start_seq", "optStartSeq", D::Fixed("0"), M::Immutable),
    Field::new(
        "opt_start_time",
        "optStartTime",
        D::Fixed("null"),
        M::Immutable,
    ),
    // Clients send explicit; what the server does with an omitted one is version-dependent.
    Field::new("ack_policy", "ackPolicy", D::Derived, M::Immutable),
    // 30s for explicit and all, the first backoff entry when backoff is set.
    Field::new("ack_wait", "ackWait", D::Derived, M::Mutable),
    Field::new("max_deliver", "maxDeliver", D::Fixed("-1"), M::Mutable),
    Field::new("backoff", "backOff", D::Fixed("[]"), M::Mutable),
    Field::new(
        "filter_subject",
        "filterSubject",
        D::Fixed("\"\""),
        M::Mutable,
    ),
    Field::new(
        "filter_subjects",
        "filterSubjects",
        D::Fixed("[]"),
        M::Mutable,
    ),
    Field::new(
        "replay_policy",
        "replayPolicy",
        D::Fixed("\"instant\""),
        M::Immutable,
    ),
    Field::new("rate_limit_bps", "rateLimit", D::Fixed("0"), M::Mutable),
    Field::new(
        "sample_freq",
        "sampleFrequency",
        D::Fixed("\"\""),
        M::Mutable,
    ),
    // 512 for pull consumers, 0 for push.
    Field::new("max_waiting", "maxWaiting", D::Derived, M::Immutable),
    // The stream's consumer limit, else 1000 clamped by server and account limits.
    Field::new("max_ack_pending", "maxAckPending", D::Derived, M::Mutable),
    Field::new(
        "flow_control",
        "flowControl",
        D::Fixed("false"),
        M::Immutable,
    ),
    Field::new("headers_only", "headersOnly", D::Fixed("false"), M::Mutable),
    // The server's limits.
    Field::new("max_batch", "maxRequestBatch", D::Derived, M::Mutable),
    Field::new("max_expires", "maxRequestExpires", D::Derived, M::Mutable),
    Field::new("max_bytes", "maxRequestMaxBytes", D::Derived, M::Mutable),
    Field::new(
        "deliver_subject",
        "deliverSubject",
        D::Fixed("\"\""),
        M::Mutable,
    ),
    Field::new(
        "deliver_group",
        "deliverGroup",
        D::Fixed("\"\""),
        M::Mutable,
    ),
    Field::new("idle_heartbeat", "heartbeat", D::Fixed("0"), M::Immutable),
    // The stream's consumer limit.
    Field::new(
        "inactive_threshold",
        "inactiveThreshold",
        D::Derived,
        M::Mutable,
    ),
    // 0 means the stream's replicas; the server may report either.
    Field::new("num_replicas", "replicas", D::Derived, M::Mutable),
    Field::new(
        "mem_storage",
        "memoryStorage",
        D::Fixed("false"),
        M::Mutable,
    ),
    Field::new("metadata", "metadata", D::Fixed("{}"), M::Mutable),
    Field::new("pause_until", "pauseUntil", D::Fixed("null"), M::Mutable),
    Field::new(
        "priority_groups",
        "priorityGroups",
        D::Fixed("[]"),
        M::Mutable,
    ),
    Field::new("priority_policy", "priorityPolicy", D::Derived, M::Mutable),
    // 2m for pinned_client.
    Field::new("priority_timeout", "pinnedTTL", D::Derived, M::Mutable),
];

/// The server config a NatsConsumer asks for, named `name`, owned by `uid`: what it delivers,
/// how it is acknowledged, pull and push settings, its storage and its priority groups, each only
/// as far as spec sets them, plus the ownership marker.
pub fn desired(
    name: &str,
    spec: &NatsConsumerSpec,
    uid: &str,
) -> Result<Map<String, Value>, MappingError> {
    let mut c = Map::new();
    c.insert("name".into(), json!(name));
    c.insert("durable_name".into(), json!(name));
    put(&mut c, "description", some(spec.description.as_ref()));
    delivery(&mut c, spec);
    acks(&mut c, spec)?;
    flow(&mut c, spec)?;
    push(&mut c, spec)?;
    put(&mut c, "num_replicas", some(spec.replicas));
    put(&mut c, "mem_storage", some(spec.memory_storage));
    c.insert(
        "metadata".into(),
        Value::Object(merge_marker(spec.metadata.as_ref(), uid)),
    );
    priority(&mut c, spec)?;
    Ok(c)
}

/// Where delivery starts, which subjects, at what pace.
fn delivery(c: &mut Map<String, Value>, spec: &NatsConsumerSpec) {
    put(
        c,
        "deliver_policy",
        spec.deliver_policy.map(|p| json!(deliver_str(p))),
    );
    put(c, "opt_start_seq", some(spec.opt_start_seq));
    put(c, "opt_start_time", some(spec.opt_start_time.as_ref()));
    put(c, "filter_subject", some(spec.filter_subject.as_ref()));
    if !spec.filter_subjects.is_empty() {
        c.insert("filter_subjects".into(), json!(spec.filter_subjects));
    }
    put(
        c,
        "replay_policy",
        spec.replay_policy.map(|p| json!(replay_str(p))),
    );
    put(c, "rate_limit_bps", some(spec.rate_limit));
    put(c, "sample_freq", some(spec.sample_frequency.as_ref()));
}

/// How messages are acknowledged and redelivered.
fn acks(c: &mut Map<String, Value>, spec: &NatsConsumerSpec) -> Result<(), MappingError> {
    put(c, "ack_policy", spec.ack_policy.map(|p| json!(ack_str(p))));
    put(c, "ack_wait", nanos(&spec.ack_wait, "ackWait")?);
    put(c, "max_deliver", some(spec.max_deliver));
    if !spec.back_off.is_empty() {
        let list = spec
            .back_off
            .iter()
            .map(|d| duration_nanos("backOff", d).map(|n| json!(n)))
            .collect::<Result<Vec<_>, _>>()?;
        c.insert("backoff".into(), Value::Array(list));
    }
    put(c, "max_ack_pending", some(spec.max_ack_pending));
    Ok(())
}

/// Pull requests and flow control: waiting pulls, batch, expiry and size of a request.
fn flow(c: &mut Map<String, Value>, spec: &NatsConsumerSpec) -> Result<(), MappingError> {
    put(c, "max_waiting", some(spec.max_waiting));
    put(c, "flow_control", some(spec.flow_control));
    put(c, "headers_only", some(spec.headers_only));
    put(c, "max_batch", some(spec.max_request_batch));
    put(
        c,
        "max_expires",
        nanos(&spec.max_request_expires, "maxRequestExpires")?,
    );
    put(
        c,
        "max_bytes",
        bytes(&spec.max_request_max_bytes, "maxRequestMaxBytes")?,
    );
    Ok(())
}

/// A push consumer's subject and group, heartbeats, and when an idle consumer goes.
fn push(c: &mut Map<String, Value>, spec: &NatsConsumerSpec) -> Result<(), MappingError> {
    put(c, "deliver_subject", some(spec.deliver_subject.as_ref()));
    put(c, "deliver_group", some(spec.deliver_group.as_ref()));
    put(c, "idle_heartbeat", nanos(&spec.heartbeat, "heartbeat")?);
    put(
        c,
        "inactive_threshold",
        nanos(&spec.inactive_threshold, "inactiveThreshold")?,
    );
    Ok(())
}

/// Pausing, and the priority groups with their policy and pinned TTL.
fn priority(c: &mut Map<String, Value>, spec: &NatsConsumerSpec) -> Result<(), MappingError> {
    put(c, "pause_until", some(spec.pause_until.as_ref()));
    if !spec.priority_groups.is_empty() {
        c.insert("priority_groups".into(), json!(spec.priority_groups));
    }
    put(
        c,
        "priority_policy",
        spec.priority_policy.map(|p| json!(priority_str(p))),
    );
    put(c, "priority_timeout", nanos(&spec.pinned_ttl, "pinnedTTL")?);
    Ok(())
}

/// The `$JS.API.CONSUMER.CREATE` request body: `action` is `create` for a new consumer and
/// `update` for an existing one, so the server refuses rather than silently does the other.
pub fn create_request(stream: &str, config: &Map<String, Value>, update: bool) -> Value {
    json!({
        "stream_name": stream,
        "config": config,
        "action": if update { "update" } else { "create" },
    })
}

/// The NATS fields of a NatsConsumer read from the server's config (what Adopt writes into spec).
/// connectionRef, stream/streamRef and the lifecycle fields come from `base`.
pub fn spec_from_server(
    base: &NatsConsumerSpec,
    server: &Value,
) -> Result<NatsConsumerSpec, MappingError> {
    let g = |k: &str| server.get(k).filter(|v| !v.is_null());
    let int = |k: &str| g(k).and_then(Value::as_i64);
    let positive = |k: &str| int(k).filter(|n| *n > 0);
    let time = |k: &str| g(k).and_then(|t| serde_json::from_value::<Time>(t.clone()).ok());
    Ok(NatsConsumerSpec {
        connection_ref: base.connection_ref.clone(),
        stream: base.stream.clone(),
        stream_ref: base.stream_ref.clone(),
        recreate_on_immutable_change: base.recreate_on_immutable_change,
        adoption_policy: base.adoption_policy,
        deletion_policy: base.deletion_policy,
        terminal_policy: base.terminal_policy,
        name: str_of(g("name")).or_else(|| str_of(g("durable_name"))),
        description: str_of(g("description")).filter(|d| !d.is_empty()),
        deliver_policy: g("deliver_policy").map(deliver_of).transpose()?,
        opt_start_seq: positive("opt_start_seq"),
        opt_start_time: time("opt_start_time"),
        ack_policy: g("ack_policy").map(ack_of).transpose()?,
        ack_wait: positive("ack_wait").map(nanos_duration),
        max_deliver: int("max_deliver"),
        back_off: g("backoff")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_i64)
                    .map(nanos_duration)
                    .collect()
            })
            .unwrap_or_default(),
        filter_subject: str_of(g("filter_subject")).filter(|s| !s.is_empty()),
        filter_subjects: strings(g("filter_subjects")),
        replay_policy: g("replay_policy").map(replay_of).transpose()?,
        rate_limit: positive("rate_limit_bps"),
        sample_frequency: str_of(g("sample_freq")).filter(|s| !s.is_empty()),
        max_waiting: int("max_waiting"),
        max_ack_pending: int("max_ack_pending"),
        flow_control: Some(bool_of(g("flow_control"))),
        headers_only: Some(bool_of(g("headers_only"))),
        max_request_batch: positive("max_batch"),
        max_request_expires: positive("max_expires").map(nanos_duration),
        max_request_max_bytes: positive("max_bytes").map(bytes_quantity),
        deliver_subject: str_of(g("deliver_subject")).filter(|s| !s.is_empty()),
        deliver_group: str_of(g("deliver_group")).filter(|s| !s.is_empty()),
        heartbeat: positive("idle_heartbeat").map(nanos_duration),
        inactive_threshold: positive("inactive_threshold").map(nanos_duration),
        replicas: int("num_replicas").and_then(|v| i32::try_from(v).ok()),
        memory_storage: Some(bool_of(g("mem_storage"))),
        metadata: user_metadata(server),
        pause_until: time("pause_until"),
        priority_groups: strings(g("priority_groups")),
        priority_policy: g("priority_policy").map(priority_of).transpose()?,
        pinned_ttl: positive("priority_timeout").map(nanos_duration),
    })
}

fn unknown(key: &'static str, v: &Value) -> MappingError {
    MappingError::UnknownServerValue {
        key,
        value: v.to_string(),
    }
}

const DELIVER: &[(DeliverPolicy, &str)] = &[
    (DeliverPolicy::All, "all"),
    (DeliverPolicy::Last, "last"),
    (DeliverPolicy::New, "new"),
    (DeliverPolicy::ByStartSequence, "by_start_sequence"),
    (DeliverPolicy::ByStartTime, "by_start_time"),
    (DeliverPolicy::LastPerSubject, "last_per_subject"),
];

const ACK: &[(AckPolicy, &str)] = &[
    (AckPolicy::None, "none"),
    (AckPolicy::All, "all"),
    (AckPolicy::Explicit, "explicit"),
    (AckPolicy::FlowControl, "flow_control"),
];

const REPLAY: &[(ReplayPolicy, &str)] = &[
    (ReplayPolicy::Instant, "instant"),
    (ReplayPolicy::Original, "original"),
];

const PRIORITY: &[(PriorityPolicy, &str)] = &[
    (PriorityPolicy::None, "none"),
    (PriorityPolicy::Overflow, "overflow"),
    (PriorityPolicy::PinnedClient, "pinned_client"),
    (PriorityPolicy::Prioritized, "prioritized"),
];

fn to_str<T: PartialEq + Copy>(table: &[(T, &'static str)], v: T) -> &'static str {
    table
        .iter()
        .find(|(t, _)| *t == v)
        .map(|(_, s)| *s)
        .unwrap_or_default()
}

fn from_str<T: Copy>(
    table: &[(T, &'static str)],
    key: &'static str,
    v: &Value,
) -> Result<T, MappingError> {
    table
        .iter()
        .find(|(_, s)| Some(*s) == v.as_str())
        .map(|(t, _)| *t)
        .ok_or_else(|| unknown(key, v))
}

fn deliver_str(p: DeliverPolicy) -> &'static str {
    to_str(DELIVER, p)
}
fn deliver_of(v: &Value) -> Result<DeliverPolicy, MappingError> {
    from_str(DELIVER, "deliver_policy", v)
}
fn ack_str(p: AckPolicy) -> &'static str {
    to_str(ACK, p)
}
fn ack_of(v: &Value) -> Result<AckPolicy, MappingError> {
    from_str(ACK, "ack_policy", v)
}
fn replay_str(p: ReplayPolicy) -> &'static str {
    to_str(REPLAY, p)
}
fn replay_of(v: &Value) -> Result<ReplayPolicy, MappingError> {
    from_str(REPLAY, "replay_policy", v)
}
fn priority_str(p: PriorityPolicy) -> &'static str {
    to_str(PRIORITY, p)
}
fn priority_of(v: &Value) -> Result<PriorityPolicy, MappingError> {
    from_str(PRIORITY, "priority_policy", v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::{Decision, decide, drifted, names};
    use crate::ownership::OWNER_METADATA_KEY;
    use rstest::rstest;

    const UID: &str = "uid-c";

    fn spec(v: Value) -> NatsConsumerSpec {
        let mut base = json!({"connectionRef": {"name": "main"}, "stream": "ORDERS"});
        if let (Some(b), Some(o)) = (base.as_object_mut(), v.as_object()) {
            b.extend(o.clone());
        }
        serde_json::from_value(base).expect("a valid NatsConsumer spec")
    }

    #[rstest]
    #[case::pull_consumer_name_only(json!({}), json!({"name": "worker", "durable_name": "worker", "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::policies_in_the_servers_spelling(json!({"deliverPolicy": "ByStartSequence", "optStartSeq": 42, "ackPolicy": "Explicit", "replayPolicy": "Original"}),
        json!({"name": "worker", "durable_name": "worker", "deliver_policy": "by_start_sequence", "opt_start_seq": 42, "ack_policy": "explicit", "replay_policy": "original", "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::durations_and_backoff_in_nanoseconds(json!({"ackWait": "30s", "backOff": ["1s", "5s"], "maxRequestExpires": "1m"}),
        json!({"name": "worker", "durable_name": "worker", "ack_wait": 30_000_000_000i64, "backoff": [1_000_000_000i64, 5_000_000_000i64], "max_expires": 60_000_000_000i64, "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::push_consumer_fields_renamed(json!({"deliverSubject": "out.worker", "heartbeat": "5s", "flowControl": true, "rateLimit": 1000}),
        json!({"name": "worker", "durable_name": "worker", "deliver_subject": "out.worker", "idle_heartbeat": 5_000_000_000i64, "flow_control": true, "rate_limit_bps": 1000, "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::pinned_priority_group(json!({"priorityGroups": ["jobs"], "priorityPolicy": "PinnedClient", "pinnedTTL": "2m"}),
        json!({"name": "worker", "durable_name": "worker", "priority_groups": ["jobs"], "priority_policy": "pinned_client", "priority_timeout": 120_000_000_000i64, "metadata": {OWNER_METADATA_KEY: UID}}))]
    fn a_consumer_spec_maps_to_the_servers_config(#[case] s: Value, #[case] want: Value) {
        let got = desired("worker", &spec(s), UID).expect("maps");
        assert_eq!(Value::Object(got), want);
    }

    /// What nats-server 2.15 returns for a pull consumer created with ack_policy explicit.
    fn server_pull_config() -> Value {
        json!({
            "name": "worker", "durable_name": "worker", "deliver_policy": "all", "ack_policy": "explicit",
            "ack_wait": 30_000_000_000i64, "max_deliver": -1, "replay_policy": "instant",
            "max_waiting": 512, "max_ack_pending": 1000, "num_replicas": 0,
            "metadata": {OWNER_METADATA_KEY: UID, "_nats.ver": "2.15.1"}
        })
    }

    #[rstest]
    #[case::untouched_consumer_is_in_sync(json!({}), false, Decision::InSync)]
    #[case::max_deliver_edited_is_an_update(json!({"max_deliver": 3}), false, Decision::Update(vec!["maxDeliver".into()]))]
    #[case::deliver_policy_differs_refused_without_recreate(json!({"deliver_policy": "new"}), false, Decision::Refused(vec!["deliverPolicy".into()]))]
    #[case::deliver_policy_differs_recreates_with_recreate(json!({"deliver_policy": "new"}), true, Decision::Recreate(vec!["deliverPolicy".into()]))]
    #[case::ack_policy_differs_recreates(json!({"ack_policy": "none"}), true, Decision::Recreate(vec!["ackPolicy".into()]))]
    #[case::replay_policy_differs_refused(json!({"replay_policy": "original"}), false, Decision::Refused(vec!["replayPolicy".into()]))]
    fn consumer_drift_decides_update_recreate_or_refusal(
        #[case] edit: Value,
        #[case] recreate: bool,
        #[case] want: Decision,
    ) {
        let mut server = server_pull_config();
        if let (Some(s), Some(e)) = (server.as_object_mut(), edit.as_object()) {
            s.extend(e.clone());
        }
        let d = desired("worker", &spec(json!({"ackPolicy": "Explicit"})), UID).expect("maps");
        assert_eq!(
            decide(&drifted(CONSUMER_FIELDS, &d, &server), recreate),
            want
        );
    }

    #[test]
    fn an_adopted_consumer_re_maps_to_the_same_config() {
        let mut server = server_pull_config();
        if let Some(s) = server.as_object_mut() {
            s.insert(
                "backoff".into(),
                json!([1_000_000_000i64, 2_000_000_000i64]),
            );
            s.insert("filter_subjects".into(), json!(["orders.eu", "orders.us"]));
            s.insert("metadata".into(), json!({"team": "x"}));
        }
        let adopted = spec_from_server(&spec(json!({})), &server).expect("reads");
        let d = desired("worker", &adopted, UID).expect("maps");
        let drift = drifted(CONSUMER_FIELDS, &d, &server);
        assert_eq!(
            names(drift.iter()),
            vec!["metadata"],
            "only the marker is new"
        );
    }

    #[test]
    fn create_and_update_are_told_apart() {
        let d = desired("worker", &spec(json!({})), UID).expect("maps");
        assert_eq!(create_request("ORDERS", &d, false)["action"], "create");
        assert_eq!(create_request("ORDERS", &d, true)["action"], "update");
        assert_eq!(create_request("ORDERS", &d, true)["stream_name"], "ORDERS");
    }
}
