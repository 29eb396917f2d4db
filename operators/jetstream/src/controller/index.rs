//! The index of the stream-backed objects (NatsStream, NatsKeyValue, NatsObjectStore) the
//! balancer and evacuation passes read their owners from, instead of listing the three kinds
//! across every watched namespace on every pass (a LIST each, per pass, per balancer; the
//! evacuation's every second while it moves).
//!
//! It is served from the reflector stores the three kinds' own Controllers keep anyway (each
//! registers its store here when it starts, [`Index::register`]): a pass costs the apiserver
//! nothing for it. A stream group names its owner by the UID in its ownership marker, and a
//! pass asks for the owners of the groups its JSZ (or STREAM.LIST) view places on its NATS
//! cluster ([`Index::owners_of`], [`groups_on`]): the index answers per NATS cluster from the
//! view, since only the servers know where a stream is.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use nats_api::jetstream::{NatsKeyValue, NatsObjectStore, NatsStream, Placement};

use crate::evacuation_rules::Owner;
use crate::system_view::SystemView;

/// How long a pass waits for a store's first list before it stops, saying so (only right after
/// the controller starts).
pub const FILL_WAIT: Duration = Duration::from_secs(5);

/// One indexed object: what the balancers (pools, pins) and evacuation (pins) read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Indexed {
    /// The owner as the evacuation reads it (kind, namespace, name, UID, placement.cluster).
    pub owner: Owner,
    /// Its labels (the balancers' pools select by them).
    pub labels: BTreeMap<String, String>,
}

/// The three stores, each set once by its Controller.
#[derive(Default)]
pub struct Index {
    streams: OnceLock<Store<NatsStream>>,
    key_values: OnceLock<Store<NatsKeyValue>>,
    object_stores: OnceLock<Store<NatsObjectStore>>,
}

