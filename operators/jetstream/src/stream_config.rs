//! NatsStream spec ↔ nats-server's `StreamConfig` JSON (what `$JS.API.STREAM.CREATE/UPDATE` read
//! and `$JS.API.STREAM.INFO` returns).
//!
//! [`desired`] writes only what spec sets (plus the ownership marker and the values the server
//! would derive anyway), so the server fills the rest; [`spec_from_server`] reads every field back,
//! which is what Adopt writes into spec and AdoptOrCreate late-initializes from.

use nats_api::jetstream::{
    DiscardPolicy, NatsStreamSpec, PersistMode, Placement, RetentionPolicy, StoreCompression,
    StreamConsumerLimits,
};
use serde_json::{Map, Value, json};

use crate::drift::{Field, Mutability as M, ServerDefault as D};
use crate::ownership::{merge_marker, user_metadata};
pub use crate::server_config::MappingError;
use crate::server_config::{
    bool_of, bytes, nanos, placement_json, placement_of, put, republish_json, republish_of, some,
    source_json, source_of, storage_of, storage_str, str_of, strings, transform_json, transform_of,
    unknown,
};
use crate::units::{bytes_quantity, nanos_duration};

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

/// The server config a NatsStream asks for, named `name`, owned by `uid`: its identity, limits,
/// storage, origin (mirror, sources), behaviour and features, each only as far as spec sets them,
/// plus the ownership marker and what the server would imply.
pub fn desired(
    name: &str,
    spec: &NatsStreamSpec,
    uid: &str,
) -> Result<Map<String, Value>, MappingError> {
    let mut c = Map::new();
    identity(&mut c, name, spec);
    limits(&mut c, spec)?;
    storage(&mut c, spec)?;
    origin(&mut c, spec);
    behaviour(&mut c, spec)?;
    c.insert(
        "metadata".into(),
        Value::Object(merge_marker(spec.metadata.as_ref(), uid)),
    );
    features(&mut c, spec)?;
    implied_by_server(&mut c);
    Ok(c)
}

/// Name, description, subjects and retention.
fn identity(c: &mut Map<String, Value>, name: &str, spec: &NatsStreamSpec) {
    c.insert("name".into(), json!(name));
    put(c, "description", some(spec.description.as_ref()));
    if !spec.subjects.is_empty() {
        c.insert("subjects".into(), json!(spec.subjects));
    }
    put(
        c,
        "retention",
        spec.retention.map(|r| json!(retention_str(r))),
    );
}

/// What the stream keeps, and what it discards past that.
fn limits(c: &mut Map<String, Value>, spec: &NatsStreamSpec) -> Result<(), MappingError> {
    put(c, "max_consumers", some(spec.max_consumers));
    put(c, "max_msgs", some(spec.max_msgs));
    put(c, "max_bytes", bytes(&spec.max_bytes, "maxBytes")?);
    put(c, "max_age", nanos(&spec.max_age, "maxAge")?);
    put(c, "max_msgs_per_subject", some(spec.max_msgs_per_subject));
    put(c, "max_msg_size", bytes(&spec.max_msg_size, "maxMsgSize")?);
    put(c, "discard", spec.discard.map(|d| json!(discard_str(d))));
    put(
        c,
        "discard_new_per_subject",
        some(spec.discard_new_per_subject),
    );
    Ok(())
}

/// Where and how the messages are stored: storage, replicas, acks, the duplicate window and
/// placement.
fn storage(c: &mut Map<String, Value>, spec: &NatsStreamSpec) -> Result<(), MappingError> {
    put(c, "storage", spec.storage.map(|s| json!(storage_str(s))));
    put(c, "num_replicas", some(spec.replicas));
    put(c, "no_ack", some(spec.no_ack));
    put(
        c,
        "duplicate_window",
        nanos(&spec.duplicates, "duplicates")?,
    );
    put(c, "placement", spec.placement.as_ref().map(placement_json));
    Ok(())
}

/// Where the messages come from besides publishers: a mirror, or sources.
fn origin(c: &mut Map<String, Value>, spec: &NatsStreamSpec) {
    put(c, "mirror", spec.mirror.as_ref().map(source_json));
    if !spec.sources.is_empty() {
        c.insert(
            "sources".into(),
            Value::Array(spec.sources.iter().map(source_json).collect()),
        );
    }
}

