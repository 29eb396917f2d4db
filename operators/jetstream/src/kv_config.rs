//! NatsKeyValue spec ↔ the stream `KV_<bucket>` that backs it, as nats.go v1.54
//! (`jetstream/kv.go`, prepareKeyValueConfig) maps a KeyValueConfig onto a StreamConfig: subjects
//! `$KV.<bucket>.>`, history as max_msgs_per_subject, TTL as max_age, roll-ups allowed, deletes
//! denied, discard new, direct gets, a two-minute (or TTL) duplicate window.

use std::time::Duration;

use nats_api::jetstream::{NatsKeyValueSpec, StreamSource, SubjectTransform};
use serde_json::{Map, Value, json};

use crate::drift::{Field, Mutability as M, ServerDefault as D};
use crate::ownership::{merge_marker, user_metadata};
use crate::server_config::{
    MappingError, bool_of, bytes, nanos, placement_json, placement_of, put, republish_json,
    republish_of, source_json, source_of, storage_of, storage_str, str_of, strings,
};
use crate::units::{bytes_quantity, nanos_duration};

/// The prefix of a bucket's stream name.
pub const STREAM_PREFIX: &str = "KV_";

/// The stream name of a bucket.
pub fn stream_name(bucket: &str) -> String {
    format!("{STREAM_PREFIX}{bucket}")
}

/// The subjects of a bucket's keys.
pub fn subjects(bucket: &str) -> String {
    format!("$KV.{bucket}.>")
}

/// The bucket's stream fields, reported by the NatsKeyValue field they come from; the fields
/// nats.go fixes for every bucket are reported as `stream.<key>`.
pub const KV_FIELDS: &[Field] = &[
    Field::new("name", "name", D::Derived, M::Immutable),
    Field::new("description", "description", D::Fixed("\"\""), M::Mutable),
    Field::new("subjects", "stream.subjects", D::Fixed("[]"), M::Mutable),
    Field::new(
        "retention",
        "stream.retention",
        D::Fixed("\"limits\""),
        M::NotAcrossWorkQueue,
    ),
    Field::new(
        "max_consumers",
        "stream.max_consumers",
        D::Fixed("-1"),
        M::Mutable,
    ),
    Field::new("max_msgs", "stream.max_msgs", D::Fixed("-1"), M::Mutable),
    Field::new("max_bytes", "maxBytes", D::Fixed("-1"), M::Mutable),
    Field::new("max_age", "ttl", D::Fixed("0"), M::Mutable),
    Field::new(
        "max_msgs_per_subject",
        "history",
        D::Fixed("-1"),
        M::Mutable,
    ),
    Field::new("max_msg_size", "maxValueSize", D::Fixed("-1"), M::Mutable),
    Field::new("discard", "stream.discard", D::Fixed("\"old\""), M::Mutable),
    Field::new("storage", "storage", D::Fixed("\"file\""), M::Immutable),
    Field::new("num_replicas", "replicas", D::Fixed("1"), M::Mutable),
    Field::new("no_ack", "stream.no_ack", D::Fixed("false"), M::Mutable),
    Field::new(
        "duplicate_window",
        "stream.duplicate_window",
        D::Derived,
        M::Mutable,
    ),
    Field::new("placement", "placement", D::Derived, M::Mutable),
    Field::new("mirror", "mirror", D::Fixed("null"), M::Immutable),
    Field::new("sources", "sources", D::Fixed("[]"), M::Mutable),
    Field::new("sealed", "stream.sealed", D::Fixed("false"), M::OneWay),
    Field::new(
        "deny_delete",
        "stream.deny_delete",
        D::Fixed("false"),
        M::OneWay,
    ),
    Field::new(
        "deny_purge",
        "stream.deny_purge",
        D::Fixed("false"),
        M::OneWay,
    ),
    Field::new(
        "allow_rollup_hdrs",
        "stream.allow_rollup_hdrs",
        D::Fixed("false"),
        M::Mutable,
    ),
    Field::new(
        "compression",
        "compression",
        D::Fixed("\"none\""),
        M::Mutable,
    ),
    Field::new("republish", "republish", D::Fixed("null"), M::Mutable),
    Field::new(
        "allow_direct",
        "stream.allow_direct",
        D::Fixed("false"),
        M::Mutable,
    ),
    Field::new(
        "mirror_direct",
        "stream.mirror_direct",
        D::Fixed("false"),
        M::Mutable,
    ),
    Field::new("metadata", "metadata", D::Fixed("{}"), M::Mutable),
    Field::new(
        "allow_msg_ttl",
        "limitMarkerTTL",
        D::Fixed("false"),
        M::OneWay,
    ),
    Field::new(
        "subject_delete_marker_ttl",
        "limitMarkerTTL",
        D::Fixed("0"),
        M::Mutable,
    ),
];

