//! NatsStream spec ↔ nats-server's `StreamConfig` JSON (what `$JS.API.STREAM.CREATE/UPDATE` read
//! and `$JS.API.STREAM.INFO` returns).
//!
//! [`desired`] writes only what spec sets (plus the ownership marker and the values the server
//! would derive anyway), so the server fills the rest; [`spec_from_server`] reads every field back,
//! which is what Adopt writes into spec and AdoptOrCreate late-initializes from.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nats_api::jetstream::{
    DiscardPolicy, ExternalStream, NatsStreamSpec, PersistMode, Placement, Republish,
    RetentionPolicy, StorageType, StoreCompression, StreamConsumerLimits, StreamConsumerSource,
    StreamSource, SubjectTransform,
};
use serde_json::{Map, Value, json};

use crate::drift::{Field, Mutability as M, ServerDefault as D};
use crate::ownership::{merge_marker, user_metadata};
use crate::units::{UnitError, bytes_quantity, duration_nanos, nanos_duration, quantity_bytes};

/// A spec that cannot be written as a server config, or a server config that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MappingError {
    /// A duration or size that does not map onto the server's integer.
    #[error(transparent)]
    Unit(#[from] UnitError),
    /// A value in the server's config this controller does not know.
    #[error("server config field {key}: unknown value {value}")]
    UnknownServerValue {
        /// The server's JSON key.
        key: &'static str,
        /// The value found.
        value: String,
    },
    /// A server config that is not the kind of object expected (e.g. a KV_ stream that is not a bucket).
    #[error("stream {stream} is not a {kind}: {why}")]
    NotABucket {
        /// The stream's name.
        stream: String,
        /// key-value bucket or object store.
        kind: &'static str,
        /// What is missing.
        why: String,
    },
}

