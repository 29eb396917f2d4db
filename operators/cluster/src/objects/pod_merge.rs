//! spec.podTemplate merged over the rendered pod (design §4.1): a strategic-ish merge as a pure
//! function. Maps merge key by key, lists of named things (containers, volumes, env, …) merge
//! element by element on their key, and every other list or scalar the template sets replaces
//! the rendered one.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use nats_api::cluster::PodTemplate;
use serde_json::{Map, Value};

/// The key a list's elements are merged on, by the list's field name; `None`: replaced whole.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims" => Some("name"),
        "volumeMounts" | "volumeDevices" => Some("mountPath"),
        "ports" => Some("containerPort"),
        // tolerations, args, command, …: the template's list replaces the rendered one.
        _ => None,
    }
}

/// Merges `over` into `base`; `field` is the name of the field `base` sits under.
pub fn merge_value(base: &mut Value, over: &Value, field: &str) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => merge_map(b, o),
        (Value::Array(b), Value::Array(o)) => match merge_key(field) {
            Some(key) => {
                for item in o {
                    let id = item.get(key);
                    match b.iter_mut().find(|e| id.is_some() && e.get(key) == id) {
                        Some(existing) => merge_value(existing, item, ""),
                        None => b.push(item.clone()),
                    }
                }
            }
            None => *b = o.clone(),
        },
        (b, o) => *b = o.clone(),
    }
}

fn merge_map(base: &mut Map<String, Value>, over: &Map<String, Value>) {
    for (k, v) in over {
        match base.get_mut(k) {
            // An explicit null removes what was rendered.
            Some(_) if v.is_null() => {
                base.remove(k);
            }
            Some(existing) => merge_value(existing, v, k),
            None => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The rendered pod template with `template` merged over it: labels and annotations added,
/// the spec merged.
pub fn merge(rendered: PodTemplateSpec, template: &PodTemplate) -> Result<PodTemplateSpec, String> {
    let mut base = serde_json::to_value(&rendered).map_err(|e| e.to_string())?;
    let mut over = Map::new();
    if let Some(m) = &template.metadata {
        let mut meta = Map::new();
        if !m.labels.is_empty() {
            meta.insert(
                "labels".into(),
                serde_json::to_value(&m.labels).map_err(|e| e.to_string())?,
            );
        }
        if !m.annotations.is_empty() {
            meta.insert(
                "annotations".into(),
                serde_json::to_value(&m.annotations).map_err(|e| e.to_string())?,
            );
        }
        over.insert("metadata".into(), Value::Object(meta));
    }
    if let Some(spec) = &template.spec {
        over.insert("spec".into(), Value::Object(spec.clone()));
    }
    // The rendered labels and annotations win over the template's: selectors and the revision
    // depend on them.
    let keep = base.get("metadata").cloned();
    merge_value(&mut base, &Value::Object(over), "");
    if let (Some(keep), Some(meta)) = (keep, base.get_mut("metadata")) {
        merge_value(meta, &keep, "metadata");
    }
    serde_json::from_value(base).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[rstest::rstest]
    // Maps merge key by key.
    #[case(json!({"a": 1, "b": {"c": 2}}), json!({"b": {"d": 3}}), json!({"a": 1, "b": {"c": 2, "d": 3}}))]
    // Scalars and unkeyed lists are replaced.
    #[case(json!({"a": 1, "args": ["x"]}), json!({"a": 2, "args": ["y"]}), json!({"a": 2, "args": ["y"]}))]
    // A null removes.
    #[case(json!({"affinity": {"x": 1}, "a": 1}), json!({"affinity": null}), json!({"a": 1}))]
    // Containers merge by name; a new one is appended.
    #[case(
        json!({"containers": [{"name": "nats", "image": "n", "env": [{"name": "A", "value": "1"}]}]}),
        json!({"containers": [{"name": "nats", "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]}, {"name": "side", "image": "s"}]}),
        json!({"containers": [{"name": "nats", "image": "n", "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]}, {"name": "side", "image": "s"}]})
    )]
    // Volume mounts merge by mount path, volumes by name.
    #[case(
        json!({"volumes": [{"name": "v", "emptyDir": {}}], "volumeMounts": [{"name": "v", "mountPath": "/d"}]}),
        json!({"volumes": [{"name": "v", "emptyDir": {"medium": "Memory"}}], "volumeMounts": [{"name": "w", "mountPath": "/d"}]}),
        json!({"volumes": [{"name": "v", "emptyDir": {"medium": "Memory"}}], "volumeMounts": [{"name": "w", "mountPath": "/d"}]})
    )]
    fn merges(#[case] mut base: Value, #[case] over: Value, #[case] want: Value) {
        merge_value(&mut base, &over, "");
        assert_eq!(base, want);
    }

    #[test]
    fn template_metadata_is_added_but_rendered_labels_win() {
        let rendered: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app.kubernetes.io/instance": "demo"}},
            "spec": {"containers": [{"name": "nats", "image": "n"}]}
        }))
        .expect("pod");
        let template: PodTemplate = serde_json::from_value(json!({
            "metadata": {"labels": {"app.kubernetes.io/instance": "other", "team": "a"}},
            "spec": {"nodeSelector": {"pool": "nats"}}
        }))
        .expect("template");
        let merged = merge(rendered, &template).expect("merge");
        let labels = merged.metadata.and_then(|m| m.labels).expect("labels");
        assert_eq!(labels["app.kubernetes.io/instance"], "demo");
        assert_eq!(labels["team"], "a");
        let spec = merged.spec.expect("spec");
        assert_eq!(spec.node_selector.expect("ns")["pool"], "nats");
        assert_eq!(spec.containers[0].image.as_deref(), Some("n"));
    }

    #[test]
    fn a_template_that_is_no_pod_spec_is_refused() {
        let rendered = PodTemplateSpec::default();
        let template: PodTemplate =
            serde_json::from_value(json!({"spec": {"containers": "not a list"}})).expect("t");
        assert!(merge(rendered, &template).is_err());
    }
}
