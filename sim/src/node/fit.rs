//! A NatsCluster written for a production Kubernetes cluster, fitted to the one 2-core node of
//! this machine with no registry ([`Fit`]): what a scenario or a story applies on the node
//! backend is its manifest with
//!
//! - the nats image pinned to the digest the node gave the imported nats-server binary of the
//!   NatsCluster's `spec.version` (or the default one; the manifest's own digest names an image
//!   that cannot be pulled here);
//! - no exporter sidecar (its image is not obtainable offline: the design's render with
//!   `exporter.enabled: false`);
//! - memory requests and limits divided by [`Fit::memory_divisor`] (so 4Gi → 512Mi and 8Gi →
//!   1Gi: a change of memory stays a change, and a rolling restart stays one), CPU requests
//!   capped at [`Fit::cpu_millis`], and the JetStream volume's request capped at
//!   [`Fit::storage`];
//! - no `storageClassName` on the JetStream volume: the node has one class, its default
//!   `local` of static volumes (a story's `fast-ssd` names a production cluster's class).
//!
//! Every other field is applied as written. Pure: a table test is beside it.

use kube::api::DynamicObject;
use serde_json::Value;

/// How a NatsCluster is fitted to the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fit {
    /// The nats image's repository and the digest the node imported it under.
    pub image: Option<(String, String)>,
    /// The digests of other nats-server versions the node imported into the same repository,
    /// by version: a NatsCluster of one of these versions runs its own image.
    pub versions: std::collections::BTreeMap<String, String>,
    /// Memory requests and limits are divided by this.
    pub memory_divisor: i64,
    /// CPU requests are at most this many millicores.
    pub cpu_millis: i64,
    /// The JetStream volume's storage request is at most this.
    pub storage: String,
}

impl Fit {
    /// The node's fit for the nats image `repository@digest`: memory ÷ 8, 100m of CPU, 4Gi
    /// volumes.
    pub fn node(repository: &str, digest: &str) -> Self {
        Self {
            image: Some((repository.into(), digest.into())),
            versions: Default::default(),
            memory_divisor: 8,
            cpu_millis: 100,
            // A stream of story 01 reserves 2 GiB of each server's file store; the PVs are 10Gi
            // and JetStream reserves, it does not allocate.
            storage: "4Gi".into(),
        }
    }

    /// Also version `version` of nats-server, imported as `digest` of the same repository.
    pub fn with_version(mut self, version: &str, digest: &str) -> Self {
        self.versions.insert(version.into(), digest.into());
        self
    }

    /// What this fit changes, in a line for a report.
    pub fn describe(&self) -> String {
        let image = match &self.image {
            Some((repo, digest)) => {
                let others: String = self
                    .versions
                    .iter()
                    .map(|(v, d)| format!(" (version {v}: @{d})"))
                    .collect();
                format!("image {repo}@{digest}{others}, ")
            }
            None => String::new(),
        };
        format!(
            "NatsClusters fitted to the node: {image}no exporter, memory ÷ {}, CPU requests ≤ {}m, \
             volumes ≤ {} of the default class",
            self.memory_divisor, self.cpu_millis, self.storage
        )
    }

    /// Fits `obj` when it is a NatsCluster; leaves any other object as it is. An error names
    /// the field that cannot be read.
    pub fn nats_cluster(&self, obj: &mut DynamicObject) -> Result<(), String> {
        if obj.types.as_ref().is_none_or(|t| t.kind != "NatsCluster") {
            return Ok(());
        }
        let Some(spec) = obj.data.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        if let Some((repository, digest)) = &self.image {
            let version = spec.get("version").and_then(Value::as_str);
            let digest = version.and_then(|v| self.versions.get(v)).unwrap_or(digest);
            spec.insert(
                "image".into(),
                serde_json::json!({"repository": repository, "digest": digest}),
            );
        }
        let exporter = spec
            .entry("exporter")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(e) = exporter.as_object_mut() {
            e.insert("enabled".into(), Value::Bool(false));
        }
        if let Some(resources) = spec.get_mut("resources") {
            for part in ["requests", "limits"] {
                let Some(r) = resources.get_mut(part).and_then(Value::as_object_mut) else {
                    continue;
                };
                if let Some(m) = r.get_mut("memory") {
                    *m = Value::String(self.memory(m, part)?);
                }
                if part == "requests"
                    && let Some(c) = r.get_mut("cpu")
                {
                    *c = Value::String(self.cpu(c)?);
                }
            }
        }
        let Some(jetstream) = spec.get_mut("jetstream") else {
            return Ok(());
        };
        if let Some(s) =
            jetstream.pointer_mut("/volumeClaimTemplate/spec/resources/requests/storage")
        {
            *s = Value::String(self.storage(s)?);
        }
        if let Some(claim) = jetstream
            .pointer_mut("/volumeClaimTemplate/spec")
            .and_then(Value::as_object_mut)
        {
            claim.remove("storageClassName");
        }
        if let Some(limits) = jetstream.get_mut("limits").and_then(Value::as_object_mut) {
            // The stores keep their share of what they live in: memory's ÷ as the limit, the
            // file store at most the volume.
            if let Some(m) = limits.get_mut("maxMemoryStore") {
                *m = Value::String(self.memory_store(m)?);
            }
            if let Some(f) = limits.get_mut("maxFileStore") {
                *f = Value::String(self.file_store(f)?);
            }
        }
        Ok(())
    }

