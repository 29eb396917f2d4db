//! A controller must read the same spec whether or not the apiserver has applied the schema's
//! defaults yet (objects from older CRD versions, or built in tests, arrive undefaulted): the
//! accessors that carry the design's defaults must agree with the `default`s in the CRD schema.

use kube::CustomResourceExt;
use nats_api::cluster::NatsCluster;
use nats_api::nats::{NatsAccountTrust, NatsConnection, NatsOperatorTrust};
use rstest::rstest;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn defaulted<K: CustomResourceExt>(object: &Value) -> Value {
    let crd = nats_api::crds::all()
        .into_iter()
        .find(|c| c.spec.names.kind == K::crd().spec.names.kind)
        .expect("kind is in crds::all");
    let schema = serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("schema"),
    )
    .expect("schema serializes");
    kube_cel::apply_defaults(&schema, object)
}

/// The object as written and as the apiserver stores it, both decoded.
fn both<K: CustomResourceExt + DeserializeOwned>(yaml: &str) -> (K, K) {
    let raw: Value = serde_yaml::from_str(yaml).expect("row parses");
    let stored = defaulted::<K>(&raw);
    (
        serde_json::from_value(raw).expect("raw decodes"),
        serde_json::from_value(stored).expect("defaulted decodes"),
    )
}

#[rstest]
#[case::nothing_set("{}", true, true, true, false)]
#[case::empty_blocks(
    "{exporter: {}, monitor: {}, routes: {tls: {}}, rollout: {}}",
    true,
    true,
    true,
    false
)]
#[case::routes_without_tls("{routes: {}}", true, true, true, false)]
#[case::all_off(
    "{exporter: {enabled: false}, monitor: {networkPolicy: false}, routes: {tls: {enabled: false}}, rollout: {paused: true}}",
    false,
    false,
    false,
    true
)]
fn cluster_defaults_read_the_same_before_and_after_the_apiserver(
    #[case] extra: &str,
    #[case] exporter: bool,
    #[case] network_policy: bool,
    #[case] route_tls: bool,
    #[case] paused: bool,
) {
    let mut spec: Value = serde_yaml::from_str(extra).expect("extra parses");
    spec["version"] = "2.15.1".into();
    spec["replicas"] = 3.into();
    let yaml = serde_json::json!({
        "apiVersion": "cluster.nats.mikluko.io/v1beta1",
        "kind": "NatsCluster",
        "metadata": {"name": "demo"},
        "spec": spec,
    })
    .to_string();
    let (raw, stored) = both::<NatsCluster>(&yaml);
    for (which, c) in [("as written", &raw), ("as stored", &stored)] {
        assert_eq!(c.spec.exporter_enabled(), exporter, "exporter {which}");
        assert_eq!(
            c.spec.network_policy_enabled(),
            network_policy,
            "networkPolicy {which}"
        );
        assert_eq!(c.spec.route_tls_enabled(), route_tls, "route tls {which}");
        assert_eq!(c.spec.rollout_paused(), paused, "paused {which}");
    }
    assert_eq!(raw, stored, "serde defaults and schema defaults disagree");
}

#[test]
fn secret_keys_read_the_same_before_and_after_the_apiserver() {
    let (raw, stored) = both::<NatsConnection>(
        r#"
apiVersion: nats.mikluko.io/v1beta1
kind: NatsConnection
metadata: {name: hub}
spec:
  servers: ["tls://hub.example.com:4222"]
  tls:
    ca:
      secretKeyRef: {name: hub-ca}
  credentials:
    secretKeyRef: {name: app}
"#,
    );
    for (which, c) in [("as written", &raw), ("as stored", &stored)] {
        let spec = &c.spec;
        let creds = spec.credentials.as_ref().expect("credentials");
        let ca = spec.tls.as_ref().and_then(|t| t.ca.as_ref()).expect("ca");
        assert_eq!(creds.key(), "user.creds", "creds key {which}");
        assert_eq!(ca.key(), "ca.crt", "ca key {which}");
    }
    // The apiserver writes the default key into the object, which `kubectl get -o yaml` shows.
    assert_eq!(
        stored
            .spec
            .credentials
            .as_ref()
            .and_then(|c| c.secret_key_ref.key.as_deref()),
        Some("user.creds")
    );
}

