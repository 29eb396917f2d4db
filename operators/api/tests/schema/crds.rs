//! What an apiserver would refuse or silently mangle in the generated CRDs, checked offline:
//! names and scope, one served v1beta1 version, the status subresource, printer columns, a
//! structural schema (every node typed, no `$ref` or unflattened `anyOf`/`oneOf`/`allOf`, list-map
//! keys required scalars), descriptions on every field, CEL rules that compile within the cost
//! budget; and that `deploy/crds/` holds exactly what `crdgen` generates (the drift check).

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_cel::{ScopeContext, WarningKind, analyze_rule, compile_schema};
use serde_json::Value;

/// Every kind the API reference lists, with its group.
const KINDS: [(&str, &str); 16] = [
    ("NatsConnection", "nats.mikluko.io"),
    ("NatsReferenceGrant", "nats.mikluko.io"),
    ("NatsOperatorTrust", "nats.mikluko.io"),
    ("NatsAccountTrust", "nats.mikluko.io"),
    ("NatsCluster", "cluster.nats.mikluko.io"),
    ("NatsOperator", "auth.nats.mikluko.io"),
    ("NatsSystemAccount", "auth.nats.mikluko.io"),
    ("NatsAccount", "auth.nats.mikluko.io"),
    ("NatsUser", "auth.nats.mikluko.io"),
    ("NatsStream", "jetstream.nats.mikluko.io"),
    ("NatsConsumer", "jetstream.nats.mikluko.io"),
    ("NatsKeyValue", "jetstream.nats.mikluko.io"),
    ("NatsObjectStore", "jetstream.nats.mikluko.io"),
    ("NatsBalancer", "jetstream.nats.mikluko.io"),
    ("NatsSystemBalancer", "jetstream.nats.mikluko.io"),
    ("NatsClusterEvacuation", "jetstream.nats.mikluko.io"),
];

/// The one kind without a status subresource.
const NO_STATUS: &str = "NatsReferenceGrant";

fn schema_of(crd: &CustomResourceDefinition) -> Value {
    serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("every CRD has an openAPIV3Schema"),
    )
    .expect("schema serializes")
}

#[test]
fn crds_are_the_sixteen_kinds_in_their_groups() {
    let crds = nats_api::crds::all();
    let got: Vec<(String, String)> = crds
        .iter()
        .map(|c| (c.spec.names.kind.clone(), c.spec.group.clone()))
        .collect();
    let want: Vec<(String, String)> = KINDS
        .iter()
        .map(|(k, g)| (k.to_string(), g.to_string()))
        .collect();
    assert_eq!(
        got, want,
        "crds::all() must list the 16 kinds in the reference's order"
    );
}