    fn memory_store(&self, value: &Value) -> Result<String, String> {
        let bytes = quantity_bytes(value, "spec.jetstream.limits.maxMemoryStore")?;
        Ok(nats_api::quantity::of_bytes(
            bytes / self.memory_divisor.max(1),
        ))
    }

    fn file_store(&self, value: &Value) -> Result<String, String> {
        let asked = quantity_bytes(value, "spec.jetstream.limits.maxFileStore")?;
        let cap = nats_api::quantity::bytes(&self.storage)
            .map_err(|why| format!("the node's storage cap {:?}: {why}", self.storage))?;
        Ok(nats_api::quantity::of_bytes(asked.min(cap)))
    }

    fn memory(&self, value: &Value, part: &str) -> Result<String, String> {
        let bytes = quantity_bytes(value, &format!("spec.resources.{part}.memory"))?;
        Ok(nats_api::quantity::of_bytes(
            bytes / self.memory_divisor.max(1),
        ))
    }

    fn cpu(&self, value: &Value) -> Result<String, String> {
        let field = "spec.resources.requests.cpu";
        let text = quantity_text(value, field)?;
        let millis = match text.strip_suffix('m') {
            Some(m) => m.parse::<f64>(),
            None => text.parse::<f64>().map(|c| c * 1000.0),
        }
        .map_err(|_| format!("{field}: {text:?} is not a CPU quantity"))?;
        Ok(format!("{}m", (millis.ceil() as i64).min(self.cpu_millis)))
    }

    fn storage(&self, value: &Value) -> Result<String, String> {
        let field = "spec.jetstream.volumeClaimTemplate.spec.resources.requests.storage";
        let asked = quantity_bytes(value, field)?;
        let cap = nats_api::quantity::bytes(&self.storage)
            .map_err(|why| format!("the node's storage cap {:?}: {why}", self.storage))?;
        Ok(nats_api::quantity::of_bytes(asked.min(cap)))
    }
}

fn quantity_text(value: &Value, field: &str) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(format!("{field}: {other} is not a quantity")),
    }
}

