//! NatsObjectStore spec ↔ the stream `OBJ_<bucket>` that backs it, as nats.go v1.54
//! (`jetstream/object.go`, prepareObjectStoreConfig) maps an ObjectStoreConfig: subjects
//! `$O.<bucket>.C.>` (chunks) and `$O.<bucket>.M.>` (metadata), TTL as max_age, discard new,
//! roll-ups and direct gets allowed.

use nats_api::jetstream::{NatsObjectStoreSpec, StorageType};
use serde_json::{Map, Value, json};

use crate::drift::{Field, Mutability as M, ServerDefault as D};
use crate::ownership::{merge_marker, user_metadata};
use crate::server_config::{
    MappingError, bool_of, bytes, nanos, placement_json, placement_of, put, storage_of,
    storage_str, str_of, strings,
};
use crate::units::{bytes_quantity, nanos_duration};

/// The prefix of an object store's stream name.
pub const STREAM_PREFIX: &str = "OBJ_";

/// The stream name of an object store.
pub fn stream_name(bucket: &str) -> String {
    format!("{STREAM_PREFIX}{bucket}")
}

/// The chunk and metadata subjects of an object store.
pub fn subjects(bucket: &str) -> [String; 2] {
    [format!("$O.{bucket}.C.>"), format!("$O.{bucket}.M.>")]
}

/// The object store's stream fields, reported by the NatsObjectStore field they come from; the
/// fields nats.go fixes for every store are reported as `stream.<key>`.
pub const OBJECT_FIELDS: &[Field] = &[
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
        "stream.max_msgs_per_subject",
        D::Fixed("-1"),
        M::Mutable,
    ),
    Field::new(
        "max_msg_size",
        "stream.max_msg_size",
        D::Fixed("-1"),
        M::Mutable,
    ),
    Field::new("discard", "stream.discard", D::Fixed("\"old\""), M::Mutable),
    Field::new("storage", "storage", D::Fixed("\"file\""), M::Immutable),
    Field::new("num_replicas", "replicas", D::Fixed("1"), M::Mutable),
    Field::new(
        "duplicate_window",
        "stream.duplicate_window",
        D::Derived,
        M::Mutable,
    ),
    Field::new("placement", "placement", D::Derived, M::Mutable),
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
    Field::new(
        "allow_direct",
        "stream.allow_direct",
        D::Fixed("false"),
        M::Mutable,
    ),
    Field::new("metadata", "metadata", D::Fixed("{}"), M::Mutable),
];

/// The stream config a NatsObjectStore asks for (bucket `bucket`, owned by `uid`).
pub fn desired(
    bucket: &str,
    spec: &NatsObjectStoreSpec,
    uid: &str,
) -> Result<Map<String, Value>, MappingError> {
    let mut c = Map::new();
    c.insert("name".into(), json!(stream_name(bucket)));
    put(
        &mut c,
        "description",
        spec.description.as_ref().map(|d| json!(d)),
    );
    c.insert("subjects".into(), json!(subjects(bucket)));
    c.insert(
        "max_age".into(),
        nanos(&spec.ttl, "ttl")?.unwrap_or(json!(0)),
    );
    c.insert(
        "max_bytes".into(),
        bytes(&spec.max_bytes, "maxBytes")?.unwrap_or(json!(-1)),
    );
    c.insert(
        "storage".into(),
        json!(storage_str(spec.storage.unwrap_or(StorageType::File))),
    );
    c.insert("num_replicas".into(), json!(spec.replicas.unwrap_or(1)));
    put(
        &mut c,
        "placement",
        spec.placement.as_ref().map(placement_json),
    );
    c.insert("discard".into(), json!("new"));
    c.insert("allow_rollup_hdrs".into(), json!(true));
    c.insert("allow_direct".into(), json!(true));
    c.insert(
        "metadata".into(),
        Value::Object(merge_marker(spec.metadata.as_ref(), uid)),
    );
    c.insert(
        "compression".into(),
        json!(if spec.compression == Some(true) {
            "s2"
        } else {
            "none"
        }),
    );
    Ok(c)
}

/// Refuses a stream that is not an object store (reason NotABucket).
pub fn check_is_object_store(server: &Value) -> Result<String, MappingError> {
    let name = str_of(server.get("name")).unwrap_or_default();
    let fail = |why: String| MappingError::NotABucket {
        stream: name.clone(),
        kind: "object store",
        why,
    };
    let bucket = name
        .strip_prefix(STREAM_PREFIX)
        .ok_or_else(|| fail("its name lacks the OBJ_ prefix".into()))?
        .to_string();
    let have = strings(server.get("subjects"));
    for s in subjects(&bucket) {
        if !have.contains(&s) {
            return Err(fail(format!("it does not capture {s}")));
        }
    }
    if !bool_of(server.get("allow_rollup_hdrs")) {
        return Err(fail("roll-ups are not allowed".into()));
    }
    Ok(bucket)
}