/// What may be done to the stream and its messages: sealing, deletes and purges, roll-ups,
/// compression, the first sequence, transforms, republishing, direct gets, consumer limits.
fn behaviour(c: &mut Map<String, Value>, spec: &NatsStreamSpec) -> Result<(), MappingError> {
    put(c, "sealed", some(spec.sealed));
    put(c, "deny_delete", some(spec.deny_delete));
    put(c, "deny_purge", some(spec.deny_purge));
    put(c, "allow_rollup_hdrs", some(spec.allow_rollup));
    put(
        c,
        "compression",
        spec.compression.map(|v| json!(compression_str(v))),
    );
    put(c, "first_seq", some(spec.first_seq));
    put(
        c,
        "subject_transform",
        spec.subject_transform.as_ref().map(transform_json),
    );
    put(c, "republish", spec.republish.as_ref().map(republish_json));
    put(c, "allow_direct", some(spec.allow_direct));
    put(c, "mirror_direct", some(spec.mirror_direct));
    if let Some(l) = &spec.consumer_limits {
        let mut m = Map::new();
        put(
            &mut m,
            "inactive_threshold",
            nanos(&l.inactive_threshold, "consumerLimits.inactiveThreshold")?,
        );
        put(&mut m, "max_ack_pending", some(l.max_ack_pending));
        c.insert("consumer_limits".into(), Value::Object(m));
    }
    Ok(())
}

/// The newer features: message TTLs and delete markers, counters, atomic and batched publish,
/// schedules, the persist mode.
fn features(c: &mut Map<String, Value>, spec: &NatsStreamSpec) -> Result<(), MappingError> {
    put(c, "allow_msg_ttl", some(spec.allow_msg_ttl));
    put(
        c,
        "subject_delete_marker_ttl",
        nanos(&spec.subject_delete_marker_ttl, "subjectDeleteMarkerTTL")?,
    );
    put(c, "allow_msg_counter", some(spec.allow_msg_counter));
    put(c, "allow_atomic", some(spec.allow_atomic_publish));
    put(c, "allow_msg_schedules", some(spec.allow_msg_schedules));
    // The server's zero persist mode is "default" and is omitted from its JSON.
    put(
        c,
        "persist_mode",
        match spec.persist_mode {
            Some(PersistMode::Async) => Some(json!("async")),
            Some(PersistMode::Default) | None => None,
        },
    );
    put(c, "allow_batched", some(spec.allow_batch_publish));
    Ok(())
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
        consumer_limits: g("consumer_limits").map(consumer_limits_of),
        metadata: user_metadata(server),
        allow_msg_ttl: Some(bool_of(g("allow_msg_ttl"))),
        subject_delete_marker_ttl: g("subject_delete_marker_ttl")
            .and_then(Value::as_i64)
            .filter(|n| *n > 0)
            .map(nanos_duration),
        allow_msg_counter: Some(bool_of(g("allow_msg_counter"))),
        allow_atomic_publish: Some(bool_of(g("allow_atomic"))),
        allow_msg_schedules: Some(bool_of(g("allow_msg_schedules"))),
        persist_mode: Some(persist_mode_of(g("persist_mode"))?),
        allow_batch_publish: Some(bool_of(g("allow_batched"))),
    })
}

fn consumer_limits_of(l: &Value) -> StreamConsumerLimits {
    StreamConsumerLimits {
        inactive_threshold: l
            .get("inactive_threshold")
            .and_then(Value::as_i64)
            .filter(|n| *n > 0)
            .map(nanos_duration),
        max_ack_pending: l
            .get("max_ack_pending")
            .and_then(Value::as_i64)
            .filter(|n| *n != 0),
    }
}

fn persist_mode_of(v: Option<&Value>) -> Result<PersistMode, MappingError> {
    match v.and_then(Value::as_str) {
        None | Some("") | Some("default") => Ok(PersistMode::Default),
        Some("async") => Ok(PersistMode::Async),
        Some(other) => Err(MappingError::UnknownServerValue {
            key: "persist_mode",
            value: other.into(),
        }),
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
