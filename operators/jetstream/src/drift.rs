//! Drift (§6.4): the desired server config against the server's, field by field, and what to do.
//!
//! The desired config holds only what spec sets. A field spec omits is compared with the value
//! nats-server fills in when it is omitted ([`ServerDefault::Fixed`]), so an untouched object shows
//! no drift and an out-of-band edit of an omitted field is still seen; a field whose server value
//! depends on other fields or on server limits ([`ServerDefault::Derived`]) is compared only when
//! spec sets it.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::ownership::comparable_metadata;

/// What nats-server puts in a field the request omits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerDefault {
    /// A fixed value, as JSON text.
    Fixed(&'static str),
    /// A value the server derives (from other fields, the stream, or its limits).
    Derived,
}

/// Whether nats-server accepts a change of the field on an existing object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutability {
    /// Any change is accepted.
    Mutable,
    /// No change is accepted.
    Immutable,
    /// It may be turned on but never off again (sealed, denyDelete, …).
    OneWay,
    /// It may change except to or from `workqueue` (a stream's retention).
    NotAcrossWorkQueue,
}

/// One field of a server config: its JSON key, the spec field it comes from, its default, and
/// whether the server lets it change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The key in nats-server's config JSON.
    pub key: &'static str,
    /// The spec field (camelCase) it maps from, as reported in drift.
    pub spec: &'static str,
    /// What the server fills in when it is omitted.
    pub default: ServerDefault,
    /// Whether the server lets it change.
    pub mutability: Mutability,
}

impl Field {
    pub(crate) const fn new(
        key: &'static str,
        spec: &'static str,
        default: ServerDefault,
        mutability: Mutability,
    ) -> Self {
        Self {
            key,
            spec,
            default,
            mutability,
        }
    }
}

/// One drifted field: the desired and the observed value.
#[derive(Debug, Clone, PartialEq)]
pub struct Drifted {
    /// The field's rule.
    pub field: Field,
    /// What spec (or the server default) wants.
    pub desired: Value,
    /// What the server has.
    pub observed: Value,
}

/// What the comparison asks the reconciler to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The server matches spec.
    InSync,
    /// Reapply spec with an update; the fields are the drifted ones (spec names).
    Update(Vec<String>),
    /// Delete and recreate (a consumer with recreateOnImmutableChange); the immutable fields.
    Recreate(Vec<String>),
    /// An immutable field differs and nothing may recreate the object; the immutable fields.
    Refused(Vec<String>),
}

/// The fields whose server value differs from the desired config.
pub fn drifted(fields: &[Field], desired: &Map<String, Value>, server: &Value) -> Vec<Drifted> {
    let empty = Map::new();
    let server = server.as_object().unwrap_or(&empty);
    let mut out = Vec::new();
    for field in fields {
        let want = match (desired.get(field.key), field.default) {
            (Some(v), _) => v.clone(),
            (None, ServerDefault::Fixed(text)) => serde_json::from_str(text).unwrap_or(Value::Null),
            (None, ServerDefault::Derived) => continue,
        };
        let have = server.get(field.key).cloned().unwrap_or(Value::Null);
        let same = if field.key == "metadata" {
            comparable_metadata(Some(&want)) == comparable_metadata(Some(&have))
        } else {
            equivalent(&want, &have)
        };
        if !same {
            out.push(Drifted {
                field: *field,
                desired: want,
                observed: have,
            });
        }
    }
    out
}

/// Whether a drifted field is a change nats-server refuses.
pub fn refused_by_server(d: &Drifted) -> bool {
    match d.field.mutability {
        Mutability::Mutable => false,
        Mutability::Immutable => true,
        Mutability::OneWay => is_zero(&d.desired) && !is_zero(&d.observed),
        Mutability::NotAcrossWorkQueue => {
            let wq = |v: &Value| v.as_str() == Some("workqueue");
            wq(&d.desired) != wq(&d.observed)
        }
    }
}

/// The decision for a comparison: in sync, update, or — when an immutable field drifted —
/// recreate if the resource allows it (a consumer's recreateOnImmutableChange), else refused.
pub fn decide(drift: &[Drifted], recreate_allowed: bool) -> Decision {
    if drift.is_empty() {
        return Decision::InSync;
    }
    let immutable = names(drift.iter().filter(|d| refused_by_server(d)));
    if immutable.is_empty() {
        Decision::Update(names(drift.iter()))
    } else if recreate_allowed {
        Decision::Recreate(immutable)
    } else {
        Decision::Refused(immutable)
    }
}

/// Spec names of drifted fields, each once, in field order.
pub fn names<'a>(drift: impl Iterator<Item = &'a Drifted>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    drift
        .filter(|d| seen.insert(d.field.spec))
        .map(|d| d.field.spec.to_string())
        .collect()
}

/// JSON's zero values: what Go's `omitempty` leaves out and what an absent key decodes to.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_zero),
    }
}