/// Every StreamConfig field the controller compares, with the server's default and mutability
/// (stream.go checkStreamCfg and configUpdateCheck; design §6.4).
pub const STREAM_FIELDS: &[Field] = &[
    Field::new("name", "name", D::Derived, M::Immutable),
    Field::new("description", "description", D::Fixed("\"\""), M::Mutable),
    // The server subscribes the stream to its own name when it has no subjects, mirror or sources.
    Field::new("subjects", "subjects", D::Derived, M::Mutable),
    Field::new(
        "retention",
        "retention",
        D::Fixed("\"limits\""),
        M::NotAcrossWorkQueue,
    ),
    Field::new("max_consumers", "maxConsumers", D::Fixed("-1"), M::Mutable),
    Field::new("max_msgs", "maxMsgs", D::Fixed("-1"), M::Mutable),
    Field::new("max_bytes", "maxBytes", D::Fixed("-1"), M::Mutable),
    Field::new("max_age", "maxAge", D::Fixed("0"), M::Mutable),
    Field::new(
        "max_msgs_per_subject",
        "maxMsgsPerSubject",
        D::Fixed("-1"),
        M::Mutable,
    ),
    Field::new("max_msg_size", "maxMsgSize", D::Fixed("-1"), M::Mutable),
    Field::new("discard", "discard", D::Fixed("\"old\""), M::Mutable),
    Field::new(
        "discard_new_per_subject",
        "discardNewPerSubject",
        D::Fixed("false"),
        M::Mutable,
    ),
    Field::new("storage", "storage", D::Fixed("\"file\""), M::Immutable),
    Field::new("num_replicas", "replicas", D::Fixed("1"), M::Mutable),
    Field::new("no_ack", "noAck", D::Fixed("false"), M::Mutable),
    // Two minutes, or maxAge when shorter, or the server's limit.
    Field::new("duplicate_window", "duplicates", D::Derived, M::Mutable),
    // The meta leader may record the cluster it placed the stream in.
    Field::new("placement", "placement", D::Derived, M::Mutable),
    Field::new("mirror", "mirror", D::Fixed("null"), M::Immutable),
    Field::new("sources", "sources", D::Fixed("[]"), M::Mutable),
    Field::new("sealed", "sealed", D::Fixed("false"), M::OneWay),
    Field::new("deny_delete", "denyDelete", D::Fixed("false"), M::OneWay),
    Field::new("deny_purge", "denyPurge", D::Fixed("false"), M::OneWay),
    Field::new(
        "allow_rollup_hdrs",
        "allowRollup",
        D::Fixed("false"),
        M::Mutable,
    ),
    Field::new(
        "compression",
        "compression",
        D::Fixed("\"none\""),
        M::Mutable,
    ),
    // Only read at creation.
    Field::new("first_seq", "firstSeq", D::Derived, M::Mutable),
    Field::new(
        "subject_transform",
        "subjectTransform",
        D::Fixed("null"),
        M::Mutable,
    ),
    Field::new("republish", "republish", D::Fixed("null"), M::Mutable),
    Field::new("allow_direct", "allowDirect", D::Fixed("false"), M::Mutable),
    // A mirror inherits its origin's allow_direct.
    Field::new("mirror_direct", "mirrorDirect", D::Derived, M::Mutable),
    Field::new(
        "consumer_limits",
        "consumerLimits",
        D::Fixed("{}"),
        M::Mutable,
    ),
    Field::new("metadata", "metadata", D::Fixed("{}"), M::Mutable),
    Field::new("allow_msg_ttl", "allowMsgTTL", D::Fixed("false"), M::OneWay),
    Field::new(
        "subject_delete_marker_ttl",
        "subjectDeleteMarkerTTL",
        D::Fixed("0"),
        M::Mutable,
    ),
    Field::new(
        "allow_msg_counter",
        "allowMsgCounter",
        D::Fixed("false"),
        M::Immutable,
    ),
    Field::new(
        "allow_atomic",
        "allowAtomicPublish",
        D::Fixed("false"),
        M::Mutable,
    ),
    Field::new(
        "allow_msg_schedules",
        "allowMsgSchedules",
        D::Fixed("false"),
        M::OneWay,
    ),
    Field::new(
        "persist_mode",
        "persistMode",
        D::Fixed("\"\""),
        M::Immutable,
    ),
    Field::new(
        "allow_batched",
        "allowBatchPublish",
        D::Fixed("false"),
        M::Mutable,
    ),
];

