//! The CEL case table, judged offline: every row of `nats_api::cel_cases::all()` is evaluated
//! against the `x-kubernetes-validations` rules of its kind's CRD from `nats_api::crds::all()`
//! with kube-cel (schema defaults applied first, the old object bound for transition rows), and
//! the verdict and message must match the row.
//!
//! A row must also be well-formed: its object's apiVersion must be the CRD's, and every field it
//! sets must exist in the schema (an apiserver would prune an unknown field silently, and the row
//! would then test something else than it says).

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_cel::{ErrorKind, RootContext, Validator};
use nats_api::cel_cases::{self, Case, Expect};
use serde_json::Value;

struct Kind {
    api_version: String,
    root: RootContext,
    schema: Value,
}

fn kinds() -> BTreeMap<String, Kind> {
    nats_api::crds::all()
        .into_iter()
        .map(|crd: CustomResourceDefinition| {
            let version = &crd.spec.versions[0];
            let schema = serde_json::to_value(
                version
                    .schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref())
                    .expect("every CRD has an openAPIV3Schema"),
            )
            .expect("schema serializes");
            let api_version = format!("{}/{}", crd.spec.group, version.name);
            (
                crd.spec.names.kind.clone(),
                Kind {
                    root: RootContext {
                        api_version: api_version.clone(),
                        api_group: crd.spec.group.clone(),
                        kind: crd.spec.names.kind.clone(),
                    },
                    api_version,
                    schema,
                },
            )
        })
        .collect()
}

fn parse(yaml: &str) -> Result<Value, String> {
    serde_yaml::from_str(yaml).map_err(|e| format!("YAML does not parse: {e}"))
}

/// Every path in `value` the schema does not declare (the apiserver would prune it).
fn unknown_fields(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match value {
        Value::Object(obj) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in obj {
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                // metadata is the apiserver's own ObjectMeta; the CRD schema leaves it open.
                if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match (props.and_then(|p| p.get(key)), additional) {
                    (Some(sub), _) | (None, Some(sub)) => {
                        unknown_fields(sub, child, &child_path, out)
                    }
                    (None, None) => out.push(child_path),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    unknown_fields(item_schema, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Judges one row; `Err` says how it disagrees with the rules.
fn judge(case: &Case, kinds: &BTreeMap<String, Kind>, validator: &Validator) -> Result<(), String> {
    let kind = kinds
        .get(case.kind)
        .ok_or_else(|| format!("no CRD of kind {}", case.kind))?;
    let new = parse(case.new)?;
    let old = case.old.map(parse).transpose()?;
    for (which, object) in std::iter::once(("new", &new)).chain(old.iter().map(|o| ("old", o))) {
        if object.get("kind").and_then(Value::as_str) != Some(case.kind) {
            return Err(format!("{which} object's kind is not {}", case.kind));
        }
        if object.get("apiVersion").and_then(Value::as_str) != Some(kind.api_version.as_str()) {
            return Err(format!(
                "{which} object's apiVersion is not {}",
                kind.api_version
            ));
        }
        let mut unknown = Vec::new();
        unknown_fields(&kind.schema, object, "", &mut unknown);
        if !unknown.is_empty() {
            return Err(format!(
                "{which} object sets fields the schema does not declare: {}",
                unknown.join(", ")
            ));
        }
    }

    let verdict =
        validator.validate_with_context(&kind.schema, &new, old.as_ref(), Some(&kind.root));
    let errors = match verdict {
        Ok(()) => Vec::new(),
        Err(errors) => errors.into_vec(),
    };
    // A rule that does not compile or cannot be evaluated is a defect whatever the row expects.
    let broken: Vec<String> = errors
        .iter()
        .filter(|e| e.kind != ErrorKind::ValidationFailure)
        .map(|e| {
            format!(
                "{:?} at {}: {} (rule {:?})",
                e.kind, e.field_path, e.message, e.rule
            )
        })
        .collect();
    if !broken.is_empty() {
        return Err(format!(
            "rules could not be evaluated: {}",
            broken.join("; ")
        ));
    }
    let messages: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    match (&case.expect, messages.is_empty()) {
        (Expect::Accepted, true) => Ok(()),
        (Expect::Accepted, false) => Err(format!(
            "expected Accepted, refused: {}",
            messages.join("; ")
        )),
        (Expect::Refused(want), true) => Err(format!("expected Refused({want:?}), accepted")),
        (Expect::Refused(want), false) => {
            if messages.iter().any(|m| m.contains(want)) {
                Ok(())
            } else {
                Err(format!(
                    "expected Refused({want:?}), refused for another reason: {}",
                    messages.join("; ")
                ))
            }
        }
    }
}

#[test]
fn every_row_of_the_cel_table_agrees_with_the_rules() {
    let kinds = kinds();
    let validator = Validator::new();
    let cases = cel_cases::all();

    let mut mismatches = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        if let Err(why) = judge(case, &kinds, &validator) {
            mismatches.push(format!("  row {i} [{}] {}: {why}", case.kind, case.name));
        }
    }

    let refused = cases
        .iter()
        .filter(|c| matches!(c.expect, Expect::Refused(_)))
        .count();
    let transitions = cases.iter().filter(|c| c.old.is_some()).count();
    println!(
        "cel_table: {} rows ({} accepted, {} refused; {} create, {} transition), {} mismatching",
        cases.len(),
        cases.len() - refused,
        refused,
        cases.len() - transitions,
        transitions,
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} of {} CEL rows disagree with the rules:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
}

/// The table is only worth something if it covers both verdicts and both kinds of request for
/// every kind that has rules, and if its rows are distinct.
#[test]
fn the_cel_table_covers_every_kind_with_rules() {
    let cases = cel_cases::all();
    let mut names = std::collections::BTreeSet::new();
    for case in &cases {
        assert!(
            names.insert((case.kind, case.name)),
            "row named twice: [{}] {}",
            case.kind,
            case.name
        );
    }
    assert!(cases.iter().any(|c| c.old.is_some()), "no transition rows");

    let kinds = kinds();
    let mut lacking = Vec::new();
    for (kind, k) in &kinds {
        if !serde_json::to_string(&k.schema)
            .expect("schema serializes")
            .contains("x-kubernetes-validations")
        {
            continue;
        }
        // A rule with only accepted rows could refuse nothing, one with only refused rows could
        // refuse everything: each kind with rules needs both.
        let accepted = cases
            .iter()
            .any(|c| c.kind == kind && c.expect == Expect::Accepted);
        let refused = cases
            .iter()
            .any(|c| c.kind == kind && matches!(c.expect, Expect::Refused(_)));
        if !(accepted && refused) {
            lacking.push(format!(
                "  {kind}: accepted row {}, refused row {}",
                if accepted { "present" } else { "missing" },
                if refused { "present" } else { "missing" }
            ));
        }
    }
    assert!(
        lacking.is_empty(),
        "kinds with CEL rules but without both an accepted and a refused row:\n{}",
        lacking.join("\n")
    );
}
