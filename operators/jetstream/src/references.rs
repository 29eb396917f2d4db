//! References between resources: a cross-namespace reference needs a NatsReferenceGrant in the
//! target's namespace (matched exactly, rechecked every reconcile: the rule is
//! [`controller_kit::grants::admits`]); a consumer naming its stream by streamRef waits for the
//! NatsStream and inherits its connection (§6.2).

use controller_kit::grants::{self, admits};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use nats_api::common::ObjectReference;
use nats_api::jetstream::{NatsConsumer, NatsStream, condition, reason as js_reason};
use nats_api::nats::{NatsReferenceGrant, reason as nats_reason};

use crate::lifecycle_policies::ConnectionState;

/// The API group of NatsConnection.
pub const CONNECTION_GROUP: &str = nats_api::nats::GROUP;
/// The API group of the JetStream kinds.
pub const JETSTREAM_GROUP: &str = nats_api::jetstream::GROUP;

/// The namespace a reference points into: its own, or the referrer's when omitted.
pub fn namespace_of<'a>(r: &'a ObjectReference, referrer_namespace: &'a str) -> &'a str {
    r.namespace.as_deref().unwrap_or(referrer_namespace)
}

/// A reference made absolute (namespace filled in).
pub fn absolute(r: &ObjectReference, referrer_namespace: &str) -> ObjectReference {
    ObjectReference {
        name: r.name.clone(),
        namespace: Some(namespace_of(r, referrer_namespace).to_string()),
    }
}

/// What a resource's NatsConnection reference finds: the connection exists and is admitted, it is
/// gone, or it is no longer granted. Deletion uses it to release a resource without its policy.
pub fn connection_state(
    grants: &[NatsReferenceGrant],
    referrer: grants::From<'_>,
    connection: &ObjectReference,
    connection_exists: bool,
) -> ConnectionState {
    let to = grants::To {
        group: CONNECTION_GROUP,
        kind: "NatsConnection",
        namespace: namespace_of(connection, referrer.namespace),
        name: &connection.name,
    };
    if !admits(grants, referrer, to) {
        ConnectionState::NotGranted
    } else if !connection_exists {
        ConnectionState::Gone
    } else {
        ConnectionState::Usable
    }
}

/// Where a consumer lives on the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerTarget {
    /// The connection (absolute) and the server-side stream name.
    Bound {
        /// The NatsConnection to use.
        connection: ObjectReference,
        /// The stream's server-side name.
        stream: String,
    },
    /// Not yet: the reason (a condition reason) and a message.
    Waiting {
        /// The condition reason.
        reason: &'static str,
        /// What is awaited.
        message: String,
    },
}

fn is_ready(conditions: &[Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == condition::READY && c.status == "True")
}

