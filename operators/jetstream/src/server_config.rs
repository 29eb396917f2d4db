//! The pieces every spec ↔ server config mapping shares (streams, consumers, key-value buckets,
//! object stores): the error of a mapping, optional keys, durations and sizes in the server's
//! integers, the storage type, and the JSON shapes of placement, subject transforms, republish,
//! and mirrors and sources.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nats_api::jetstream::{
    ExternalStream, Placement, Republish, StorageType, StreamConsumerSource, StreamSource,
    SubjectTransform,
};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::units::{UnitError, duration_nanos, quantity_bytes};

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

pub(crate) fn put(c: &mut Map<String, Value>, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        c.insert(key.to_string(), v);
    }
}

/// An optional value as the server's JSON (None stays None: the key is left out).
pub(crate) fn some<T: Serialize>(v: Option<T>) -> Option<Value> {
    v.and_then(|v| serde_json::to_value(v).ok())
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

pub(crate) fn unknown(key: &'static str, v: &Value) -> MappingError {
    MappingError::UnknownServerValue {
        key,
        value: v.to_string(),
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