/// Equality where an absent key equals its zero value, at every depth (nats-server omits zero
/// fields with `omitempty` and fills nested structs the request left out).
fn equivalent(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let null = Value::Null;
            x.keys()
                .chain(y.keys())
                .all(|k| equivalent(x.get(k).unwrap_or(&null), y.get(k).unwrap_or(&null)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equivalent(p, q))
        }
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ if is_zero(a) && is_zero(b) => true,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    const FIELDS: &[Field] = &[
        Field::new(
            "max_msgs",
            "maxMsgs",
            ServerDefault::Fixed("-1"),
            Mutability::Mutable,
        ),
        Field::new(
            "duplicate_window",
            "duplicates",
            ServerDefault::Derived,
            Mutability::Mutable,
        ),
        Field::new(
            "storage",
            "storage",
            ServerDefault::Fixed("\"file\""),
            Mutability::Immutable,
        ),
        Field::new(
            "deny_delete",
            "denyDelete",
            ServerDefault::Fixed("false"),
            Mutability::OneWay,
        ),
        Field::new(
            "retention",
            "retention",
            ServerDefault::Fixed("\"limits\""),
            Mutability::NotAcrossWorkQueue,
        ),
        Field::new(
            "placement",
            "placement",
            ServerDefault::Derived,
            Mutability::Mutable,
        ),
        Field::new(
            "metadata",
            "metadata",
            ServerDefault::Fixed("{}"),
            Mutability::Mutable,
        ),
    ];

    /// A server config: the row's keys over the fixed defaults the server always fills in.
    fn with_defaults(row: Value) -> Value {
        let mut base = desired(json!({"max_msgs": -1, "storage": "file", "retention": "limits"}));
        base.extend(desired(row));
        Value::Object(base)
    }

    fn desired(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[rstest]
    #[case::untouched_object_with_server_defaults(json!({}), json!({"max_msgs": -1, "duplicate_window": 120_000_000_000u64, "storage": "file", "deny_delete": false, "retention": "limits"}), vec![])]
    #[case::omitted_field_edited_out_of_band(json!({}), json!({"max_msgs": 10, "storage": "file", "retention": "limits"}), vec!["maxMsgs"])]
    #[case::set_field_edited_out_of_band(json!({"max_msgs": 100}), json!({"max_msgs": 5, "storage": "file", "retention": "limits"}), vec!["maxMsgs"])]
    #[case::derived_field_omitted_is_not_compared(json!({}), json!({"duplicate_window": 1, "storage": "file", "retention": "limits"}), vec![])]
    #[case::derived_field_set_is_compared(json!({"duplicate_window": 2}), json!({"duplicate_window": 1, "storage": "file", "retention": "limits"}), vec!["duplicates"])]
    #[case::omitempty_false_equals_absent(json!({"deny_delete": false}), json!({"storage": "file", "retention": "limits"}), vec![])]
    #[case::nested_zero_fields_the_server_adds(json!({"placement": {"tags": ["a"]}}), json!({"placement": {"tags": ["a"], "cluster": ""}, "storage": "file", "retention": "limits"}), vec![])]
    #[case::server_metadata_keys_ignored(json!({"metadata": {"o": "u"}}), json!({"metadata": {"o": "u", "_nats.ver": "2.15.1"}, "storage": "file", "retention": "limits"}), vec![])]
    #[case::extra_user_metadata_on_server_drifts(json!({"metadata": {"o": "u"}}), json!({"metadata": {"o": "u", "x": "y"}, "storage": "file", "retention": "limits"}), vec!["metadata"])]
    fn drift_lists_exactly_the_fields_that_differ(
        #[case] want: Value,
        #[case] server: Value,
        #[case] fields: Vec<&str>,
    ) {
        let server = with_defaults(server);
        let got: Vec<String> = names(drifted(FIELDS, &desired(want), &server).iter());
        assert_eq!(got, fields);
    }

    #[rstest]
    #[case::nothing_drifted(json!({}), false, Decision::InSync)]
    #[case::mutable_field_updates(json!({"max_msgs": 7}), false, Decision::Update(vec!["maxMsgs".into()]))]
    #[case::immutable_field_refused(json!({"storage": "memory"}), false, Decision::Refused(vec!["storage".into()]))]
    #[case::immutable_field_recreates_when_allowed(json!({"storage": "memory"}), true, Decision::Recreate(vec!["storage".into()]))]
    #[case::one_way_on_is_an_update(json!({"deny_delete": true}), false, Decision::Update(vec!["denyDelete".into()]))]
    #[case::retention_within_limits_and_interest_updates(json!({"retention": "interest"}), false, Decision::Update(vec!["retention".into()]))]
    #[case::retention_into_workqueue_refused(json!({"retention": "workqueue"}), false, Decision::Refused(vec!["retention".into()]))]
    fn the_decision_follows_what_the_server_accepts(
        #[case] want: Value,
        #[case] recreate: bool,
        #[case] decision: Decision,
    ) {
        let server =
            json!({"max_msgs": -1, "storage": "file", "deny_delete": false, "retention": "limits"});
        let drift = drifted(FIELDS, &desired(want), &server);
        assert_eq!(decide(&drift, recreate), decision);
    }

    #[test]
    fn one_way_off_is_refused() {
        let server = json!({"storage": "file", "retention": "limits", "deny_delete": true});
        let drift = drifted(FIELDS, &desired(json!({"deny_delete": false})), &server);
        assert_eq!(
            decide(&drift, false),
            Decision::Refused(vec!["denyDelete".into()])
        );
    }
}