/// A consumer's connection and stream: by `stream` it names both itself; by `streamRef` it waits
/// for the NatsStream to exist, be admitted and be Ready, then uses the stream's server-side name
/// and the stream's connection (resolved against the stream's namespace, not the consumer's).
pub fn consumer_target(
    consumer: &NatsConsumer,
    stream: Option<&NatsStream>,
    grants: &[NatsReferenceGrant],
) -> ConsumerTarget {
    let ns = consumer.metadata.namespace.as_deref().unwrap_or_default();
    let spec = &consumer.spec;
    match (&spec.stream, &spec.stream_ref, &spec.connection_ref) {
        (Some(name), _, Some(conn)) => ConsumerTarget::Bound {
            connection: absolute(conn, ns),
            stream: name.clone(),
        },
        (_, Some(r), _) => {
            let target_ns = namespace_of(r, ns);
            let from = grants::From {
                group: JETSTREAM_GROUP,
                kind: "NatsConsumer",
                namespace: ns,
            };
            let to = grants::To {
                group: JETSTREAM_GROUP,
                kind: "NatsStream",
                namespace: target_ns,
                name: &r.name,
            };
            if !admits(grants, from, to) {
                return ConsumerTarget::Waiting {
                    reason: js_reason::REFERENCE_NOT_PERMITTED,
                    message: format!(
                        "no NatsReferenceGrant in {target_ns} admits NatsStream {} from {ns}",
                        r.name
                    ),
                };
            }
            let Some(s) = stream else {
                return ConsumerTarget::Waiting {
                    reason: js_reason::REFERENCE_NOT_FOUND,
                    message: format!("waiting for NatsStream {target_ns}/{}", r.name),
                };
            };
            if !s.status.as_ref().is_some_and(|st| is_ready(&st.conditions)) {
                return ConsumerTarget::Waiting {
                    reason: nats_reason::REFERENCE_NOT_READY,
                    message: format!("waiting for NatsStream {target_ns}/{} to be Ready", r.name),
                };
            }
            let stream_ns = s.metadata.namespace.as_deref().unwrap_or(target_ns);
            ConsumerTarget::Bound {
                connection: absolute(&s.spec.connection_ref, stream_ns),
                stream: s.stream_name().to_string(),
            }
        }
        // CEL refuses these shapes; a resource that slipped past names nothing usable.
        _ => ConsumerTarget::Waiting {
            reason: js_reason::REFERENCE_NOT_FOUND,
            message: "set stream with connectionRef, or streamRef".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn grant(
        ns: &str,
        from_ns: &str,
        from_kind: &str,
        to_kind: &str,
        to_name: Option<&str>,
    ) -> NatsReferenceGrant {
        let mut to = json!({"group": if to_kind == "NatsConnection" { CONNECTION_GROUP } else { JETSTREAM_GROUP }, "kind": to_kind});
        if let Some(n) = to_name {
            to["name"] = json!(n);
        }
        serde_json::from_value(json!({
            "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsReferenceGrant",
            "metadata": {"name": "g", "namespace": ns},
            "spec": {"from": [{"group": JETSTREAM_GROUP, "kind": from_kind, "namespace": from_ns}], "to": [to]}
        }))
        .expect("a grant")
    }

    fn stream_from(ns: &str) -> grants::From<'_> {
        grants::From {
            group: JETSTREAM_GROUP,
            kind: "NatsStream",
            namespace: ns,
        }
    }

    #[rstest]
    #[case::usable(vec![], true, ConnectionState::Usable)]
    #[case::gone(vec![], false, ConnectionState::Gone)]
    fn connection_state_in_the_same_namespace(
        #[case] grants: Vec<NatsReferenceGrant>,
        #[case] exists: bool,
        #[case] want: ConnectionState,
    ) {
        let r = ObjectReference {
            name: "main".into(),
            namespace: None,
        };
        assert_eq!(
            connection_state(&grants, stream_from("apps"), &r, exists),
            want
        );
    }

    #[test]
    fn a_revoked_grant_makes_the_connection_not_granted() {
        let r = ObjectReference {
            name: "main".into(),
            namespace: Some("nats".into()),
        };
        let granted = vec![grant("nats", "apps", "NatsStream", "NatsConnection", None)];
        assert_eq!(
            connection_state(&granted, stream_from("apps"), &r, true),
            ConnectionState::Usable
        );
        assert_eq!(
            connection_state(&[], stream_from("apps"), &r, true),
            ConnectionState::NotGranted
        );
    }

    fn consumer(spec: serde_json::Value) -> NatsConsumer {
        serde_json::from_value(json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsConsumer",
            "metadata": {"name": "worker", "namespace": "apps"}, "spec": spec
        }))
        .expect("a consumer")
    }

    fn stream(ns: &str, ready: Option<&str>) -> NatsStream {
        let mut v = json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsStream",
            "metadata": {"name": "orders", "namespace": ns},
            "spec": {"connectionRef": {"name": "main"}, "name": "ORDERS"}
        });
        if let Some(status) = ready {
            v["status"] = json!({"conditions": [{"type": "Ready", "status": status, "reason": "Serving",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        }
        serde_json::from_value(v).expect("a stream")
    }

    fn bound(ns: &str, stream: &str) -> ConsumerTarget {
        ConsumerTarget::Bound {
            connection: ObjectReference {
                name: "main".into(),
                namespace: Some(ns.into()),
            },
            stream: stream.into(),
        }
    }

    #[rstest]
    #[case::by_stream_name(json!({"stream": "ORDERS", "connectionRef": {"name": "main"}}), None, vec![], Ok(bound("apps", "ORDERS")))]
    #[case::stream_ref_waits_for_the_stream(json!({"streamRef": {"name": "orders"}}), None, vec![], Err("ReferenceNotFound"))]
    #[case::stream_ref_waits_until_ready(json!({"streamRef": {"name": "orders"}}), Some(stream("apps", Some("False"))), vec![], Err("ReferenceNotReady"))]
    #[case::stream_ref_without_status_waits(json!({"streamRef": {"name": "orders"}}), Some(stream("apps", None)), vec![], Err("ReferenceNotReady"))]
    #[case::stream_ref_binds_and_inherits_the_connection(json!({"streamRef": {"name": "orders"}}), Some(stream("apps", Some("True"))), vec![], Ok(bound("apps", "ORDERS")))]
    #[case::cross_namespace_stream_ref_needs_a_grant(json!({"streamRef": {"name": "orders", "namespace": "data"}}), Some(stream("data", Some("True"))), vec![], Err("ReferenceNotPermitted"))]
    #[case::inherited_connection_resolves_in_the_streams_namespace(json!({"streamRef": {"name": "orders", "namespace": "data"}}), Some(stream("data", Some("True"))),
        vec![grant("data", "apps", "NatsConsumer", "NatsStream", Some("orders"))], Ok(bound("data", "ORDERS")))]
    fn a_consumer_by_stream_ref_waits_then_inherits_the_streams_connection(
        #[case] spec: serde_json::Value,
        #[case] s: Option<NatsStream>,
        #[case] grants: Vec<NatsReferenceGrant>,
        #[case] want: Result<ConsumerTarget, &str>,
    ) {
        let got = consumer_target(&consumer(spec), s.as_ref(), &grants);
        match want {
            Ok(t) => assert_eq!(got, t),
            Err(reason) => match got {
                ConsumerTarget::Waiting { reason: r, .. } => assert_eq!(r, reason),
                other => panic!("bound: {other:?}"),
            },
        }
    }
}