/// The server config a NatsStream asks for, named `name`, owned by `uid`.
pub fn desired(
    name: &str,
    spec: &NatsStreamSpec,
    uid: &str,
) -> Result<Map<String, Value>, MappingError> {
    let mut c = Map::new();
    c.insert("name".into(), json!(name));
    put(
        &mut c,
        "description",
        spec.description.as_ref().map(|d| json!(d)),
    );
    if !spec.subjects.is_empty() {
        c.insert("subjects".into(), json!(spec.subjects));
    }
    put(
        &mut c,
        "retention",
        spec.retention.map(|r| json!(retention_str(r))),
    );
    put(
        &mut c,
        "max_consumers",
        spec.max_consumers.map(|v| json!(v)),
    );
    put(&mut c, "max_msgs", spec.max_msgs.map(|v| json!(v)));
    put(&mut c, "max_bytes", bytes(&spec.max_bytes, "maxBytes")?);
    put(&mut c, "max_age", nanos(&spec.max_age, "maxAge")?);
    put(
        &mut c,
        "max_msgs_per_subject",
        spec.max_msgs_per_subject.map(|v| json!(v)),
    );
    put(
        &mut c,
        "max_msg_size",
        bytes(&spec.max_msg_size, "maxMsgSize")?,
    );
    put(
        &mut c,
        "discard",
        spec.discard.map(|d| json!(discard_str(d))),
    );
    put(
        &mut c,
        "discard_new_per_subject",
        spec.discard_new_per_subject.map(|v| json!(v)),
    );
    put(
        &mut c,
        "storage",
        spec.storage.map(|s| json!(storage_str(s))),
    );
    put(&mut c, "num_replicas", spec.replicas.map(|v| json!(v)));
    put(&mut c, "no_ack", spec.no_ack.map(|v| json!(v)));
    put(
        &mut c,
        "duplicate_window",
        nanos(&spec.duplicates, "duplicates")?,
    );
    put(
        &mut c,
        "placement",
        spec.placement.as_ref().map(placement_json),
    );
    put(&mut c, "mirror", spec.mirror.as_ref().map(source_json));
    if !spec.sources.is_empty() {
        c.insert(
            "sources".into(),
            Value::Array(spec.sources.iter().map(source_json).collect()),
        );
    }
    put(&mut c, "sealed", spec.sealed.map(|v| json!(v)));
    put(&mut c, "deny_delete", spec.deny_delete.map(|v| json!(v)));
    put(&mut c, "deny_purge", spec.deny_purge.map(|v| json!(v)));
    put(
        &mut c,
        "allow_rollup_hdrs",
        spec.allow_rollup.map(|v| json!(v)),
    );
    put(
        &mut c,
        "compression",
        spec.compression.map(|v| json!(compression_str(v))),
    );
    put(&mut c, "first_seq", spec.first_seq.map(|v| json!(v)));
    put(
        &mut c,
        "subject_transform",
        spec.subject_transform.as_ref().map(transform_json),
    );
    put(
        &mut c,
        "republish",
        spec.republish.as_ref().map(republish_json),
    );
    put(&mut c, "allow_direct", spec.allow_direct.map(|v| json!(v)));
    put(
        &mut c,
        "mirror_direct",
        spec.mirror_direct.map(|v| json!(v)),
    );
    if let Some(l) = &spec.consumer_limits {
        let mut m = Map::new();
        put(
            &mut m,
            "inactive_threshold",
            nanos(&l.inactive_threshold, "consumerLimits.inactiveThreshold")?,
        );
        put(
            &mut m,
            "max_ack_pending",
            l.max_ack_pending.map(|v| json!(v)),
        );
        c.insert("consumer_limits".into(), Value::Object(m));
    }
    c.insert(
        "metadata".into(),
        Value::Object(merge_marker(spec.metadata.as_ref(), uid)),
    );
    put(
        &mut c,
        "allow_msg_ttl",
        spec.allow_msg_ttl.map(|v| json!(v)),
    );
    put(
        &mut c,
        "subject_delete_marker_ttl",
        nanos(&spec.subject_delete_marker_ttl, "subjectDeleteMarkerTTL")?,
    );
    put(
        &mut c,
        "allow_msg_counter",
        spec.allow_msg_counter.map(|v| json!(v)),
    );
    put(
        &mut c,
        "allow_atomic",
        spec.allow_atomic_publish.map(|v| json!(v)),
    );
    put(
        &mut c,
        "allow_msg_schedules",
        spec.allow_msg_schedules.map(|v| json!(v)),
    );
    // The server's zero persist mode is "default" and is omitted from its JSON.
    put(
        &mut c,
        "persist_mode",
        match spec.persist_mode {
            Some(PersistMode::Async) => Some(json!("async")),
            Some(PersistMode::Default) | None => None,
        },
    );
    put(
        &mut c,
        "allow_batched",
        spec.allow_batch_publish.map(|v| json!(v)),
    );
    implied_by_server(&mut c);
    Ok(c)
}