#[test]
fn trust_accessors_prefer_spec_literals_and_fall_back_to_mirrored_status() {
    let literal: NatsOperatorTrust = serde_yaml::from_str(
        r#"
apiVersion: nats.mikluko.io/v1beta1
kind: NatsOperatorTrust
metadata: {name: t}
spec: {operatorJWT: op, systemAccountJWT: sys}
"#,
    )
    .expect("decodes");
    assert_eq!(literal.jwts(), Some(("op", "sys")));

    let mut by_ref: NatsOperatorTrust = serde_yaml::from_str(
        r#"
apiVersion: nats.mikluko.io/v1beta1
kind: NatsOperatorTrust
metadata: {name: t}
spec: {operatorRef: {name: main}}
"#,
    )
    .expect("decodes");
    assert_eq!(by_ref.jwts(), None, "nothing mirrored yet");
    by_ref.status =
        Some(serde_json::from_value(serde_json::json!({"operatorJWT": "op2"})).expect("status"));
    assert_eq!(by_ref.jwts(), None, "half mirrored is not usable");
    by_ref.status = Some(
        serde_json::from_value(
            serde_json::json!({"operatorJWT": "op2", "systemAccountJWT": "sys2"}),
        )
        .expect("status"),
    );
    assert_eq!(by_ref.jwts(), Some(("op2", "sys2")));

    let mut account: NatsAccountTrust = serde_yaml::from_str(
        r#"
apiVersion: nats.mikluko.io/v1beta1
kind: NatsAccountTrust
metadata: {name: a}
spec: {accountRef: {name: app}}
"#,
    )
    .expect("decodes");
    assert_eq!(account.public_key(), None);
    account.status = Some(
        serde_json::from_value(serde_json::json!({"publicKey": "AAPP", "jwt": "j"}))
            .expect("status"),
    );
    assert_eq!(account.public_key(), Some("AAPP"));
    assert_eq!(account.jwt(), Some("j"));

    let literal: NatsAccountTrust = serde_yaml::from_str(
        r#"
apiVersion: nats.mikluko.io/v1beta1
kind: NatsAccountTrust
metadata: {name: a}
spec: {publicKey: ALIT}
"#,
    )
    .expect("decodes");
    assert_eq!(literal.public_key(), Some("ALIT"));
    assert_eq!(literal.jwt(), None);
}

#[test]
fn rendered_object_names_follow_the_design() {
    use nats_api::cluster::names;
    assert_eq!(names::server("demo", 2), "demo-2");
    assert_eq!(names::server_pod("demo", 2), "demo-2-0");
    assert_eq!(names::client_service("demo"), "demo");
    assert_eq!(names::headless_service("demo"), "demo-headless");
    assert_eq!(names::routes_ca_secret("demo"), "demo-routes-ca");
    assert_eq!(names::leaf_remotes_secret("demo"), "demo-leaf-remotes");
}

#[test]
fn observed_status_reads_conditions_by_type() {
    use nats_api::common::ObservedStatus;
    let mut status: nats_api::cluster::NatsClusterStatus =
        serde_json::from_value(serde_json::json!({
            "observedGeneration": 4,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "AllServersReady", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Settled", "status": "False", "reason": "GroupsCatchingUp", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ]
        }))
        .expect("status decodes");
    assert_eq!(status.observed_generation(), Some(4));
    assert!(status.is_true("Ready"));
    assert!(!status.is_true("Settled"));
    assert!(!status.is_true("Progressing"));
    assert_eq!(
        status.condition("Settled").map(|c| c.reason.as_str()),
        Some("GroupsCatchingUp")
    );
    status.set_observed_generation(Some(5));
    status.conditions_mut().retain(|c| c.type_ != "Settled");
    assert_eq!(status.observed_generation(), Some(5));
    assert!(status.condition("Settled").is_none());
}
