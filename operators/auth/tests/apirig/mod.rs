//! The API tier: a real kube-apiserver 1.20 with the CRDs installed and the auth controller
//! running in-process against it; story manifests applied as a user would (server-side apply).

#![allow(dead_code)] // each test binary uses part of the rig

use std::time::Duration;

use auth_controller::controller::{self, Settings};
use controller_kit::metrics::Metrics;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::Value;
use sim::apiserver::ApiServer;
use sim::testkit::AbortOnDrop;
use sim::testkit::{ApiObject, WAIT, is, wait_for};

pub struct Rig {
    // Field order is drop order: the controller stops before the apiserver.
    pub controllers: Option<AbortOnDrop>,
    pub api: ApiServer,
    /// The running controller's metrics registry.
    pub metrics: Metrics,
}

impl Rig {
    /// An apiserver with the CRDs and `namespaces`, and no controller yet.
    pub async fn bare(namespaces: &[&str]) -> Rig {
        let api = sim::testkit::apiserver_with_crds(namespaces).await;
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
        self.controllers = Some(AbortOnDrop::spawn(controller::run(ctx)));
    }

    /// An apiserver with the controller running without a system connection.
    pub async fn start(namespaces: &[&str]) -> Rig {
        let mut rig = Rig::bare(namespaces).await;
        rig.start_controller(Settings {
            resync: Duration::from_secs(2),
            system_connection: None,
            ..Default::default()
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
        for doc in sim::testkit::story_docs(format!("docs/stories/{story}/{file}")) {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            if skip.contains(&kind.as_str()) {
                continue;
            }
            self.apply(doc).await;
        }
    }

    /// Server-side applies one object as a user would.
    pub async fn apply(&self, doc: Value) {
        sim::testkit::apply(&self.client(), &doc)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    pub async fn secret(&self, ns: &str, name: &str) -> Option<Secret> {
        self.api::<Secret>(ns)
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading Secret {ns}/{name}: {e}"))
    }
}

/// Waits for Ready with `reason` and `status`.
pub async fn wait_ready<K: ApiObject>(
    api: &Api<K>,
    name: &str,
    status: &str,
    reason: &str,
) -> Value {
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