/// Settings nats-server turns on by itself when others are set (checkStreamCfg): subject delete
/// markers need message TTLs and roll-ups; message schedules need roll-ups; roll-ups need the
/// purge permission; a sealed stream keeps everything; a mirror has no duplicate window. Only fields spec omits are filled, so an
/// untouched stream compares equal; a spec contradicting them is refused by the server, not here.
pub fn implied_by_server(c: &mut Map<String, Value>) {
    let on = |c: &Map<String, Value>, k: &str| c.get(k).is_some_and(|v| v == &json!(true));
    let sdm = c
        .get("subject_delete_marker_ttl")
        .and_then(Value::as_i64)
        .is_some_and(|n| n > 0);
    if sdm {
        c.entry("allow_msg_ttl").or_insert(json!(true));
    }
    if sdm || on(c, "allow_msg_schedules") {
        c.entry("allow_rollup_hdrs").or_insert(json!(true));
        c.entry("deny_purge").or_insert(json!(false));
    }
    // A mirror keeps the origin's sequence; the server drops any duplicate window it is given.
    if c.get("mirror").is_some_and(|m| !m.is_null()) {
        c.remove("duplicate_window");
    }
    if on(c, "sealed") {
        c.entry("max_age").or_insert(json!(0));
        c.entry("discard").or_insert(json!("new"));
        c.entry("deny_delete").or_insert(json!(true));
        c.entry("deny_purge").or_insert(json!(true));
        c.entry("allow_rollup_hdrs").or_insert(json!(false));
    }
}

/// The NATS fields of a NatsStream read from the server's config: every field the server reports,
/// so the result re-maps to the same config. Lifecycle fields and connectionRef come from `base`.
pub fn spec_from_server(
    base: &NatsStreamSpec,
    server: &Value,
) -> Result<NatsStreamSpec, MappingError> {
    let g = |k: &str| server.get(k).filter(|v| !v.is_null());
    Ok(NatsStreamSpec {
        connection_ref: base.connection_ref.clone(),
        adoption_policy: base.adoption_policy,
        deletion_policy: base.deletion_policy,
        terminal_policy: base.terminal_policy,
        name: str_of(g("name")),
        description: str_of(g("description")).filter(|d| !d.is_empty()),
        subjects: strings(g("subjects")),
        retention: g("retention").map(retention_of).transpose()?,
        max_consumers: g("max_consumers").and_then(Value::as_i64),
        max_msgs: g("max_msgs").and_then(Value::as_i64),
        max_bytes: g("max_bytes").and_then(Value::as_i64).map(bytes_quantity),
        discard: g("discard").map(discard_of).transpose()?,
        discard_new_per_subject: Some(bool_of(g("discard_new_per_subject"))),
        max_age: g("max_age").and_then(Value::as_i64).map(nanos_duration),
        max_msgs_per_subject: g("max_msgs_per_subject").and_then(Value::as_i64),
        max_msg_size: g("max_msg_size")
            .and_then(Value::as_i64)
            .map(bytes_quantity),
        storage: g("storage").map(storage_of).transpose()?,
        replicas: g("num_replicas")
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok()),
        no_ack: Some(bool_of(g("no_ack"))),
        duplicates: g("duplicate_window")
            .and_then(Value::as_i64)
            .map(nanos_duration),
        placement: g("placement")
            .map(placement_of)
            .filter(|p| *p != Placement::default()),
        mirror: g("mirror").map(source_of),
        sources: g("sources")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(source_of).collect())
            .unwrap_or_default(),
        sealed: Some(bool_of(g("sealed"))),
        deny_delete: Some(bool_of(g("deny_delete"))),
        deny_purge: Some(bool_of(g("deny_purge"))),
        allow_rollup: Some(bool_of(g("allow_rollup_hdrs"))),
        compression: g("compression").map(compression_of).transpose()?,
        first_seq: g("first_seq").and_then(Value::as_i64).filter(|n| *n > 0),
        subject_transform: g("subject_transform").map(transform_of),
        republish: g("republish").map(republish_of),
        allow_direct: Some(bool_of(g("allow_direct"))),
        mirror_direct: Some(bool_of(g("mirror_direct"))),
        consumer_limits: g("consumer_limits").map(|l| StreamConsumerLimits {
            inactive_threshold: l
                .get("inactive_threshold")
                .and_then(Value::as_i64)
                .filter(|n| *n > 0)
                .map(nanos_duration),
            max_ack_pending: l
                .get("max_ack_pending")
                .and_then(Value::as_i64)
                .filter(|n| *n != 0),
        }),
        metadata: user_metadata(server),
        allow_msg_ttl: Some(bool_of(g("allow_msg_ttl"))),
        subject_delete_marker_ttl: g("subject_delete_marker_ttl")
            .and_then(Value::as_i64)
            .filter(|n| *n > 0)
            .map(nanos_duration),
        allow_msg_counter: Some(bool_of(g("allow_msg_counter"))),
        allow_atomic_publish: Some(bool_of(g("allow_atomic"))),
        allow_msg_schedules: Some(bool_of(g("allow_msg_schedules"))),
        persist_mode: Some(match g("persist_mode").and_then(Value::as_str) {
            None | Some("") | Some("default") => PersistMode::Default,
            Some("async") => PersistMode::Async,
            Some(other) => {
                return Err(MappingError::UnknownServerValue {
                    key: "persist_mode",
                    value: other.into(),
                });
            }
        }),
        allow_batch_publish: Some(bool_of(g("allow_batched"))),
    })
}