const DEFAULT_DUPLICATE_WINDOW: i64 = 120_000_000_000;

/// The stream config a NatsKeyValue asks for (bucket `bucket`, owned by `uid`): its limits, what
/// every bucket stream sets, its limit markers and its origin (a mirror, or sources and its own
/// subjects), plus the ownership marker.
pub fn desired(
    bucket: &str,
    spec: &NatsKeyValueSpec,
    uid: &str,
) -> Result<Map<String, Value>, MappingError> {
    let ttl = nanos(&spec.ttl, "ttl")?
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    let mut c = Map::new();
    c.insert("name".into(), json!(stream_name(bucket)));
    put(
        &mut c,
        "description",
        spec.description.as_ref().map(|d| json!(d)),
    );
    limits(&mut c, spec, ttl)?;
    bucket_stream(&mut c, spec, ttl);
    limit_markers(&mut c, spec)?;
    origin(&mut c, bucket, spec);
    c.insert(
        "metadata".into(),
        Value::Object(merge_marker(spec.metadata.as_ref(), uid)),
    );
    Ok(c)
}

/// History, size, TTL, value size, storage, replicas and placement.
fn limits(
    c: &mut Map<String, Value>,
    spec: &NatsKeyValueSpec,
    ttl: i64,
) -> Result<(), MappingError> {
    c.insert(
        "max_msgs_per_subject".into(),
        json!(spec.history.map_or(1, i64::from)),
    );
    c.insert(
        "max_bytes".into(),
        bytes(&spec.max_bytes, "maxBytes")?.unwrap_or(json!(-1)),
    );
    c.insert("max_age".into(), json!(ttl));
    c.insert(
        "max_msg_size".into(),
        bytes(&spec.max_value_size, "maxValueSize")?.unwrap_or(json!(-1)),
    );
    c.insert(
        "storage".into(),
        json!(storage_str(
            spec.storage
                .unwrap_or(nats_api::jetstream::StorageType::File)
        )),
    );
    c.insert("num_replicas".into(), json!(spec.replicas.unwrap_or(1)));
    put(c, "placement", spec.placement.as_ref().map(placement_json));
    Ok(())
}

/// What every bucket's stream sets: roll-ups, no deletes, the duplicate window (two minutes, or
/// the TTL when shorter), no limits on messages or consumers, direct gets, republish,
/// compression, discard new.
fn bucket_stream(c: &mut Map<String, Value>, spec: &NatsKeyValueSpec, ttl: i64) {
    c.insert("allow_rollup_hdrs".into(), json!(true));
    c.insert("deny_delete".into(), json!(true));
    let window = if ttl > 0 && ttl < DEFAULT_DUPLICATE_WINDOW {
        ttl
    } else {
        DEFAULT_DUPLICATE_WINDOW
    };
    c.insert("duplicate_window".into(), json!(window));
    c.insert("max_msgs".into(), json!(-1));
    c.insert("max_consumers".into(), json!(-1));
    c.insert("allow_direct".into(), json!(true));
    put(c, "republish", spec.republish.as_ref().map(republish_json));
    let compression = if spec.compression == Some(true) {
        "s2"
    } else {
        "none"
    };
    c.insert("compression".into(), json!(compression));
    c.insert("discard".into(), json!("new"));
}

/// limitMarkerTTL: message TTLs on, and the delete markers' TTL.
fn limit_markers(c: &mut Map<String, Value>, spec: &NatsKeyValueSpec) -> Result<(), MappingError> {
    let marker_ttl = nanos(&spec.limit_marker_ttl, "limitMarkerTTL")?
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    c.insert("allow_msg_ttl".into(), json!(marker_ttl != 0));
    if marker_ttl != 0 {
        c.insert("subject_delete_marker_ttl".into(), json!(marker_ttl));
    }
    Ok(())
}