/// The NatsObjectStore fields read from the store's stream (what Adopt writes into spec).
pub fn spec_from_server(
    base: &NatsObjectStoreSpec,
    server: &Value,
) -> Result<NatsObjectStoreSpec, MappingError> {
    let bucket = check_is_object_store(server)?;
    let g = |k: &str| server.get(k).filter(|v| !v.is_null());
    let int = |k: &str| g(k).and_then(Value::as_i64);
    Ok(NatsObjectStoreSpec {
        connection_ref: base.connection_ref.clone(),
        adoption_policy: base.adoption_policy,
        deletion_policy: base.deletion_policy,
        terminal_policy: base.terminal_policy,
        name: Some(bucket),
        description: str_of(g("description")).filter(|d| !d.is_empty()),
        ttl: int("max_age").filter(|n| *n > 0).map(nanos_duration),
        max_bytes: int("max_bytes").map(bytes_quantity),
        storage: g("storage").map(storage_of).transpose()?,
        replicas: int("num_replicas").and_then(|v| i32::try_from(v).ok()),
        placement: g("placement")
            .map(placement_of)
            .filter(|p| *p != Default::default()),
        compression: Some(str_of(g("compression")).as_deref() == Some("s2")),
        metadata: user_metadata(server),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::{Decision, decide, drifted, names};
    use crate::ownership::OWNER_METADATA_KEY;
    use rstest::rstest;

    const UID: &str = "uid-obj";

    fn spec(v: Value) -> NatsObjectStoreSpec {
        let mut base = json!({"connectionRef": {"name": "main"}});
        if let (Some(b), Some(o)) = (base.as_object_mut(), v.as_object()) {
            b.extend(o.clone());
        }
        serde_json::from_value(base).expect("a valid NatsObjectStore spec")
    }

    /// The config nats-server returns for a store created from `s`: the fields it fills in added.
    fn as_server_returns(s: &NatsObjectStoreSpec) -> Value {
        let mut c = desired("assets", s, UID).expect("maps");
        for (k, v) in [
            ("retention", json!("limits")),
            ("max_msgs", json!(-1)),
            ("max_consumers", json!(-1)),
            ("max_msgs_per_subject", json!(-1)),
            ("max_msg_size", json!(-1)),
            ("duplicate_window", json!(120_000_000_000i64)),
        ] {
            c.insert(k.into(), v);
        }
        Value::Object(c)
    }

    #[test]
    fn an_empty_store_spec_takes_nats_go_defaults() {
        let got = desired("assets", &spec(json!({})), UID).expect("maps");
        assert_eq!(
            Value::Object(got),
            json!({
                "name": "OBJ_assets", "subjects": ["$O.assets.C.>", "$O.assets.M.>"], "max_age": 0,
                "max_bytes": -1, "storage": "file", "num_replicas": 1, "discard": "new",
                "allow_rollup_hdrs": true, "allow_direct": true, "compression": "none",
                "metadata": {OWNER_METADATA_KEY: UID}
            })
        );
    }

    #[rstest]
    #[case::ttl_is_max_age(json!({"ttl": "2160h"}), "max_age", json!(7_776_000_000_000_000i64))]
    #[case::max_bytes_in_bytes(json!({"maxBytes": "50Gi"}), "max_bytes", json!(50i64 << 30))]
    #[case::memory_storage(json!({"storage": "Memory"}), "storage", json!("memory"))]
    #[case::replicas(json!({"replicas": 3}), "num_replicas", json!(3))]
    #[case::compression_is_s2(json!({"compression": true}), "compression", json!("s2"))]
    #[case::placement(json!({"placement": {"cluster": "c2"}}), "placement", json!({"cluster": "c2"}))]
    fn a_store_spec_maps_as_nats_go_maps_it(
        #[case] s: Value,
        #[case] key: &str,
        #[case] want: Value,
    ) {
        let got = desired("assets", &spec(s), UID).expect("maps");
        assert_eq!(got.get(key), Some(&want));
    }

    #[rstest]
    #[case::untouched_store(json!({}), Decision::InSync)]
    #[case::ttl_edited_out_of_band(json!({"max_age": 1_000_000_000}), Decision::Update(vec!["ttl".into()]))]
    #[case::replicas_edited_out_of_band(json!({"num_replicas": 3}), Decision::Update(vec!["replicas".into()]))]
    #[case::storage_differs_refused(json!({"storage": "memory"}), Decision::Refused(vec!["storage".into()]))]
    fn store_drift_is_reported_in_the_stores_fields(#[case] edit: Value, #[case] want: Decision) {
        let mut server = as_server_returns(&spec(json!({})));
        if let (Some(s), Some(e)) = (server.as_object_mut(), edit.as_object()) {
            s.extend(e.clone());
        }
        let d = desired("assets", &spec(json!({})), UID).expect("maps");
        assert_eq!(decide(&drifted(OBJECT_FIELDS, &d, &server), false), want);
    }

    #[rstest]
    #[case::a_key_value_bucket(json!({"name": "KV_assets", "subjects": ["$KV.assets.>"], "allow_rollup_hdrs": true}), "OBJ_ prefix")]
    #[case::missing_meta_subjects(json!({"name": "OBJ_assets", "subjects": ["$O.assets.C.>"], "allow_rollup_hdrs": true}), "$O.assets.M.>")]
    fn a_stream_that_is_not_an_object_store_is_refused(#[case] server: Value, #[case] why: &str) {
        let err = spec_from_server(&spec(json!({})), &server).unwrap_err();
        assert!(err.to_string().contains(why), "{err}");
    }

    #[test]
    fn an_adopted_store_re_maps_to_the_same_stream() {
        let mut server = as_server_returns(&spec(json!({"ttl": "1h", "replicas": 3})));
        if let Some(s) = server.as_object_mut() {
            s.insert("metadata".into(), json!({"_nats.ver": "2.15.1"}));
        }
        let adopted = spec_from_server(&spec(json!({})), &server).expect("reads");
        assert_eq!(adopted.name.as_deref(), Some("assets"));
        let d = desired("assets", &adopted, UID).expect("maps");
        assert_eq!(
            names(drifted(OBJECT_FIELDS, &d, &server).iter()),
            vec!["metadata"]
        );
    }
}