pub(crate) fn put(c: &mut Map<String, Value>, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        c.insert(key.to_string(), v);
    }
}

pub(crate) fn nanos(
    d: &Option<nats_api::jetstream::GoDuration>,
    field: &'static str,
) -> Result<Option<Value>, UnitError> {
    d.as_ref()
        .map(|d| duration_nanos(field, d).map(|n| json!(n)))
        .transpose()
}

pub(crate) fn bytes(
    q: &Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    field: &'static str,
) -> Result<Option<Value>, UnitError> {
    q.as_ref()
        .map(|q| quantity_bytes(field, q).map(|n| json!(n)))
        .transpose()
}

pub(crate) fn str_of(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_string)
}

pub(crate) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn bool_of(v: Option<&Value>) -> bool {
    v.and_then(Value::as_bool).unwrap_or(false)
}

fn unknown(key: &'static str, v: &Value) -> MappingError {
    MappingError::UnknownServerValue {
        key,
        value: v.to_string(),
    }
}

fn retention_str(r: RetentionPolicy) -> &'static str {
    match r {
        RetentionPolicy::Limits => "limits",
        RetentionPolicy::Interest => "interest",
        RetentionPolicy::WorkQueue => "workqueue",
    }
}

fn retention_of(v: &Value) -> Result<RetentionPolicy, MappingError> {
    match v.as_str() {
        Some("limits") => Ok(RetentionPolicy::Limits),
        Some("interest") => Ok(RetentionPolicy::Interest),
        Some("workqueue") => Ok(RetentionPolicy::WorkQueue),
        _ => Err(unknown("retention", v)),
    }
}

fn discard_str(d: DiscardPolicy) -> &'static str {
    match d {
        DiscardPolicy::Old => "old",
        DiscardPolicy::New => "new",
    }
}

fn discard_of(v: &Value) -> Result<DiscardPolicy, MappingError> {
    match v.as_str() {
        Some("old") => Ok(DiscardPolicy::Old),
        Some("new") => Ok(DiscardPolicy::New),
        _ => Err(unknown("discard", v)),
    }
}

pub(crate) fn storage_str(s: StorageType) -> &'static str {
    match s {
        StorageType::File => "file",
        StorageType::Memory => "memory",
    }
}

pub(crate) fn storage_of(v: &Value) -> Result<StorageType, MappingError> {
    match v.as_str() {
        Some("file") => Ok(StorageType::File),
        Some("memory") => Ok(StorageType::Memory),
        _ => Err(unknown("storage", v)),
    }
}

fn compression_str(c: StoreCompression) -> &'static str {
    match c {
        StoreCompression::None => "none",
        StoreCompression::S2 => "s2",
    }
}

fn compression_of(v: &Value) -> Result<StoreCompression, MappingError> {
    match v.as_str() {
        Some("none") | Some("") => Ok(StoreCompression::None),
        Some("s2") => Ok(StoreCompression::S2),
        _ => Err(unknown("compression", v)),
    }
}

