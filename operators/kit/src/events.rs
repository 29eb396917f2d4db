//! Kubernetes Events about a resource, published under the controller's name.
//!
//! Repeats of one Event (same object, type, reason and note) within a few minutes become one
//! Event with a growing `series.count`, as client-go's correlator does. kube's own Recorder
//! keys repeats without the note, so "restarting demo-2" and then "restarting demo-0" would
//! read as the first twice; these keep every distinct note.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::Mutex;

/// How long a published Event takes repeats into its series.
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// What makes two Events the same Event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    kind: String,
    name: String,
    uid: String,
    warning: bool,
    reason: String,
    note: String,
}

#[derive(Clone, Debug)]
struct Published {
    /// The Event object's name.
    name: String,
    count: i32,
    at: Instant,
}

/// Publishes Events for one controller.
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    controller: String,
    instance: String,
    published: Arc<Mutex<HashMap<Key, Published>>>,
}

impl Events {
    /// A publisher reporting as `controller`.
    pub fn new(client: kube::Client, controller: &str) -> Self {
        Self {
            client,
            controller: controller.to_string(),
            instance: std::env::var("POD_NAME").unwrap_or_else(|_| controller.to_string()),
            published: Arc::default(),
        }
    }

    /// Publishes one Event about `obj`. A failure is logged, never returned: an Event is a
    /// courtesy and must not fail a reconcile.
    pub async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        warning: bool,
        reason: &str,
        note: String,
    ) {
        let regarding = obj.object_ref(&());
        if let Err(e) = self.publish_ref(regarding, warning, reason, note).await {
            tracing::warn!(reason, error = %e, "publishing an Event failed");
        }
    }

    /// Counts one more of the Event `p` in its series; false when it is gone (expired or
    /// deleted), so it is published anew.
    async fn repeat(
        &self,
        api: &Api<Event>,
        key: &Key,
        p: Published,
        now: k8s_openapi::jiff::Timestamp,
    ) -> Result<bool, kube::Error> {
        let series = EventSeries {
            count: p.count + 1,
            last_observed_time: MicroTime(now),
        };
        let patch = serde_json::json!({ "series": series });
        match api
            .patch(&p.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.published.lock().await.insert(
                    key.clone(),
                    Published {
                        name: p.name,
                        count: p.count + 1,
                        at: Instant::now(),
                    },
                );
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn publish_ref(
        &self,
        regarding: ObjectReference,
        warning: bool,
        reason: &str,
        note: String,
    ) -> Result<(), kube::Error> {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let key = Key {
            namespace: namespace.clone(),
            kind: regarding.kind.clone().unwrap_or_default(),
            name: regarding.name.clone().unwrap_or_default(),
            uid: regarding.uid.clone().unwrap_or_default(),
            warning,
            reason: reason.to_string(),
            note: note.clone(),
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let now = k8s_openapi::jiff::Timestamp::now();
        // The lock is not held across a request: reconciles publish concurrently.
        let earlier = {
            let mut published = self.published.lock().await;
            published.retain(|_, p| p.at.elapsed() < SERIES_WINDOW);
            published.get(&key).cloned()
        };
        if let Some(p) = earlier
            && self.repeat(&api, &key, p, now).await?
        {
            return Ok(());
        }
        let name = format!("{}.{:x}", key.name.clone(), now.as_nanosecond());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace),
                ..Default::default()
            },
            action: Some("Reconcile".into()),
            reason: Some(reason.to_string()),
            note: Some(note),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(if warning { "Warning" } else { "Normal" }.into()),
            ..Default::default()
        };
        api.create(&PostParams::default(), &event).await?;
        self.published.lock().await.insert(
            key,
            Published {
                name,
                count: 1,
                at: Instant::now(),
            },
        );
        Ok(())
    }
}