#[test]
fn names_scope_versions_subresources_and_columns() {
    let mut problems = Vec::new();
    for crd in nats_api::crds::all() {
        let kind = crd.spec.names.kind.clone();
        let mut bad = |what: String| problems.push(format!("{kind}: {what}"));
        let lower = kind.to_lowercase();
        if !kind.starts_with("Nats") {
            bad("kind does not start with Nats".into());
        }
        if crd.spec.names.plural != format!("{lower}s") {
            bad(format!("plural {:?}", crd.spec.names.plural));
        }
        if crd.spec.names.singular.as_deref() != Some(lower.as_str()) {
            bad(format!("singular {:?}", crd.spec.names.singular));
        }
        let want_name = format!("{}.{}", crd.spec.names.plural, crd.spec.group);
        if crd.metadata.name.as_deref() != Some(want_name.as_str()) {
            bad(format!(
                "metadata.name {:?}, want {want_name}",
                crd.metadata.name
            ));
        }
        if crd.spec.scope != "Namespaced" {
            bad(format!("scope {}", crd.spec.scope));
        }
        if crd.spec.versions.len() != 1 {
            bad(format!("{} versions", crd.spec.versions.len()));
        }
        let version = &crd.spec.versions[0];
        if version.name != nats_api::VERSION || !version.served || !version.storage {
            bad(format!(
                "version {} served {} storage {}",
                version.name, version.served, version.storage
            ));
        }
        let has_status_subresource = version
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some());
        let schema = schema_of(&crd);
        let has_status_schema = schema.pointer("/properties/status").is_some();
        let want_status = kind != NO_STATUS;
        if has_status_subresource != want_status || has_status_schema != want_status {
            bad(format!(
                "status subresource {has_status_subresource}, status schema {has_status_schema}, want {want_status}"
            ));
        }
        if schema.pointer("/properties/spec").is_none() {
            bad("no spec".into());
        }
        let columns: BTreeSet<String> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        if !columns.contains("Age") {
            bad("no Age printer column".into());
        }
        if want_status && !columns.contains("Ready") {
            bad("no Ready printer column".into());
        }
        for column in version.additional_printer_columns.iter().flatten() {
            if !column.json_path.starts_with('.') {
                bad(format!(
                    "printer column {} path {:?}",
                    column.name, column.json_path
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Walks one schema node, recording every structural-schema violation under `path`.
fn check_structural(node: &Value, path: &str, out: &mut Vec<String>) {
    let Some(obj) = node.as_object() else {
        out.push(format!("{path}: schema node is not an object"));
        return;
    };
    for forbidden in [
        "$ref",
        "definitions",
        "$defs",
        "$schema",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "patternProperties",
        "additionalItems",
        "dependencies",
        "const",
    ] {
        if obj.contains_key(forbidden) {
            out.push(format!("{path}: {forbidden} left in the schema"));
        }
    }
    if obj.get("uniqueItems") == Some(&Value::Bool(true)) {
        out.push(format!("{path}: uniqueItems true"));
    }
    if obj.contains_key("nullable") {
        out.push(format!("{path}: nullable left in the schema"));
    }
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let ty = obj.get("type").and_then(Value::as_str);
    match (ty, int_or_string) {
        (Some(_), true) => out.push(format!("{path}: type set on an int-or-string node")),
        (None, false) if !preserve => out.push(format!("{path}: no type")),
        _ => {}
    }
    if !path.is_empty()
        && !obj.contains_key("description")
        && !path.ends_with("[]")
        && !path.ends_with("{}")
    {
        out.push(format!("{path}: no description"));
    }
    if obj.contains_key("properties") && obj.contains_key("additionalProperties") {
        out.push(format!(
            "{path}: properties and additionalProperties together"
        ));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        if ty != Some("object") {
            out.push(format!("{path}: properties on a non-object"));
        }
        if path.is_empty()
            && let Some(meta) = props.get("metadata")
        {
            let keys: Vec<&String> = meta
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().collect())
                .unwrap_or_default();
            if keys.iter().any(|k| *k != "name" && *k != "generateName") {
                out.push("metadata: only name and generateName may be constrained".into());
            }
        }
        for (name, sub) in props {
            let sub_path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            check_structural(sub, &sub_path, out);
        }
    }
    if let Some(required) = obj.get("required").and_then(Value::as_array) {
        let props = obj.get("properties").and_then(Value::as_object);
        for r in required {
            let r = r.as_str().unwrap_or_default();
            if !props.is_some_and(|p| p.contains_key(r)) {
                out.push(format!("{path}: required {r:?} is not a property"));
            }
        }
    }
    if let Some(add) = obj.get("additionalProperties") {
        if add.is_object() {
            check_structural(add, &format!("{path}{{}}"), out);
        } else if add != &Value::Bool(true) {
            out.push(format!("{path}: additionalProperties {add}"));
        }
    }
    match (ty, obj.get("items")) {
        (Some("array"), Some(items)) => {
            check_structural(items, &format!("{path}[]"), out);
        }
        (Some("array"), None) => out.push(format!("{path}: array without items")),
        (_, Some(_)) => out.push(format!("{path}: items on a non-array")),
        _ => {}
    }
    match obj.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys = obj
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if keys.is_empty() {
                out.push(format!("{path}: list-type map without list-map-keys"));
            }
            let items = obj.get("items");
            let required: BTreeSet<&str> = items
                .and_then(|i| i.get("required"))
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for key in keys.iter().filter_map(Value::as_str) {
                let key_schema = items.and_then(|i| i.pointer(&format!("/properties/{key}")));
                let scalar = key_schema
                    .and_then(|k| k.get("type"))
                    .and_then(Value::as_str)
                    .is_some_and(|t| matches!(t, "string" | "integer" | "boolean"));
                let defaulted = key_schema.is_some_and(|k| k.get("default").is_some());
                if !scalar || !(required.contains(key) || defaulted) {
                    out.push(format!(
                        "{path}: list-map key {key:?} must be a required or defaulted scalar"
                    ));
                }
            }
        }
        Some("set" | "atomic") | None => {}
        Some(other) => out.push(format!("{path}: list-type {other:?}")),
    }
    if obj.contains_key("x-kubernetes-list-map-keys")
        && obj.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map")
    {
        out.push(format!("{path}: list-map-keys without list-type map"));
    }
}

#[test]
fn every_schema_is_structural_and_described() {
    let mut problems = Vec::new();
    for crd in nats_api::crds::all() {
        let schema = schema_of(&crd);
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            problems.push(format!("{}: root is not an object", crd.spec.names.kind));
        }
        let mut out = Vec::new();
        check_structural(&schema, "", &mut out);
        problems.extend(
            out.into_iter()
                .map(|p| format!("{}: {p}", crd.spec.names.kind)),
        );
    }
    assert!(
        problems.is_empty(),
        "{} structural problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Every node carrying `x-kubernetes-validations`, with its path.
fn rule_nodes<'a>(node: &'a Value, path: String, out: &mut Vec<(String, &'a Value)>) {
    if node.get("x-kubernetes-validations").is_some() {
        out.push((path.clone(), node));
    }
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            rule_nodes(sub, format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = node.get("items") {
        rule_nodes(items, format!("{path}[]"), out);
    }
    if let Some(add) = node.get("additionalProperties").filter(|a| a.is_object()) {
        rule_nodes(add, format!("{path}{{}}"), out);
    }
}

/// Whether the variable a scope warning names is one a comprehension macro of the rule binds
/// (`list.all(x, ...)` and friends), which the analyzer does not know about.
fn bound_by_macro(rule: &str, warning: &str) -> bool {
    let Some(var) = warning.split('\'').nth(1) else {
        return false;
    };
    ["all", "exists", "exists_one", "map", "filter"]
        .iter()
        .any(|m| rule.contains(&format!(".{m}({var},")))
}

#[test]
fn every_cel_rule_compiles_within_budget_and_says_why() {
    let mut problems = Vec::new();
    let mut rules = 0;
    for crd in nats_api::crds::all() {
        let kind = crd.spec.names.kind.clone();
        let schema = schema_of(&crd);
        let compiled = compile_schema(&schema);
        for e in compiled.compilation_errors() {
            problems.push(format!("{kind}: does not compile: {e}"));
        }
        let mut nodes = Vec::new();
        rule_nodes(&schema, String::new(), &mut nodes);
        for (path, node) in nodes {
            let scoped = compile_schema(node);
            for rule in node["x-kubernetes-validations"]
                .as_array()
                .into_iter()
                .flatten()
            {
                rules += 1;
                let text = rule["rule"].as_str().unwrap_or_default();
                let message = rule
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if message.trim().is_empty() && rule.get("messageExpression").is_none() {
                    problems.push(format!("{kind}{path}: rule {text:?} has no message"));
                }
                for w in analyze_rule(text, &scoped, ScopeContext::CrdValidation) {
                    if w.kind == WarningKind::WrongScope && bound_by_macro(text, &w.message) {
                        continue;
                    }
                    if matches!(w.kind, WarningKind::WrongScope | WarningKind::CostExceeded) {
                        problems.push(format!("{kind}{path}: {text:?}: {}", w.message));
                    }
                }
            }
        }
    }
    println!("{rules} CEL rules checked");
    assert!(rules > 0, "no CEL rules found at all");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// CI's drift check as a test: `deploy/crds/` must hold exactly what `crdgen` writes.
#[test]
fn deploy_crds_match_what_crdgen_generates() {
    let dir = nats_api::crds::default_dir();
    let drift = nats_api::crds::drift(&dir).expect("deploy/crds is readable");
    assert!(
        drift.is_empty(),
        "{} is out of date; run `cargo run -p nats-api --bin crdgen`:\n{}",
        dir.display(),
        drift
            .iter()
            .map(|d| format!("  {d}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let written = nats_api::crds::rendered().expect("CRDs render");
    assert_eq!(written.len(), KINDS.len());
}

/// The committed YAML decodes back into the CRD it was generated from, so what is applied is what
/// the types describe (nothing lost in the YAML rendering).
#[test]
fn rendered_yaml_round_trips() {
    for crd in nats_api::crds::all() {
        let yaml = nats_api::crds::to_yaml(&crd).expect("renders");
        let back: CustomResourceDefinition = serde_yaml::from_str(&yaml).expect("decodes");
        assert_eq!(back, crd, "{} does not round-trip", crd.spec.names.kind);
    }
}