/// The index is not filled yet: a store whose Controller has not started, or whose first list
/// has not finished within [`FILL_WAIT`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "the controller's index of {0} objects is not filled yet (its watch has not listed them); \
     the pass is retried"
)]
pub struct NotFilled(pub &'static str);

/// A kind with a `spec.placement`.
trait Placed: kube::Resource<DynamicType = ()> {
    const KIND: &'static str;
    fn placement(&self) -> Option<&Placement>;
}

impl Placed for NatsStream {
    const KIND: &'static str = "NatsStream";
    fn placement(&self) -> Option<&Placement> {
        self.spec.placement.as_ref()
    }
}

impl Placed for NatsKeyValue {
    const KIND: &'static str = "NatsKeyValue";
    fn placement(&self) -> Option<&Placement> {
        self.spec.placement.as_ref()
    }
}

impl Placed for NatsObjectStore {
    const KIND: &'static str = "NatsObjectStore";
    fn placement(&self) -> Option<&Placement> {
        self.spec.placement.as_ref()
    }
}

fn indexed<K: Placed>(r: &K) -> Indexed {
    Indexed {
        owner: Owner {
            kind: K::KIND.to_string(),
            namespace: r.namespace().unwrap_or_default(),
            name: r.name_any(),
            uid: r.uid().unwrap_or_default(),
            placement_cluster: r
                .placement()
                .and_then(|p| p.cluster.clone())
                .filter(|c| !c.is_empty()),
        },
        labels: r.labels().clone(),
    }
}

/// The store of `slot`, once set and filled (waiting at most [`FILL_WAIT`]).
async fn filled<K>(slot: &OnceLock<Store<K>>, kind: &'static str) -> Result<Store<K>, NotFilled>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let store = slot.get().cloned().ok_or(NotFilled(kind))?;
    match tokio::time::timeout(FILL_WAIT, store.wait_until_ready()).await {
        Ok(Ok(())) => Ok(store),
        _ => Err(NotFilled(kind)),
    }
}

/// The objects of `store` whose UID is in `uids`.
fn matching<K: Placed + Clone>(store: &Store<K>, uids: &BTreeSet<&str>) -> Vec<Indexed> {
    store
        .state()
        .iter()
        .filter(|r| r.meta().uid.as_deref().is_some_and(|u| uids.contains(u)))
        .map(|r| indexed(&**r))
        .collect()
}

impl Index {
    /// Keeps `store` as the index of its kind (one of the three; any other is ignored). Called
    /// by each stream-backed kind's Controller as it starts; a second call changes nothing.
    pub fn register<K>(&self, store: Store<K>)
    where
        K: kube::Resource<DynamicType = ()> + Clone + 'static,
    {
        let any: &dyn Any = &store;
        if let Some(s) = any.downcast_ref::<Store<NatsStream>>() {
            let _ = self.streams.set(s.clone());
        } else if let Some(s) = any.downcast_ref::<Store<NatsKeyValue>>() {
            let _ = self.key_values.set(s.clone());
        } else if let Some(s) = any.downcast_ref::<Store<NatsObjectStore>>() {
            let _ = self.object_stores.set(s.clone());
        }
    }

    /// The NatsStream `ns/name` as the store holds it (none before the store is set).
    pub fn stream(&self, ns: &str, name: &str) -> Option<std::sync::Arc<NatsStream>> {
        let key = kube::runtime::reflector::ObjectRef::new(name).within(ns);
        self.streams.get()?.get(&key)
    }

    /// The indexed objects owning one of `uids` (the ownership markers of the groups a pass
    /// judges), from memory.
    pub async fn owners_of<'a>(
        &self,
        uids: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<Indexed>, NotFilled> {
        let uids: BTreeSet<&str> = uids.into_iter().filter(|u| !u.is_empty()).collect();
        let streams = filled(&self.streams, "NatsStream").await?;
        let key_values = filled(&self.key_values, "NatsKeyValue").await?;
        let object_stores = filled(&self.object_stores, "NatsObjectStore").await?;
        let mut out = matching(&streams, &uids);
        out.extend(matching(&key_values, &uids));
        out.extend(matching(&object_stores, &uids));
        Ok(out)
    }
}

/// The owner UIDs of the stream groups (not consumers) `view` places on NATS cluster
/// `cluster`, or on any cluster when `cluster` is `None`: the key a pass looks the index up by.
pub fn groups_on<'a>(view: &'a SystemView, cluster: Option<&'a str>) -> BTreeSet<&'a str> {
    view.groups
        .iter()
        .filter(|g| g.consumer.is_none() && cluster.is_none_or(|c| g.cluster == c))
        .filter_map(|g| g.owner.as_deref())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system_view::GroupSeen;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    fn stream(ns: &str, name: &str, uid: &str, cluster: Option<&str>) -> NatsStream {
        let mut s: NatsStream = serde_json::from_value(serde_json::json!({
            "apiVersion": "jetstream.nats.mikluko.io/v1beta1",
            "kind": "NatsStream",
            "metadata": {"namespace": ns, "name": name, "uid": uid, "labels": {"tier": "hot"}},
            "spec": {"connectionRef": {"name": "c"}, "subjects": ["x"]},
        }))
        .unwrap_or_else(|e| panic!("a stream: {e}"));
        if let Some(c) = cluster {
            s.spec.placement = Some(Placement {
                cluster: Some(c.into()),
                ..Default::default()
            });
        }
        s
    }

    fn group(owner: &str, cluster: &str, consumer: Option<&str>) -> GroupSeen {
        GroupSeen {
            owner: Some(owner.into()),
            cluster: cluster.into(),
            consumer: consumer.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn a_pass_looks_up_the_owners_of_the_groups_on_its_nats_cluster() {
        let view = SystemView {
            groups: vec![
                group("u1", "east", None),
                group("u2", "west", None),
                // A consumer's group names its stream's owner too; it adds nothing.
                group("u3", "east", Some("c")),
            ],
            ..Default::default()
        };
        assert_eq!(
            groups_on(&view, Some("east")),
            BTreeSet::from(["u1"]),
            "east's stream groups"
        );
        assert_eq!(groups_on(&view, None), BTreeSet::from(["u1", "u2"]));
    }

    #[tokio::test]
    async fn the_index_answers_from_the_store_without_the_apiserver() {
        let index = Index::default();
        let (streams, mut w) = reflector::store::<NatsStream>();
        let (kvs, mut wk) = reflector::store::<NatsKeyValue>();
        let (objs, mut wo) = reflector::store::<NatsObjectStore>();
        // Not registered: not filled.
        assert_eq!(index.owners_of(["u1"]).await, Err(NotFilled("NatsStream")));
        index.register(streams);
        index.register(kvs);
        index.register(objs);
        for e in [
            Event::Init,
            Event::InitApply(stream("a", "orders", "u1", None)),
            Event::InitApply(stream("b", "pinned", "u2", Some("east"))),
            Event::InitDone,
        ] {
            w.apply_watcher_event(&e);
        }
        wk.apply_watcher_event(&Event::Init);
        wk.apply_watcher_event(&Event::InitDone);
        wo.apply_watcher_event(&Event::Init);
        wo.apply_watcher_event(&Event::InitDone);
        let found = index.owners_of(["u2", "nobody"]).await.unwrap_or_default();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].owner.name, "pinned");
        assert_eq!(found[0].owner.placement_cluster.as_deref(), Some("east"));
        assert_eq!(found[0].labels.get("tier").map(String::as_str), Some("hot"));
    }
}
