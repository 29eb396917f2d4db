//! Kubernetes Events about a resource, published under the controller's name.

use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Publishes Events for one controller.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// A publisher reporting as `controller`.
    pub fn new(client: kube::Client, controller: &str) -> Self {
        let reporter = Reporter {
            controller: controller.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client, reporter),
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
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            tracing::warn!(reason, error = %e, "publishing an Event failed");
        }
    }
}
