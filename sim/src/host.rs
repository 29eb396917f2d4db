//! The local backend's control plane (ARCHITECTURE §3): a real kube-apiserver with the CRDs
//! installed, and the controllers running in-process as tokio tasks against it — the JetStream
//! controller and the cluster controller on the local server lifecycle, so a NatsCluster applied
//! here becomes nats-server processes on 127.0.0.1.
//!
//! Scenario steps reach the controllers through a [`Host`]: apply a manifest (server-side apply
//! of every document), annotate an object, wait for a condition, restart a controller (its task
//! aborted and started again from nothing, as a pod restart would).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::local::LocalLifecycle;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Discovery, Scope};
use kube::{Api, Client};
use serde::Deserialize;
use tokio::task::JoinHandle;

use crate::apiserver::{ApiServer, ApiServerError, Flavor};
use crate::elected::Replicas;

/// The field manager the sim applies manifests as (a user's `kubectl apply --server-side`).
pub const FIELD_MANAGER: &str = "sim";
/// The namespace an object reference without one names.
pub const DEFAULT_NAMESPACE: &str = "nats";
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    ApiServer(#[from] ApiServerError),
    #[error("creating the servers' directory: {0}")]
    Dir(#[source] std::io::Error),
    #[error("reading manifest {path}: {source}")]
    ReadManifest {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("manifest {path}, document {index}: {message}")]
    BadDocument {
        path: PathBuf,
        index: usize,
        message: String,
    },
    #[error("no kind {kind} is served (apiVersion {api_version})")]
    UnknownKind { kind: String, api_version: String },
    #[error("discovery: {0}")]
    Discovery(#[source] kube::Error),
    #[error("applying {object}: {source}")]
    Apply {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("object reference {0:?} is not Kind/name or Kind/namespace/name")]
    BadReference(String),
    #[error("annotation {0:?} is not key=value (or key- to remove it)")]
    BadAnnotation(String),
    #[error("annotating {object}: {source}")]
    Annotate {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("{object} has no condition {condition} within {waited:?} (last: {last})")]
    ConditionTimeout {
        object: String,
        condition: String,
        waited: Duration,
        last: String,
    },
    #[error("no controller named {0} (known: auth, cluster, jetstream)")]
    UnknownController(String),
    #[error("controller {0} does not run as replicas under leader election (scenario `replicas:`)")]
    NotElected(String),
    #[error("no replica of controller {0} leads")]
    NoLeader(String),
    #[error("{action} {object}: {source}")]
    Object {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
}

mod factories;
pub use factories::{ControllerFactory, auth_controller_with_system_connection, controllers};

struct Running {
    factory: ControllerFactory,
    task: JoinHandle<()>,
    restarts: u32,
}

/// A kube-apiserver, the local server lifecycle, and the controllers running against them.
pub struct Host {
    // Field order is drop order: the controllers stop first, then the servers they started,
    // then the apiserver, then the directory.
    running: Mutex<BTreeMap<String, Running>>,
    /// The controllers run as replicas under leader election ([`Host::elect`]).
    elected: Mutex<BTreeMap<String, Replicas>>,
    /// Starts exited servers again, as a kubelet would.
    supervisor: JoinHandle<()>,
    lifecycle: LocalLifecycle,
    api: ApiServer,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("api", &self.api)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let running = std::mem::take(&mut *self.lock());
        for (_, r) in running {
            r.task.abort();
        }
        self.supervisor.abort();
        // An aborted task drops its share of the lifecycle only when the runtime next polls it;
        // the processes must not wait for that.
        self.lifecycle.kill_all();
    }
}

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

impl Host {
    /// Starts kube-apiserver 1.20, installs every CRD, creates `namespaces`, and runs the
    /// named controllers (see [`controllers`]).
    pub async fn start(namespaces: &[&str], run: &[&str]) -> Result<Self, HostError> {
        Self::start_in(&std::env::temp_dir(), namespaces, run).await
    }

    /// [`Host::start`] with the apiserver's directory and the servers' under `parent` (both go
    /// when the host is dropped).
    pub async fn start_in(
        parent: &Path,
        namespaces: &[&str],
        run: &[&str],
    ) -> Result<Self, HostError> {
        let api = ApiServer::start_in(Flavor::Kube120, parent).await?;
        api.install_crds(&nats_api::crds::all()).await?;
        for ns in namespaces {
            api.create_namespace(ns).await?;
        }
        let dir = tempfile::Builder::new()
            .prefix("sim-host-")
            .tempdir_in(parent)
            .map_err(HostError::Dir)?;
        let lifecycle = LocalLifecycle::new(
            dir.path().join("servers"),
            Arc::new(|v: &str| crate::install::nats_server(v).map_err(|e| e.to_string())),
        );
        let host = Host {
            running: Mutex::new(BTreeMap::new()),
            elected: Mutex::new(BTreeMap::new()),
            supervisor: lifecycle.supervise(),
            lifecycle,
            api,
            dir,
        };
        let known = controllers();
        for name in run {
            let factory = known
                .get(name)
                .cloned()
                .ok_or_else(|| HostError::UnknownController((*name).into()))?;
            host.spawn(name, factory);
        }
        Ok(host)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawn(&self, name: &str, factory: ControllerFactory) {
        let task = tokio::spawn(factory(self.api.client(), self.lifecycle.clone()));
        self.lock().insert(
            name.into(),
            Running {
                factory,
                task,
                restarts: 0,
            },
        );
    }

    /// Runs another controller (e.g. one a test brings itself).
    pub fn add_controller(&self, name: &str, factory: ControllerFactory) {
        self.spawn(name, factory);
    }

    pub fn client(&self) -> Client {
        self.api.client()
    }
    pub fn api(&self) -> &ApiServer {
        &self.api
    }
    pub fn lifecycle(&self) -> &LocalLifecycle {
        &self.lifecycle
    }
    /// The names of the controllers running.
    pub fn controller_names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }
    /// Whether a controller's task is still running (a controller never ends on its own).
    pub fn controller_running(&self, name: &str) -> bool {
        self.lock().get(name).is_some_and(|r| !r.task.is_finished())
    }
    /// How often a controller was restarted.
    pub fn controller_restarts(&self, name: &str) -> Option<u32> {
        self.lock().get(name).map(|r| r.restarts)
    }

    fn elected(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Replicas>> {
        self.elected.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs controller `name` as `count` replicas under leader election instead of one task
    /// (see [`crate::elected`]).
    pub async fn elect(&self, name: &str, count: u32) -> Result<(), HostError> {
        let old = self
            .lock()
            .remove(name)
            .ok_or_else(|| HostError::UnknownController(name.into()))?;
        old.task.abort();
        let _ = old.task.await;
        let replicas = Replicas::start(
            name,
            old.factory,
            self.api.client(),
            self.lifecycle.clone(),
            count,
        );
        self.elected().insert(name.into(), replicas);
        Ok(())
    }

    /// The identity of the replica of controller `name` that leads now.
    pub fn leader_of(&self, name: &str) -> Option<String> {
        self.elected().get(name)?.leader().map(String::from)
    }

    /// Kills the leading replica of controller `name` (no release: a SIGKILL) and starts a
    /// fresh standby in its place; returns the killed identity.
    pub fn kill_leader(&self, name: &str) -> Result<String, HostError> {
        let mut elected = self.elected();
        let replicas = elected
            .get_mut(name)
            .ok_or_else(|| HostError::NotElected(name.into()))?;
        replicas
            .kill_leader()
            .ok_or_else(|| HostError::NoLeader(name.into()))
    }

    /// Aborts a controller's task, waits for it to end, and starts it again from nothing.
    pub async fn restart_controller(&self, name: &str) -> Result<(), HostError> {
        let old = self
            .lock()
            .remove(name)
            .ok_or_else(|| HostError::UnknownController(name.into()))?;
        old.task.abort();
        // Cancelled is the expected end; a panic would have ended it earlier and is logged.
        if let Err(e) = old.task.await
            && !e.is_cancelled()
        {
            tracing::warn!(controller = name, error = %e, "controller task had failed");
        }
        let task = tokio::spawn((old.factory)(self.api.client(), self.lifecycle.clone()));
        self.lock().insert(
            name.into(),
            Running {
                factory: old.factory,
                task,
                restarts: old.restarts + 1,
            },
        );
        Ok(())
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
            let obj: DynamicObject =
                serde_yaml::from_value(value).map_err(|e| bad(e.to_string()))?;
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
