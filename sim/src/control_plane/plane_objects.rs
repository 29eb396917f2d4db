//! The objects of a control plane, whatever runs its controllers: every document of a manifest
//! server-side applied (a user's `kubectl apply --server-side`), objects read, deleted,
//! annotated, their status wiped, their conditions waited for. All it needs is a client; the
//! local host and the node's both are one ([`Objects`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Discovery, Scope};
use kube::{Api, Client};
use serde::Deserialize;

use super::{DEFAULT_NAMESPACE, FIELD_MANAGER, HostError, POLL};
use crate::node::fit::Fit;

/// An object named by a scenario: `Kind/name` (namespace [`DEFAULT_NAMESPACE`]) or
/// `Kind/namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn parse(text: &str) -> Result<Self, HostError> {
        let parts: Vec<&str> = text.split('/').collect();
        let (kind, namespace, name) = match parts.as_slice() {
            [k, n] => (*k, DEFAULT_NAMESPACE, *n),
            [k, ns, n] => (*k, *ns, *n),
            _ => return Err(HostError::BadReference(text.into())),
        };
        if kind.is_empty() || namespace.is_empty() || name.is_empty() {
            return Err(HostError::BadReference(text.into()));
        }
        Ok(Self {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        })
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// `Type` (status True) or `Type=Status`.
/// `Type`, `Type=Status` or `Type=Status/Reason` as (type, status, reason to match if any).
pub fn parse_condition(text: &str) -> (String, String, Option<String>) {
    let (type_, rest) = match text.split_once('=') {
        Some((t, s)) => (t.trim(), s.trim()),
        None => (text.trim(), "True"),
    };
    let (status, reason) = match rest.split_once('/') {
        Some((s, r)) => (s.trim(), Some(r.trim().to_string())),
        None => (rest, None),
    };
    (type_.into(), status.into(), reason)
}

/// The status of condition `type_` of an object, with its reason and message.
pub fn condition_of(obj: &serde_json::Value, type_: &str) -> Option<(String, String, String)> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("status"), s("reason"), s("message"))
        })
}

/// The generation condition `type_` was written for, when it says.
fn condition_generation(obj: &serde_json::Value, type_: &str) -> Option<i64> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?
        .get("observedGeneration")?
        .as_i64()
}

/// Replaces every `${name}` of `vars` in a manifest's text: how a scenario points a manifest at
/// servers whose ports are only known at run time.
pub fn substitute(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = text.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("${{{k}}}"), v);
    }
    out
}

/// The objects of one apiserver, through its admin client.
#[derive(Clone)]
pub struct Objects {
    client: Client,
    /// How a NatsCluster is fitted to the machine before it is applied (the node's), if at all.
    fit: Option<Fit>,
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects")
            .field("fit", &self.fit)
            .finish_non_exhaustive()
    }
}

impl Objects {
    /// The objects `client` reaches, applied as written.
    pub fn new(client: Client) -> Self {
        Self { client, fit: None }
    }