/// A mirror (of a bucket's stream, no duplicate window), or the bucket's own subjects and its
/// sources.
fn origin(c: &mut Map<String, Value>, bucket: &str, spec: &NatsKeyValueSpec) {
    if let Some(mirror) = &spec.mirror {
        let mut m = mirror.clone();
        if !m.name.starts_with(STREAM_PREFIX) {
            m.name = stream_name(&m.name);
        }
        c.insert("mirror".into(), source_json(&m));
        c.insert("mirror_direct".into(), json!(true));
        // nats.go sends a window, but the server drops it for a mirror.
        c.remove("duplicate_window");
    } else {
        if !spec.sources.is_empty() {
            let sources = spec.sources.iter().map(|s| source_for(bucket, s)).collect();
            c.insert("sources".into(), Value::Array(sources));
        }
        c.insert("subjects".into(), json!([subjects(bucket)]));
    }
}

/// A source bucket as nats.go writes it: the stream name prefixed, and the source's keys
/// transformed into this bucket's subjects unless it is this bucket in another domain.
fn source_for(bucket: &str, s: &StreamSource) -> Value {
    let mut s = s.clone();
    let source_bucket = match s.name.strip_prefix(STREAM_PREFIX) {
        Some(b) => b.to_string(),
        None => {
            let b = s.name.clone();
            s.name = stream_name(&b);
            b
        }
    };
    let external = s.external.is_some() || s.domain.is_some();
    if !external || source_bucket != bucket {
        s.subject_transforms = vec![SubjectTransform {
            src: Some(subjects(&source_bucket)),
            dest: subjects(bucket),
        }];
    }
    source_json(&s)
}

/// Refuses a stream that is not a key-value bucket: a NatsKeyValue never adopts a plain stream
/// named like one (reason NotABucket).
pub fn check_is_bucket(server: &Value) -> Result<String, MappingError> {
    let name = str_of(server.get("name")).unwrap_or_default();
    let fail = |why: &str| MappingError::NotABucket {
        stream: name.clone(),
        kind: "key-value bucket",
        why: why.to_string(),
    };
    let bucket = name
        .strip_prefix(STREAM_PREFIX)
        .ok_or_else(|| fail("its name lacks the KV_ prefix"))?
        .to_string();
    if !bool_of(server.get("allow_rollup_hdrs")) {
        return Err(fail("roll-ups are not allowed"));
    }
    let mirrors = server.get("mirror").is_some_and(|m| !m.is_null());
    if !mirrors && !strings(server.get("subjects")).contains(&subjects(&bucket)) {
        return Err(fail(&format!("it does not capture {}", subjects(&bucket))));
    }
    Ok(bucket)
}

/// The NatsKeyValue fields read from the bucket's stream (what Adopt writes into spec).
pub fn spec_from_server(
    base: &NatsKeyValueSpec,
    server: &Value,
) -> Result<NatsKeyValueSpec, MappingError> {
    let bucket = check_is_bucket(server)?;
    let g = |k: &str| server.get(k).filter(|v| !v.is_null());
    let int = |k: &str| g(k).and_then(Value::as_i64);
    let generated = |s: &StreamSource| {
        s.subject_transforms.len() == 1
            && s.subject_transforms[0].dest == subjects(&bucket)
            && s.subject_transforms[0].src.as_deref()
                == Some(subjects(s.name.strip_prefix(STREAM_PREFIX).unwrap_or(&s.name)).as_str())
    };
    Ok(NatsKeyValueSpec {
        connection_ref: base.connection_ref.clone(),
        adoption_policy: base.adoption_policy,
        deletion_policy: base.deletion_policy,
        terminal_policy: base.terminal_policy,
        name: Some(bucket.clone()),
        description: str_of(g("description")).filter(|d| !d.is_empty()),
        max_value_size: int("max_msg_size").map(bytes_quantity),
        history: int("max_msgs_per_subject").and_then(|h| i32::try_from(h).ok()),
        ttl: int("max_age").filter(|n| *n > 0).map(nanos_duration),
        max_bytes: int("max_bytes").map(bytes_quantity),
        storage: g("storage").map(storage_of).transpose()?,
        replicas: int("num_replicas").and_then(|v| i32::try_from(v).ok()),
        placement: g("placement")
            .map(placement_of)
            .filter(|p| *p != Default::default()),
        republish: g("republish").map(republish_of),
        mirror: g("mirror").map(source_of),
        sources: g("sources")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(source_of)
                    .map(|mut s| {
                        // The transform nats.go adds is implied by the bucket; keep any other.
                        if generated(&s) {
                            s.subject_transforms.clear();
                        }
                        s
                    })
                    .collect()
            })
            .unwrap_or_default(),
        compression: Some(str_of(g("compression")).as_deref() == Some("s2")),
        limit_marker_ttl: int("subject_delete_marker_ttl")
            .filter(|n| *n > 0)
            .map(nanos_duration),
        metadata: user_metadata(server),
    })
}