pub(crate) fn placement_json(p: &Placement) -> Value {
    let mut m = Map::new();
    put(&mut m, "cluster", p.cluster.as_ref().map(|c| json!(c)));
    if !p.tags.is_empty() {
        m.insert("tags".into(), json!(p.tags));
    }
    put(&mut m, "preferred", p.preferred.as_ref().map(|c| json!(c)));
    Value::Object(m)
}

pub(crate) fn placement_of(v: &Value) -> Placement {
    Placement {
        cluster: str_of(v.get("cluster")).filter(|s| !s.is_empty()),
        tags: strings(v.get("tags")),
        preferred: str_of(v.get("preferred")).filter(|s| !s.is_empty()),
    }
}

pub(crate) fn transform_json(t: &SubjectTransform) -> Value {
    json!({"src": t.src.clone().unwrap_or_default(), "dest": t.dest})
}

pub(crate) fn transform_of(v: &Value) -> SubjectTransform {
    SubjectTransform {
        src: str_of(v.get("src")).filter(|s| !s.is_empty()),
        dest: str_of(v.get("dest")).unwrap_or_default(),
    }
}

pub(crate) fn republish_json(r: &Republish) -> Value {
    let mut m = Map::new();
    put(&mut m, "src", r.src.as_ref().map(|s| json!(s)));
    m.insert("dest".into(), json!(r.dest));
    put(&mut m, "headers_only", r.headers_only.map(|v| json!(v)));
    Value::Object(m)
}

pub(crate) fn republish_of(v: &Value) -> Republish {
    Republish {
        src: str_of(v.get("src")).filter(|s| !s.is_empty()),
        dest: str_of(v.get("dest")).unwrap_or_default(),
        headers_only: v
            .get("headers_only")
            .and_then(Value::as_bool)
            .filter(|b| *b),
    }
}

/// A mirror or source. `domain` is the client-side shorthand for `external.api = $JS.<domain>.API`.
pub(crate) fn source_json(s: &StreamSource) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(s.name));
    put(&mut m, "opt_start_seq", s.opt_start_seq.map(|v| json!(v)));
    put(
        &mut m,
        "opt_start_time",
        s.opt_start_time.as_ref().map(|t| json!(t)),
    );
    put(
        &mut m,
        "filter_subject",
        s.filter_subject.as_ref().map(|v| json!(v)),
    );
    if !s.subject_transforms.is_empty() {
        m.insert(
            "subject_transforms".into(),
            Value::Array(s.subject_transforms.iter().map(transform_json).collect()),
        );
    }
    let external = match (&s.external, &s.domain) {
        (Some(e), _) => {
            Some(json!({"api": e.api, "deliver": e.deliver.clone().unwrap_or_default()}))
        }
        (None, Some(d)) => Some(json!({"api": format!("$JS.{d}.API"), "deliver": ""})),
        (None, None) => None,
    };
    put(&mut m, "external", external);
    put(
        &mut m,
        "consumer",
        s.consumer.as_ref().map(|c| {
            let mut cm = Map::new();
            put(&mut cm, "name", c.name.as_ref().map(|v| json!(v)));
            put(
                &mut cm,
                "deliver_subject",
                c.deliver_subject.as_ref().map(|v| json!(v)),
            );
            Value::Object(cm)
        }),
    );
    Value::Object(m)
}