fn quantity_bytes(value: &Value, field: &str) -> Result<i64, String> {
    let text = quantity_text(value, field)?;
    nats_api::quantity::bytes(&text).map_err(|why| format!("{field}: {text:?}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(spec: Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.nats.mikluko.io/v1beta1",
            "kind": "NatsCluster",
            "metadata": {"name": "demo", "namespace": "nats"},
            "spec": spec,
        }))
        .expect("a NatsCluster")
    }

    fn fitted(spec: Value) -> Result<Value, String> {
        let mut obj = cluster(spec);
        Fit::node("docker.io/library/nats", "sha256:ab").nats_cluster(&mut obj)?;
        Ok(obj.data["spec"].clone())
    }

    #[test]
    fn story_01s_cluster_fits_the_node() {
        let spec = fitted(serde_json::json!({
            "version": "2.15.0",
            "image": {"repository": "docker.io/library/nats", "digest": "sha256:5b2c"},
            "replicas": 3,
            "resources": {"requests": {"cpu": "500m", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
            "jetstream": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "20Gi"}}}}},
        }))
        .expect("fits");
        assert_eq!(
            spec,
            serde_json::json!({
                "version": "2.15.0",
                "image": {"repository": "docker.io/library/nats", "digest": "sha256:ab"},
                "replicas": 3,
                "exporter": {"enabled": false},
                "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}},
                "jetstream": {"volumeClaimTemplate": {"spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "4Gi"}}}}},
            })
        );
    }

    #[rstest::rstest]
    #[case::the_default_version("2.15.0", "sha256:ab")]
    #[case::another_imported_version("2.15.1", "sha256:cd")]
    #[case::a_version_not_imported("2.16.0", "sha256:ab")]
    fn each_version_runs_its_own_image(#[case] version: &str, #[case] digest: &str) {
        let mut obj = cluster(serde_json::json!({"version": version}));
        Fit::node("docker.io/library/nats", "sha256:ab")
            .with_version("2.15.1", "sha256:cd")
            .nats_cluster(&mut obj)
            .expect("fits");
        assert_eq!(obj.data["spec"]["image"]["digest"], digest);
    }

    #[rstest::rstest]
    #[case::eight_gi("8Gi", "1Gi")]
    #[case::decimal("4G", "500000000")]
    #[case::small("512Mi", "64Mi")]
    fn memory_is_divided(#[case] memory: &str, #[case] want: &str) {
        let spec =
            fitted(serde_json::json!({"resources": {"limits": {"memory": memory}}})).expect("fits");
        assert_eq!(spec["resources"]["limits"]["memory"], want);
    }

    #[rstest::rstest]
    #[case::millis("500m", "100m")]
    #[case::cores("2", "100m")]
    #[case::under("50m", "50m")]
    #[case::fraction("0.05", "50m")]
    fn cpu_requests_are_capped(#[case] cpu: &str, #[case] want: &str) {
        let spec =
            fitted(serde_json::json!({"resources": {"requests": {"cpu": cpu}}})).expect("fits");
        assert_eq!(spec["resources"]["requests"]["cpu"], want);
    }

    #[test]
    fn the_stores_keep_their_share_of_the_limit_and_the_volume() {
        // rollout-faults' raised memory store: 3584Mi of a 4Gi limit, 7/8 of it on either scale.
        let spec = fitted(serde_json::json!({
            "resources": {"limits": {"memory": "4Gi"}},
            "jetstream": {
                "limits": {"maxMemoryStore": "3584Mi", "maxFileStore": "20Gi"},
                "volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "20Gi"}}}},
            },
        }))
        .expect("fits");
        assert_eq!(spec["resources"]["limits"]["memory"], "512Mi");
        assert_eq!(spec["jetstream"]["limits"]["maxMemoryStore"], "448Mi");
        assert_eq!(spec["jetstream"]["limits"]["maxFileStore"], "4Gi");
    }

    #[test]
    fn a_smaller_volume_and_the_exporters_other_fields_stay() {
        let spec = fitted(serde_json::json!({
            "exporter": {"enabled": true, "port": 7777},
            "jetstream": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "512Mi"}}}}},
        }))
        .expect("fits");
        assert_eq!(
            spec["exporter"],
            serde_json::json!({"enabled": false, "port": 7777})
        );
        assert_eq!(
            spec["jetstream"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"],
            "512Mi"
        );
    }

    #[test]
    fn the_volume_takes_the_nodes_one_class() {
        let spec = fitted(serde_json::json!({
            "jetstream": {"volumeClaimTemplate": {
                "metadata": {"labels": {"app.kubernetes.io/part-of": "nats-prod-east"}},
                "spec": {"storageClassName": "fast-ssd", "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "100Gi"}}}}},
        }))
        .expect("fits");
        assert_eq!(
            spec["jetstream"]["volumeClaimTemplate"],
            serde_json::json!({
                "metadata": {"labels": {"app.kubernetes.io/part-of": "nats-prod-east"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "4Gi"}}},
            })
        );
    }

    #[rstest::rstest]
    #[case::memory(serde_json::json!({"resources": {"limits": {"memory": "lots"}}}), "spec.resources.limits.memory")]
    #[case::cpu(serde_json::json!({"resources": {"requests": {"cpu": "fast"}}}), "spec.resources.requests.cpu")]
    #[case::storage(serde_json::json!({"jetstream": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": true}}}}}}), "storage")]
    fn a_bad_quantity_names_its_field(#[case] spec: Value, #[case] field: &str) {
        let err = fitted(spec).expect_err("refused");
        assert!(err.contains(field), "{err}");
    }

    #[test]
    fn other_kinds_are_applied_as_written() {
        let mut obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "spec": {"resources": {"limits": {"memory": "4Gi"}}},
        }))
        .expect("an object");
        let before = obj.data.clone();
        Fit::node("r", "d").nats_cluster(&mut obj).expect("fits");
        assert_eq!(obj.data, before);
    }
}