/// The duplicate window nats.go derives from a TTL.
pub fn duplicate_window(ttl: Duration) -> Duration {
    let default = Duration::from_secs(120);
    if !ttl.is_zero() && ttl < default {
        ttl
    } else {
        default
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::{Decision, decide, drifted, names};
    use crate::ownership::OWNER_METADATA_KEY;
    use rstest::rstest;

    const UID: &str = "uid-kv";

    fn spec(v: Value) -> NatsKeyValueSpec {
        let mut base = json!({"connectionRef": {"name": "main"}});
        if let (Some(b), Some(o)) = (base.as_object_mut(), v.as_object()) {
            b.extend(o.clone());
        }
        serde_json::from_value(base).expect("a valid NatsKeyValue spec")
    }

    #[test]
    fn an_empty_bucket_spec_takes_nats_go_defaults() {
        let got = desired("config", &spec(json!({})), UID).expect("maps");
        assert_eq!(
            Value::Object(got),
            json!({
                "name": "KV_config", "subjects": ["$KV.config.>"], "max_msgs_per_subject": 1,
                "max_bytes": -1, "max_age": 0, "max_msg_size": -1, "storage": "file", "num_replicas": 1,
                "allow_rollup_hdrs": true, "deny_delete": true, "duplicate_window": 120_000_000_000i64,
                "max_msgs": -1, "max_consumers": -1, "allow_direct": true, "compression": "none",
                "discard": "new", "allow_msg_ttl": false, "metadata": {OWNER_METADATA_KEY: UID}
            })
        );
    }

    #[rstest]
    #[case::history_is_max_msgs_per_subject(json!({"history": 5}), "max_msgs_per_subject", json!(5))]
    #[case::ttl_is_max_age(json!({"ttl": "1h"}), "max_age", json!(3_600_000_000_000i64))]
    #[case::short_ttl_shortens_the_duplicate_window(json!({"ttl": "30s"}), "duplicate_window", json!(30_000_000_000i64))]
    #[case::max_value_size_is_max_msg_size(json!({"maxValueSize": "64Ki"}), "max_msg_size", json!(65_536))]
    #[case::compression_is_s2(json!({"compression": true}), "compression", json!("s2"))]
    #[case::limit_marker_ttl_turns_on_message_ttls(json!({"limitMarkerTTL": "5s"}), "allow_msg_ttl", json!(true))]
    #[case::limit_marker_ttl_is_the_delete_marker_ttl(json!({"limitMarkerTTL": "5s"}), "subject_delete_marker_ttl", json!(5_000_000_000i64))]
    #[case::mirror_names_the_buckets_stream(json!({"mirror": {"name": "origin"}}), "mirror", json!({"name": "KV_origin"}))]
    #[case::a_mirror_has_direct_gets(json!({"mirror": {"name": "origin"}}), "mirror_direct", json!(true))]
    #[case::a_mirror_has_no_duplicate_window(json!({"mirror": {"name": "origin"}}), "duplicate_window", Value::Null)]
    #[case::a_source_is_transformed_into_this_bucket(json!({"sources": [{"name": "a"}]}), "sources",
        json!([{"name": "KV_a", "subject_transforms": [{"src": "$KV.a.>", "dest": "$KV.config.>"}]}]))]
    #[case::same_bucket_in_another_domain_keeps_its_subjects(json!({"sources": [{"name": "config", "domain": "leaf"}]}), "sources",
        json!([{"name": "KV_config", "external": {"api": "$JS.leaf.API", "deliver": ""}}]))]
    fn a_bucket_spec_maps_as_nats_go_maps_it(
        #[case] s: Value,
        #[case] key: &str,
        #[case] want: Value,
    ) {
        let got = desired("config", &spec(s), UID).expect("maps");
        assert_eq!(
            got.get(key).unwrap_or(&Value::Null),
            &want,
            "{key} in {got:?}"
        );
    }

    #[test]
    fn a_mirror_bucket_has_no_subjects() {
        let got =
            desired("config", &spec(json!({"mirror": {"name": "origin"}})), UID).expect("maps");
        assert!(!got.contains_key("subjects"));
    }

    fn server_bucket() -> Value {
        let mut c = desired("config", &spec(json!({"history": 3})), UID).expect("maps");
        c.insert("retention".into(), json!("limits"));
        c.insert("sealed".into(), json!(false));
        c.insert("deny_purge".into(), json!(false));
        c.insert("mirror_direct".into(), json!(false));
        c.insert("consumer_limits".into(), json!({}));
        Value::Object(c)
    }

    #[rstest]
    #[case::untouched_bucket(json!({}), Decision::InSync)]
    #[case::history_edited_out_of_band(json!({"max_msgs_per_subject": 10}), Decision::Update(vec!["history".into()]))]
    #[case::deletes_allowed_out_of_band_is_put_back(json!({"deny_delete": false}), Decision::Update(vec!["stream.deny_delete".into()]))]
    #[case::storage_differs_refused(json!({"storage": "memory"}), Decision::Refused(vec!["storage".into()]))]
    fn bucket_drift_is_reported_in_the_buckets_fields(#[case] edit: Value, #[case] want: Decision) {
        let mut server = server_bucket();
        if let (Some(s), Some(e)) = (server.as_object_mut(), edit.as_object()) {
            s.extend(e.clone());
        }
        let d = desired("config", &spec(json!({"history": 3})), UID).expect("maps");
        assert_eq!(decide(&drifted(KV_FIELDS, &d, &server), false), want);
    }

    #[rstest]
    #[case::plain_stream(json!({"name": "ORDERS", "allow_rollup_hdrs": true}), "KV_ prefix")]
    #[case::no_rollups(json!({"name": "KV_config", "subjects": ["$KV.config.>"]}), "roll-ups")]
    #[case::other_subjects(json!({"name": "KV_config", "allow_rollup_hdrs": true, "subjects": ["config.>"]}), "$KV.config.>")]
    fn a_stream_that_is_not_a_bucket_is_refused(#[case] server: Value, #[case] why: &str) {
        let err = spec_from_server(&spec(json!({})), &server).unwrap_err();
        assert!(err.to_string().contains(why), "{err}");
    }

    #[test]
    fn an_adopted_bucket_re_maps_to_the_same_stream() {
        let mut server = server_bucket();
        if let Some(s) = server.as_object_mut() {
            s.insert("max_age".into(), json!(3_600_000_000_000i64));
            s.insert(
                "metadata".into(),
                json!({"team": "x", "_nats.ver": "2.15.1"}),
            );
        }
        let adopted = spec_from_server(&spec(json!({})), &server).expect("reads");
        assert_eq!(adopted.history, Some(3));
        let d = desired("config", &adopted, UID).expect("maps");
        assert_eq!(
            names(drifted(KV_FIELDS, &d, &server).iter()),
            vec!["metadata"]
        );
    }

    #[rstest]
    #[case::no_ttl(0, 120)]
    #[case::short_ttl(30, 30)]
    #[case::long_ttl(3600, 120)]
    fn the_duplicate_window_follows_the_ttl(#[case] ttl: u64, #[case] window: u64) {
        assert_eq!(
            duplicate_window(Duration::from_secs(ttl)),
            Duration::from_secs(window)
        );
    }
}
