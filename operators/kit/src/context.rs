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
use crate::echoes::Echoes;
use crate::events::Events;
use crate::metrics::Metrics;
use crate::object::describe;
use crate::scope::Scope;

/// The longest a held deletion waits before looking again ([`Shared::deletion_wait`]).
pub const DELETION_RECHECK_CAP: Duration = Duration::from_secs(30);

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
    /// The versions passes worked from, whose watch events are their echoes ([`crate::echoes`]).
    pub echoes: Echoes,
    /// The field manager status (and Events) are written as.
    pub field_manager: &'static str,
    /// The namespaces watched and the bound on concurrent passes ([`crate::scope`]).
    pub scope: Scope,
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
            echoes: Echoes::default(),
            field_manager,
            scope: Scope::default(),
        }
    }

    /// The same, confined to `scope`.
    pub fn scoped(self, scope: Scope) -> Self {
        Self { scope, ..self }
    }

    /// The wait before looking again at `obj`, which waits on something outside it (a server not
    /// reachable, a reference not there): doubles per consecutive such pass, kept apart from the
    /// error backoff.
    pub fn retry_later<K: Resource<DynamicType = ()>>(&self, obj: &K) -> Duration {
        self.backoff.failed(&waiting_key(obj))
    }

    /// The wait before a deletion held by something outside its object (a revocation not yet
    /// on every server, connections being kicked, servers not answering) looks again: the
    /// object's [`Shared::retry_later`] backoff (1 s, doubling), at most
    /// [`DELETION_RECHECK_CAP`]. A change of what it waits on wakes it sooner, as ever; once the
    /// deletion is done, [`Shared::settled`] forgets the object.
    pub fn deletion_wait<K: Resource<DynamicType = ()>>(&self, obj: &K) -> Duration {
        self.retry_later(obj).min(DELETION_RECHECK_CAP)
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[tokio::test]
    async fn a_held_deletion_backs_off_per_object_up_to_the_cap() {
        // A client that is never asked anything: the waits are memory only.
        let url = "http://127.0.0.1:9".parse().expect("a url");
        let client = kube::Client::try_from(kube::Config::new(url)).expect("a client");
        let shared = Shared::new(client, Metrics::default(), "test");
        let mut a = ConfigMap::default();
        a.metadata.namespace = Some("ns".into());
        a.metadata.name = Some("a".into());
        let mut b = a.clone();
        b.metadata.name = Some("b".into());
        let waits: Vec<u64> = (0..7).map(|_| shared.deletion_wait(&a).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(shared.deletion_wait(&b).as_secs(), 1, "each object its own");
        shared.settled(&a);
        assert_eq!(shared.deletion_wait(&a).as_secs(), 1, "forgotten once done");
    }
}
