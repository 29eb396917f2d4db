//! The API tier: a real kube-apiserver 1.20 with the CRDs installed and the auth controller
//! running in-process against it; story manifests applied as a user would (server-side apply).

#![allow(dead_code)] // each test binary uses part of the rig

use std::time::Duration;

use auth_controller::controller::{self, Settings};
use controller_kit::metrics::Metrics;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde::Deserialize as _;
use serde_json::Value;
use sim::apiserver::ApiServer;

pub const WAIT: Duration = Duration::from_secs(60);

/// The controller running in-process; aborted when the test ends, pass or fail.
pub struct Controllers(tokio::task::JoinHandle<()>);

impl Drop for Controllers {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub struct Rig {
    // Field order is drop order: the controller stops before the apiserver.
    pub controllers: Option<Controllers>,
    pub api: ApiServer,
    /// The running controller's metrics registry.
    pub metrics: Metrics,
}

impl Rig {
    /// An apiserver with the CRDs and `namespaces`, and no controller yet.
    pub async fn bare(namespaces: &[&str]) -> Rig {
        let api = ApiServer::kube_1_20()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        api.install_crds(&nats_api::crds::all())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for ns in namespaces {
            api.create_namespace(ns)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        Rig {
            controllers: None,
            api,
            metrics: Metrics::default(),
        }
    }

    /// Starts the controller with `settings` (resync 2 s unless set).
    pub fn start_controller(&mut self, settings: Settings) {
        self.metrics = Metrics::default();
        let ctx = controller::context(self.api.client(), settings, self.metrics.clone());
        self.controllers = Some(Controllers(tokio::spawn(controller::run(ctx))));
    }

    /// An apiserver with the controller running without a system connection.
    pub async fn start(namespaces: &[&str]) -> Rig {
        let mut rig = Rig::bare(namespaces).await;
        rig.start_controller(Settings {
            resync: Duration::from_secs(2),
            system_connection: None,
        });
        rig
    }

    pub fn client(&self) -> kube::Client {
        self.api.client()
    }

    pub fn api<K>(&self, ns: &str) -> Api<K>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        Api::namespaced(self.client(), ns)
    }

    /// Applies every document of docs/stories/`story`/`file` except the kinds in `skip`.
    pub async fn apply_story(&self, story: &str, file: &str, skip: &[&str]) {
        for doc in story_docs(story, file) {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            if skip.contains(&kind.as_str()) {
                continue;
            }
            self.apply(doc).await;
        }
    }

    /// Server-side applies one object as a user would.
    pub async fn apply(&self, doc: Value) {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let (group, version) = match doc["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .split_once('/')
        {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (
                String::new(),
                doc["apiVersion"].as_str().unwrap_or_default().to_string(),
            ),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, &kind);
        let (ar, caps) = kube::discovery::pinned_kind(&self.client(), &gvk)
            .await
            .unwrap_or_else(|e| panic!("discovering {kind}: {e}"));
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
            Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(self.client(), ns, &ar)
            }
            _ => Api::all_with(self.client(), &ar),
        };
        api.patch(
            &name,
            &PatchParams::apply("story-test").force(),
            &Patch::Apply(&doc),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
    }

    pub async fn secret(&self, ns: &str, name: &str) -> Option<Secret> {
        self.api::<Secret>(ns)
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading Secret {ns}/{name}: {e}"))
    }
}

/// The documents of docs/stories/`story`/`file`, as JSON.
pub fn story_docs(story: &str, file: &str) -> Vec<Value> {
    let path = format!(
        "{}/../../docs/stories/{story}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).expect("YAML"))
        .map(|v| serde_json::to_value(v).expect("JSON"))
        .filter(|v| v.is_object())
        .collect()
}

/// (status, reason) of condition `type_`.
pub fn condition(obj: &Value, type_: &str) -> Option<(String, String)> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
}

pub fn message(obj: &Value, type_: &str) -> String {
    obj.pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string()
}

pub fn is(obj: &Value, type_: &str, status: &str, reason: &str) -> bool {
    condition(obj, type_) == Some((status.into(), reason.into()))
}

/// Polls `ns`/`name` of `K` until `check` accepts it; returns it as JSON.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let check = &check;
    sim::wait::poll(what, WAIT, || async move {
        let obj = api.get_opt(name).await.map_err(|e| e.to_string())?;
        let Some(obj) = obj else {
            return Err(format!("{name} does not exist"));
        };
        let v = serde_json::to_value(&obj).map_err(|e| e.to_string())?;
        if check(&v) {
            Ok(Some(v))
        } else {
            Err(format!("status: {}", v["status"]))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Waits for Ready with `reason` and `status`.
pub async fn wait_ready<K>(api: &Api<K>, name: &str, status: &str, reason: &str) -> Value
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    wait_for(api, name, &format!("{name} Ready {status} {reason}"), |o| {
        is(o, "Ready", status, reason)
    })
    .await
}

/// The string at `pointer`.
pub fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(|s| s.as_str())
        .unwrap_or_default()
}

/// Waits until `name` of `K` is gone.
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    sim::wait::poll(&format!("{name} gone"), WAIT, || async {
        match api.get_opt(name).await.map_err(|e| e.to_string())? {
            None => Ok(Some(())),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Waits for an Event of `reason` about `kind` `ns`/`name`; returns its note.
pub async fn wait_event(rig: &Rig, ns: &str, kind: &str, name: &str, reason: &str) -> String {
    let events = rig.api::<k8s_openapi::api::events::v1::Event>(ns);
    sim::wait::poll(
        &format!("a {reason} Event about {kind} {name}"),
        WAIT,
        || async {
            let list = events
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let found = list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                    })
            });
            match found {
                Some(e) => Ok(Some(e.note.unwrap_or_default())),
                None => Err("none yet".to_string()),
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}
