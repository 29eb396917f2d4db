//! Checks every auth and jetstream CRD against the rules all kinds share: v1beta1, namespaced,
//! a status subresource, Ready and Age printer columns, conditions as a list-map keyed by `type`,
//! and a doc string on every property.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;

use crate::{auth, jetstream};

fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        auth::NatsOperator::crd(),
        auth::NatsSystemAccount::crd(),
        auth::NatsAccount::crd(),
        auth::NatsUser::crd(),
        jetstream::NatsStream::crd(),
        jetstream::NatsConsumer::crd(),
        jetstream::NatsKeyValue::crd(),
        jetstream::NatsObjectStore::crd(),
        jetstream::NatsBalancer::crd(),
        jetstream::NatsSystemBalancer::crd(),
        jetstream::NatsClusterEvacuation::crd(),
    ]
}

fn schema(crd: &CustomResourceDefinition) -> &JSONSchemaProps {
    crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("every CRD has a schema")
}

/// Paths of properties (under spec and status) without a description.
fn undocumented(path: &str, props: &JSONSchemaProps, out: &mut Vec<String>) {
    if let Some(properties) = &props.properties {
        for (name, prop) in properties {
            let here = format!("{path}.{name}");
            if prop.description.as_deref().unwrap_or_default().is_empty() {
                out.push(here.clone());
            }
            undocumented(&here, prop, out);
        }
    }
    if let Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(items)) =
        &props.items
    {
        undocumented(&format!("{path}[]"), items, out);
    }
}

#[test]
fn every_kind_is_v1beta1_namespaced_with_status_and_nats_prefix() {
    for crd in crds() {
        let kind = &crd.spec.names.kind;
        assert!(kind.starts_with("Nats"), "{kind}");
        assert_eq!(crd.spec.scope, "Namespaced", "{kind}");
        assert_eq!(crd.spec.versions.len(), 1, "{kind}");
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, crate::VERSION, "{kind}");
        assert!(
            v.subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{kind} has no status subresource"
        );
        assert!(
            crd.spec.group == auth::GROUP || crd.spec.group == jetstream::GROUP,
            "{kind}: {}",
            crd.spec.group
        );
    }
}

#[test]
fn every_kind_prints_ready_and_age() {
    for crd in crds() {
        let kind = &crd.spec.names.kind;
        let columns = crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default();
        let ready = columns
            .iter()
            .find(|c| c.name == "Ready")
            .unwrap_or_else(|| panic!("{kind}: no Ready"));
        assert_eq!(
            ready.json_path, ".status.conditions[?(@.type==\"Ready\")].status",
            "{kind}"
        );
        let age = columns
            .iter()
            .find(|c| c.name == "Age")
            .unwrap_or_else(|| panic!("{kind}: no Age"));
        assert_eq!(age.type_, "date", "{kind}");
        assert_eq!(
            columns.last().map(|c| c.name.as_str()),
            Some("Age"),
            "{kind}: Age comes last"
        );
    }
}

#[test]
fn every_status_has_conditions_keyed_by_type() {
    for crd in crds() {
        let kind = &crd.spec.names.kind;
        let status = &schema(&crd).properties.as_ref().expect("properties")["status"];
        let conditions = &status.properties.as_ref().expect("status properties")["conditions"];
        assert_eq!(
            conditions.x_kubernetes_list_type.as_deref(),
            Some("map"),
            "{kind}"
        );
        assert_eq!(
            conditions.x_kubernetes_list_map_keys,
            Some(vec!["type".to_string()]),
            "{kind}"
        );
        let observed =
            &status.properties.as_ref().expect("status properties")["observedGeneration"];
        assert_eq!(observed.type_.as_deref(), Some("integer"), "{kind}");
    }
}

#[test]
fn every_property_is_documented() {
    let mut missing = Vec::new();
    for crd in crds() {
        let root = schema(&crd);
        for part in ["spec", "status"] {
            let prop = &root.properties.as_ref().expect("properties")[part];
            assert!(prop.description.is_some(), "{}.{part}", crd.spec.names.kind);
            undocumented(
                &format!("{}.{part}", crd.spec.names.kind),
                prop,
                &mut missing,
            );
        }
    }
    // Condition is k8s-openapi's metav1.Condition and LabelSelector its own; both carry upstream text.
    assert!(missing.is_empty(), "undocumented: {missing:#?}");
}

#[test]
fn every_cel_rule_has_a_message() {
    fn walk(kind: &str, props: &JSONSchemaProps, out: &mut Vec<String>) {
        for rule in props.x_kubernetes_validations.iter().flatten() {
            if rule.message.as_deref().unwrap_or_default().is_empty() {
                out.push(format!("{kind}: {}", rule.rule));
            }
        }
        for prop in props.properties.iter().flat_map(|p| p.values()) {
            walk(kind, prop, out);
        }
        if let Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(items)) =
            &props.items
        {
            walk(kind, items, out);
        }
    }
    let mut out = Vec::new();
    for crd in crds() {
        walk(&crd.spec.names.kind, schema(&crd), &mut out);
    }
    assert!(out.is_empty(), "rules without a message: {out:#?}");
}
