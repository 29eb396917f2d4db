//! The parts of a controller's Context every controller has: the client, the metrics, the Event
//! publisher, the per-object backoff and the due times, with the field manager it writes as.
//! A controller's Context holds a [`Shared`] beside its own parts and gives it to the kit
//! through [`HasShared`]; nothing is global.

use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::Resource;
use kube::{Api, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::backoff::Backoff;
use crate::due::Due;
use crate::events::Events;
use crate::metrics::Metrics;
use crate::object::describe;

/// What every reconcile of every controller shares.
pub struct Shared {
    /// The Kubernetes client.
    pub client: kube::Client,
    /// The metrics registry.
    pub metrics: Metrics,
    /// The Event publisher.
    pub events: Events,
    /// Consecutive failures per object (and per object waiting, see [`Shared::retry_later`]).
    pub backoff: Backoff,
    /// When each object is next due (see [`crate::due`]).
    pub due: Due,
    /// The field manager status (and Events) are written as.
    pub field_manager: &'static str,
}

/// A controller's Context: the kit's skeleton reads the shared parts through it.
pub trait HasShared: Send + Sync + 'static {
    /// The shared parts.
    fn shared(&self) -> &Shared;
}

impl Shared {
    /// The shared parts of a controller writing as `field_manager`, with fresh state.
    pub fn new(client: kube::Client, metrics: Metrics, field_manager: &'static str) -> Self {
        Self {
            events: Events::new(client.clone(), field_manager),
            client,
            metrics,
            backoff: Backoff::default(),
            due: Due::default(),
            field_manager,
        }
    }

    /// The wait before looking again at `obj`, which waits on something outside it (a server not
    /// reachable, a reference not there): doubles per consecutive such pass, kept apart from the
    /// error backoff.
    pub fn retry_later<K: Resource<DynamicType = ()>>(&self, obj: &K) -> Duration {
        self.backoff.failed(&waiting_key(obj))
    }

    /// Resets [`Shared::retry_later`] after a pass that no longer waits.
    pub fn settled<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        self.backoff.succeeded(&waiting_key(obj));
    }

    /// Applies `status` to `obj`'s status subresource as the field manager (server-side apply;
    /// a field left out is removed) and sets the condition gauge from its `conditions`.
    pub async fn write_status<K, S>(&self, obj: &K, status: &S) -> Result<K, kube::Error>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        S: Serialize,
    {
        let ns = obj.namespace().unwrap_or_default();
        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        let written =
            crate::status::apply(&api, &obj.name_any(), self.field_manager, status).await?;
        let conditions: Vec<Condition> = serde_json::to_value(status)
            .ok()
            .and_then(|v| v.get("conditions").cloned())
            .and_then(|c| serde_json::from_value(c).ok())
            .unwrap_or_default();
        self.metrics
            .set_conditions(&K::kind(&()), &ns, &obj.name_any(), &conditions);
        Ok(written)
    }
}

fn waiting_key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!("{} (waiting)", describe(obj))
}