    /// The objects `client` reaches, every NatsCluster fitted by `fit` as it is applied.
    pub fn fitted(client: Client, fit: Fit) -> Self {
        Self {
            client,
            fit: Some(fit),
        }
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    async fn resource_of(
        &self,
        gvk: &GroupVersionKind,
    ) -> Result<(ApiResource, ApiCapabilities), HostError> {
        kube::discovery::pinned_kind(&self.client(), gvk)
            .await
            .map_err(|_| HostError::UnknownKind {
                kind: gvk.kind.clone(),
                api_version: gvk.api_version(),
            })
    }

    /// The resource serving `kind` (any group), found by discovery.
    async fn resource_of_kind(
        &self,
        kind: &str,
    ) -> Result<(ApiResource, ApiCapabilities), HostError> {
        let discovery = Discovery::new(self.client())
            .run()
            .await
            .map_err(HostError::Discovery)?;
        for group in discovery.groups() {
            for (ar, caps) in group.recommended_resources() {
                if ar.kind == kind {
                    return Ok((ar, caps));
                }
            }
        }
        Err(HostError::UnknownKind {
            kind: kind.into(),
            api_version: "any".into(),
        })
    }

    fn dynamic(&self, ar: &ApiResource, caps: &ApiCapabilities, ns: &str) -> Api<DynamicObject> {
        match caps.scope {
            Scope::Cluster => Api::all_with(self.client(), ar),
            Scope::Namespaced => Api::namespaced_with(self.client(), ns, ar),
        }
    }

    /// Server-side applies every document of a manifest file (after [`substitute`]); returns
    /// the objects applied as `Kind/namespace/name`.
    pub async fn apply_manifest(
        &self,
        path: &Path,
        vars: &BTreeMap<String, String>,
    ) -> Result<Vec<String>, HostError> {
        let text = std::fs::read_to_string(path).map_err(|source| HostError::ReadManifest {
            path: path.to_path_buf(),
            source,
        })?;
        self.apply_text(path, &substitute(&text, vars)).await
    }

    /// Server-side applies every document of `text` (`origin` names it in errors).
    pub async fn apply_text(&self, origin: &Path, text: &str) -> Result<Vec<String>, HostError> {
        let mut applied = Vec::new();
        for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let bad = |message: String| HostError::BadDocument {
                path: origin.to_path_buf(),
                index,
                message,
            };
            let value = serde_yaml::Value::deserialize(doc).map_err(|e| bad(e.to_string()))?;
            if value.is_null() {
                continue;
            }
            let mut obj: DynamicObject =
                serde_yaml::from_value(value).map_err(|e| bad(e.to_string()))?;
            if let Some(fit) = &self.fit {
                fit.nats_cluster(&mut obj).map_err(bad)?;
            }
            let types = obj
                .types
                .clone()
                .ok_or_else(|| bad("no apiVersion/kind".into()))?;
            let gvk = GroupVersionKind::try_from(&types).map_err(|e| bad(e.to_string()))?;
            let (ar, caps) = self.resource_of(&gvk).await?;
            let name = obj
                .metadata
                .name
                .clone()
                .ok_or_else(|| bad("no metadata.name".into()))?;
            let ns = obj
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let object = format!("{}/{ns}/{name}", gvk.kind);
            self.dynamic(&ar, &caps, &ns)
                .patch(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&obj),
                )
                .await
                .map_err(|source| HostError::Apply {
                    object: object.clone(),
                    source,
                })?;
            applied.push(object);
        }
        Ok(applied)
    }

    /// Reads an object as JSON.
    pub async fn get(&self, object: &ObjectRef) -> Result<serde_json::Value, HostError> {
        let (ar, caps) = self.resource_of_kind(&object.kind).await?;
        let got = self
            .dynamic(&ar, &caps, &object.namespace)
            .get(&object.name)
            .await
            .map_err(|source| HostError::Apply {
                object: object.to_string(),
                source,
            })?;
        serde_json::to_value(got).map_err(|e| HostError::Apply {
            object: object.to_string(),
            source: kube::Error::SerdeError(e),
        })
    }

    /// The API of an object's kind, in its namespace.
    async fn api_of(&self, object: &ObjectRef) -> Result<Api<DynamicObject>, HostError> {
        let (ar, caps) = self.resource_of_kind(&object.kind).await?;
        Ok(self.dynamic(&ar, &caps, &object.namespace))
    }

    /// Deletes an object; returns once the apiserver accepted the delete (finalizers may still
    /// hold the object).
    pub async fn delete(&self, object: &ObjectRef) -> Result<(), HostError> {
        self.api_of(object)
            .await?
            .delete(&object.name, &DeleteParams::default())
            .await
            .map_err(|source| HostError::Object {
                action: "deleting",
                object: object.to_string(),
                source,
            })?;
        Ok(())
    }

    /// Whether the object exists (a deleted object held by a finalizer still does).
    pub async fn exists(&self, object: &ObjectRef) -> Result<bool, HostError> {
        let got = self
            .api_of(object)
            .await?
            .get_opt(&object.name)
            .await
            .map_err(|source| HostError::Object {
                action: "reading",
                object: object.to_string(),
                source,
            })?;
        Ok(got.is_some())
    }

    /// Replaces the object's status with `{}` through the status subresource, as a status lost
    /// (a backup restored without it, an apiserver migration) would leave it. A write racing a
    /// controller's is tried again on the fresh object.
    pub async fn wipe_status(&self, object: &ObjectRef) -> Result<(), HostError> {
        let api = self.api_of(object).await?;
        let failed = |source| HostError::Object {
            action: "wiping the status of",
            object: object.to_string(),
            source,
        };
        let mut attempts = 0;
        loop {
            let mut got = api.get(&object.name).await.map_err(failed)?;
            got.data["status"] = serde_json::json!({});
            match api
                .replace_status(&object.name, &PostParams::default(), &got)
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 && attempts < 5 => attempts += 1,
                Err(e) => return Err(failed(e)),
            }
        }
    }

    /// The text under `key` of Secret `namespace/name`, if the Secret and the key exist.
    pub async fn secret_text(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<String>, HostError> {
        use k8s_openapi::api::core::v1::Secret;
        let got = Api::<Secret>::namespaced(self.client(), namespace)
            .get_opt(name)
            .await
            .map_err(|source| HostError::Object {
                action: "reading",
                object: format!("Secret/{namespace}/{name}"),
                source,
            })?;
        Ok(got.and_then(|s| s.data).and_then(|d| {
            d.get(key)
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        }))
    }

    /// Sets (`key=value`) or removes (`key-`) an annotation, as `kubectl annotate` does.
    pub async fn annotate(&self, object: &ObjectRef, annotation: &str) -> Result<(), HostError> {
        let value = match annotation.split_once('=') {
            Some((k, v)) if !k.is_empty() => serde_json::json!({ k: v }),
            _ => match annotation.strip_suffix('-') {
                Some(k) if !k.is_empty() => serde_json::json!({ k: null }),
                _ => return Err(HostError::BadAnnotation(annotation.into())),
            },
        };
        let (ar, caps) = self.resource_of_kind(&object.kind).await?;
        self.dynamic(&ar, &caps, &object.namespace)
            .patch(
                &object.name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "metadata": { "annotations": value } })),
            )
            .await
            .map_err(|source| HostError::Annotate {
                object: object.to_string(),
                source,
            })?;
        Ok(())
    }

    /// Waits until the object's condition `condition` (`Type`, `Type=Status` or
    /// `Type=Status/Reason`) holds for the object's current generation (when the condition
    /// carries `observedGeneration`).
    pub async fn wait_condition(
        &self,
        object: &ObjectRef,
        condition: &str,
        timeout: Duration,
    ) -> Result<serde_json::Value, HostError> {
        self.wait_condition_saying(object, condition, None, timeout)
            .await
    }

    /// [`Host::wait_condition`], and the condition's message contains `message` when given.
    pub async fn wait_condition_saying(
        &self,
        object: &ObjectRef,
        condition: &str,
        message: Option<&str>,
        timeout: Duration,
    ) -> Result<serde_json::Value, HostError> {
        let (type_, want, want_reason) = parse_condition(condition);
        let deadline = tokio::time::Instant::now() + timeout;
        let (ar, caps) = self.resource_of_kind(&object.kind).await?;
        let api = self.dynamic(&ar, &caps, &object.namespace);
        loop {
            let last = match api.get_opt(&object.name).await {
                Ok(Some(got)) => {
                    let v = serde_json::to_value(&got).unwrap_or_default();
                    // A condition written for an older generation says nothing of the spec now.
                    let generation = v.pointer("/metadata/generation").and_then(|g| g.as_i64());
                    let observed = condition_generation(&v, &type_);
                    let current = match (generation, observed) {
                        (Some(g), Some(o)) => o >= g,
                        _ => true,
                    };
                    match condition_of(&v, &type_) {
                        Some((s, r, m))
                            if s == want
                                && current
                                && want_reason.as_ref().is_none_or(|w| *w == r)
                                && message.is_none_or(|w| m.contains(w)) =>
                        {
                            return Ok(v);
                        }
                        Some((s, r, m)) => format!(
                            "{type_}={s} {r}: {m} (observedGeneration {observed:?} of {generation:?})"
                        ),
                        None => format!("no {type_} condition"),
                    }
                }
                Ok(None) => "not found".into(),
                Err(e) => e.to_string(),
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(HostError::ConditionTimeout {
                    object: object.to_string(),
                    condition: condition.into(),
                    waited: timeout,
                    last,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