pub(crate) fn source_of(v: &Value) -> StreamSource {
    StreamSource {
        name: str_of(v.get("name")).unwrap_or_default(),
        opt_start_seq: v
            .get("opt_start_seq")
            .and_then(Value::as_i64)
            .filter(|n| *n > 0),
        opt_start_time: v
            .get("opt_start_time")
            .filter(|t| !t.is_null())
            .and_then(|t| serde_json::from_value::<Time>(t.clone()).ok()),
        filter_subject: str_of(v.get("filter_subject")).filter(|s| !s.is_empty()),
        subject_transforms: v
            .get("subject_transforms")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(transform_of).collect())
            .unwrap_or_default(),
        external: v
            .get("external")
            .filter(|e| !e.is_null())
            .map(|e| ExternalStream {
                api: str_of(e.get("api")).unwrap_or_default(),
                deliver: str_of(e.get("deliver")).filter(|s| !s.is_empty()),
            }),
        domain: None,
        consumer: v
            .get("consumer")
            .filter(|c| !c.is_null())
            .map(|c| StreamConsumerSource {
                name: str_of(c.get("name")).filter(|s| !s.is_empty()),
                deliver_subject: str_of(c.get("deliver_subject")).filter(|s| !s.is_empty()),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::{Decision, decide, drifted, names};
    use crate::ownership::OWNER_METADATA_KEY;
    use nats_api::jetstream::GoDuration;
    use rstest::rstest;

    const UID: &str = "uid-1";

    fn spec(v: Value) -> NatsStreamSpec {
        let mut base = json!({"connectionRef": {"name": "main"}});
        if let (Some(b), Some(o)) = (base.as_object_mut(), v.as_object()) {
            b.extend(o.clone());
        }
        serde_json::from_value(base).expect("a valid NatsStream spec")
    }

    #[rstest]
    #[case::name_only(json!({}), json!({"name": "ORDERS", "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::subjects_and_limits(json!({"subjects": ["orders.>"], "maxMsgs": 1000, "maxBytes": "1Gi", "maxAge": "720h"}),
        json!({"name": "ORDERS", "subjects": ["orders.>"], "max_msgs": 1000, "max_bytes": 1_073_741_824i64, "max_age": 2_592_000_000_000_000i64, "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::enums_in_the_servers_spelling(json!({"retention": "WorkQueue", "discard": "New", "storage": "Memory", "compression": "S2"}),
        json!({"name": "ORDERS", "retention": "workqueue", "discard": "new", "storage": "memory", "compression": "s2", "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::user_metadata_kept_beside_the_marker(json!({"metadata": {"team": "payments"}}),
        json!({"name": "ORDERS", "metadata": {"team": "payments", OWNER_METADATA_KEY: UID}}))]
    #[case::replicas_and_allow_rollup_renamed(json!({"replicas": 3, "allowRollup": true, "allowAtomicPublish": true, "allowBatchPublish": true}),
        json!({"name": "ORDERS", "num_replicas": 3, "allow_rollup_hdrs": true, "allow_atomic": true, "allow_batched": true, "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::domain_is_short_for_external_api(json!({"sources": [{"name": "HUB", "domain": "hub"}]}),
        json!({"name": "ORDERS", "sources": [{"name": "HUB", "external": {"api": "$JS.hub.API", "deliver": ""}}], "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::delete_markers_imply_ttls_and_rollups(json!({"subjectDeleteMarkerTTL": "1m"}),
        json!({"name": "ORDERS", "subject_delete_marker_ttl": 60_000_000_000i64, "allow_msg_ttl": true, "allow_rollup_hdrs": true, "deny_purge": false, "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::a_mirror_has_no_duplicate_window(json!({"mirror": {"name": "ORIGIN"}, "duplicates": "2m"}),
        json!({"name": "ORDERS", "mirror": {"name": "ORIGIN"}, "metadata": {OWNER_METADATA_KEY: UID}}))]
    #[case::default_persist_mode_is_the_servers_zero(json!({"persistMode": "Default"}), json!({"name": "ORDERS", "metadata": {OWNER_METADATA_KEY: UID}}))]
    fn a_stream_spec_maps_to_the_servers_config(#[case] s: Value, #[case] want: Value) {
        let got = desired("ORDERS", &spec(s), UID).expect("maps");
        assert_eq!(Value::Object(got), want);
    }

    #[test]
    fn a_bad_size_names_its_field() {
        let err = desired("ORDERS", &spec(json!({"maxBytes": "1.5"})), UID).unwrap_err();
        assert!(err.to_string().starts_with("maxBytes:"), "{err}");
    }

    /// What nats-server 2.15 returns for `{"name":"ORDERS","subjects":["orders.>"]}` plus marker.
    fn server_default_config() -> Value {
        json!({
            "name": "ORDERS", "subjects": ["orders.>"], "retention": "limits", "max_consumers": -1,
            "max_msgs": -1, "max_bytes": -1, "max_age": 0, "max_msgs_per_subject": -1,
            "max_msg_size": -1, "discard": "old", "storage": "file", "num_replicas": 1,
            "duplicate_window": 120_000_000_000i64, "compression": "none", "allow_direct": false,
            "mirror_direct": false, "sealed": false, "deny_delete": false, "deny_purge": false,
            "allow_rollup_hdrs": false, "consumer_limits": {}, "allow_msg_ttl": false,
            "metadata": {OWNER_METADATA_KEY: UID, "_nats.req.level": "0", "_nats.ver": "2.15.1", "_nats.level": "1"}
        })
    }

    #[rstest]
    #[case::untouched_stream_is_in_sync(json!({}), Decision::InSync)]
    #[case::max_msgs_edited_out_of_band(json!({"max_msgs": 5}), Decision::Update(vec!["maxMsgs".into()]))]
    #[case::marker_removed_out_of_band(json!({"metadata": {}}), Decision::Update(vec!["metadata".into()]))]
    #[case::storage_differs_is_refused(json!({"storage": "memory"}), Decision::Refused(vec!["storage".into()]))]
    #[case::deny_delete_turned_on_out_of_band_is_refused(json!({"deny_delete": true}), Decision::Refused(vec!["denyDelete".into()]))]
    fn a_stream_edited_out_of_band_drifts_in_exactly_that_field(
        #[case] edit: Value,
        #[case] want: Decision,
    ) {
        let mut server = server_default_config();
        if let (Some(s), Some(e)) = (server.as_object_mut(), edit.as_object()) {
            s.extend(e.clone());
        }
        let d = desired("ORDERS", &spec(json!({"subjects": ["orders.>"]})), UID).expect("maps");
        assert_eq!(decide(&drifted(STREAM_FIELDS, &d, &server), false), want);
    }

    #[test]
    fn an_adopted_stream_re_maps_to_the_same_config() {
        let mut server = server_default_config();
        if let Some(s) = server.as_object_mut() {
            s.insert("max_bytes".into(), json!(3 * (1i64 << 30)));
            s.insert("max_age".into(), json!(90_000_000_000i64));
            s.insert("duplicate_window".into(), json!(60_000_000_000i64));
            s.insert(
                "placement".into(),
                json!({"cluster": "c1", "tags": ["ssd"]}),
            );
            s.insert(
                "sources".into(),
                json!([{"name": "A", "filter_subject": "a.>"}]),
            );
            s.insert(
                "metadata".into(),
                json!({"team": "x", "_nats.ver": "2.15.1"}),
            );
        }
        let adopted = spec_from_server(&spec(json!({})), &server).expect("reads");
        assert_eq!(
            adopted.max_bytes.as_ref().map(|q| q.0.as_str()),
            Some("3Gi")
        );
        assert_eq!(adopted.max_age, Some(GoDuration::new("1m30s")));
        let d = desired("ORDERS", &adopted, UID).expect("maps");
        let drift = drifted(STREAM_FIELDS, &d, &server);
        assert_eq!(
            names(drift.iter()),
            vec!["metadata"],
            "only the marker is new"
        );
    }

    #[test]
    fn an_unknown_server_value_is_named() {
        let mut server = server_default_config();
        if let Some(s) = server.as_object_mut() {
            s.insert("retention".into(), json!("forever"));
        }
        let err = spec_from_server(&spec(json!({})), &server).unwrap_err();
        assert_eq!(err, unknown("retention", &json!("forever")));
    }
}
