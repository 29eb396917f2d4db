//! `--watch-namespaces`: the namespaces a controller watches, lists and reads in (every one when
//! the list is empty), and the watches that keep to them.
//!
//! Confined, a controller opens one watch per namespace and kind (`Api::namespaced`), which
//! the chart's per-namespace Roles allow; it never lists across the cluster, and never reads an
//! object in a namespace outside the list (a reference into one reads as not admitted, its
//! object as absent). Nothing cluster-scoped is asked for: the one object outside the watched
//! namespaces a binary touches is its Lease, in the release namespace (a Role there).
//!
//! # One store over several namespaces
//!
//! A controller and the auth index keep one store per kind, fed by one writer. A watch's events
//! say `Init`, `InitApply`…, `InitDone` for each list: the writer buffers a list and swaps it in
//! whole at `InitDone`, replacing the store. Several namespaces' watches merged as they come
//! would break that (one namespace's `InitDone` would swap in its list alone, dropping every
//! other namespace's objects), so [`Namespaces::watch`] rewrites the merged events into the
//! events of one watch over all of them:
//!
//! - the first lists: one `Init`, every namespace's objects as `InitApply` (an object changed
//!   meanwhile in a namespace already listed as well), and one `InitDone` once every namespace
//!   has listed; then a `Delete` for each object deleted meanwhile. A store is thus ready, and
//!   the auth index's `listed` signal set, only once every namespace is in it (a store with only
//!   some namespaces listed would read as "no grant", "no user" for the others);
//! - a later relist of one namespace (its watch fell behind): each listed object as an `Apply`,
//!   then a `Delete` for each object of that namespace the store holds and the list did not
//!   name. The store moves forward object by object instead of by a swap, each copy newer than
//!   the one it replaces, and every change still comes as an event (the index wakes on each).
//!
//! With every namespace watched this is one `Api::all` watch, passed through unchanged.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Debug;

use futures::stream::{self, BoxStream};
use futures::{Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use kube::ResourceExt;
use kube::api::Api;
use kube::core::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_of};
use serde::de::DeserializeOwned;

/// The reconciles a controller runs at once when `--concurrency` is not given.
pub const DEFAULT_CONCURRENCY: u16 = 32;

/// Where a controller works and how many passes it runs at once: `--watch-namespaces` and
/// `--concurrency`, the same for every controller of a binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The namespaces watched.
    pub namespaces: Namespaces,
    /// At most this many passes of one controller run at once (kube's `Config::concurrency`;
    /// one object never has two).
    pub concurrency: u16,
}

impl Default for Scope {
    fn default() -> Self {
        Self {
            namespaces: Namespaces::All,
            concurrency: DEFAULT_CONCURRENCY,
        }
    }
}

impl Scope {
    /// The Controller config of every controller: the bound on its concurrent passes.
    pub fn config(&self) -> kube::runtime::controller::Config {
        kube::runtime::controller::Config::default().concurrency(self.concurrency)
    }
}

/// The namespaces a controller works in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Namespaces {
    /// Every namespace (cluster-wide watches).
    #[default]
    All,
    /// Only these (sorted, without repeats, never empty).
    Only(BTreeSet<String>),
}

impl Namespaces {
    /// `--watch-namespaces`: a comma-separated list of namespace names; empty, every namespace.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut names = BTreeSet::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if !is_namespace_name(part) {
                return Err(format!(
                    "--watch-namespaces {text}: {part:?} is not a namespace name \
                     (lowercase letters, digits and '-', at most 63)"
                ));
            }
            names.insert(part.to_string());
        }
        Ok(if names.is_empty() {
            Self::All
        } else {
            Self::Only(names)
        })
    }

    /// Whether objects in `namespace` are read, written and watched.
    pub fn watches(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(names) => names.contains(namespace),
        }
    }

    /// One Api per namespace watched (one over every namespace when all are).
    pub fn apis<K>(&self, client: &kube::Client) -> Vec<Api<K>>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    {
        match self {
            Self::All => vec![Api::all(client.clone())],
            Self::Only(names) => names
                .iter()
                .map(|n| Api::namespaced(client.clone(), n))
                .collect(),
        }
    }

    /// The objects every watch of `K` touched (applied or deleted), merged: for
    /// `Controller::watches_stream` and `owns_stream`. `K` may be a `PartialObjectMeta`, whose
    /// watches carry metadata alone.
    pub fn touched<K>(
        &self,
        client: &kube::Client,
        config: watcher::Config,
    ) -> BoxStream<'static, Result<K, watcher::Error>>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + 'static,
    {
        let each = self
            .apis::<K>(client)
            .into_iter()
            .map(|api| watch_of(api, config.clone()).touched_objects().boxed());
        stream::select_all(each).boxed()
    }

    /// The events of one watch of `K` over every namespace watched, each namespace's events
    /// passed through `each` first, for one reflector writing `store` (see the module doc).
    pub fn watch<K>(
        &self,
        client: &kube::Client,
        config: watcher::Config,
        store: Store<K>,
        each: impl Fn(&mut K) + Clone + Send + Sync + 'static,
    ) -> BoxStream<'static, watcher::Result<Event<K>>>
    where
        K: crate::watched::Watched,
    {
        match self {
            Self::All => watch_of(Api::<K>::all(client.clone()), config)
                .modify(each)
                .boxed(),
            Self::Only(names) => {
                let tagged = names.iter().enumerate().map(|(i, n)| {
                    watch_of(Api::<K>::namespaced(client.clone(), n), config.clone())
                        .modify(each.clone())
                        .map(move |e| (i, e))
                        .boxed()
                });
                let merge = Merge::new(names.iter().cloned().collect(), store);
                merged(stream::select_all(tagged), merge).boxed()
            }
        }
    }
}

/// Whether `name` is a namespace name (an RFC 1123 label).
fn is_namespace_name(name: &str) -> bool {
    name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// What [`Merge::step`] hands on: an event, or the `Delete`s of what a list left out, worked out
/// only once every event before it is in the store.
enum Out<K> {
    Event(watcher::Result<Event<K>>),
    /// The objects of this namespace (every namespace: `None`) the store holds and its last
    /// list did not name.
    LeftOut(Option<usize>),
}

/// The rewrite of several namespaces' watch events into one watch's (see the module doc).
struct Merge<K: Resource<DynamicType = ()> + 'static> {
    namespaces: Vec<String>,
    /// What the reflector holds (read at the end of a list for what the list left out).
    store: Store<K>,
    /// Whether the one `Init` went out.
    opened: bool,
    /// Whether each namespace has had its first list.
    listed: Vec<bool>,
    /// Whether each namespace is listing now.
    listing: Vec<bool>,
    /// Whether every namespace has: the one `InitDone` went out.
    ready: bool,
    /// The objects each namespace's list named and has not seen deleted since (until every
    /// first list is in: every object applied since its first list began).
    present: Vec<HashSet<ObjectRef<K>>>,
}

impl<K> Merge<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn new(namespaces: Vec<String>, store: Store<K>) -> Self {
        let n = namespaces.len();
        Self {
            namespaces,
            store,
            opened: false,
            listed: vec![false; n],
            listing: vec![false; n],
            ready: false,
            present: (0..n).map(|_| HashSet::new()).collect(),
        }
    }

    /// What to hand on for event `event` of namespace number `i`.
    fn step(&mut self, i: usize, event: watcher::Result<Event<K>>) -> Vec<Out<K>> {
        let event = match event {
            Ok(e) => e,
            Err(e) => return vec![Out::Event(Err(e))],
        };
        let tracked = !self.ready || self.listing[i];
        match event {
            Event::Init => {
                self.present[i].clear();
                self.listing[i] = true;
                if self.opened {
                    return vec![];
                }
                self.opened = true;
                vec![Out::Event(Ok(Event::Init))]
            }
            Event::InitApply(o) | Event::Apply(o) => {
                if tracked {
                    self.present[i].insert(ObjectRef::from_obj(&o));
                }
                let e = if self.ready {
                    Event::Apply(o)
                } else {
                    Event::InitApply(o)
                };
                vec![Out::Event(Ok(e))]
            }
            Event::Delete(o) => {
                if tracked {
                    self.present[i].remove(&ObjectRef::from_obj(&o));
                }
                if self.ready {
                    vec![Out::Event(Ok(Event::Delete(o)))]
                } else {
                    // In the store from the end of the first lists, then deleted.
                    vec![]
                }
            }
            Event::InitDone => {
                self.listing[i] = false;
                self.listed[i] = true;
                if self.ready {
                    return vec![Out::LeftOut(Some(i))];
                }
                if !self.listed.iter().all(|l| *l) {
                    return vec![];
                }
                self.ready = true;
                vec![Out::Event(Ok(Event::InitDone)), Out::LeftOut(None)]
            }
        }
    }

    /// The `Delete`s of what the store holds in namespace number `only` (every namespace:
    /// `None`) that its list left out; forgets what the lists named.
    fn left_out(&mut self, only: Option<usize>) -> Vec<watcher::Result<Event<K>>> {
        let gone = self
            .store
            .state()
            .into_iter()
            .filter(|o| {
                let ns = o.namespace().unwrap_or_default();
                let Some(j) = self.namespaces.iter().position(|n| *n == ns) else {
                    return false;
                };
                only.is_none_or(|i| i == j) && !self.present[j].contains(&ObjectRef::from_obj(&**o))
            })
            .map(|o| Ok(Event::Delete((*o).clone())))
            .collect();
        for (j, p) in self.present.iter_mut().enumerate() {
            if only.is_none_or(|i| i == j) {
                *p = HashSet::new();
            }
        }
        gone
    }
}

/// Runs `merge` over `events`: each event handed on once the one before it is applied, so a
/// [`Out::LeftOut`] reads a store holding everything before it.
fn merged<K>(
    events: impl Stream<Item = (usize, watcher::Result<Event<K>>)> + Send + Unpin + 'static,
    merge: Merge<K>,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let state = (events, merge, std::collections::VecDeque::<Out<K>>::new());
    stream::unfold(state, |(mut events, mut merge, mut pending)| async move {
        loop {
            match pending.pop_front() {
                Some(Out::Event(e)) => return Some((e, (events, merge, pending))),
                Some(Out::LeftOut(only)) => {
                    let gone = merge.left_out(only);
                    pending.extend(gone.into_iter().map(Out::Event));
                }
                None => {
                    let (i, e) = events.next().await?;
                    pending.extend(merge.step(i, e));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;
    use rstest::rstest;

    #[rstest]
    #[case::empty("", Ok(Namespaces::All))]
    #[case::blanks(" , ", Ok(Namespaces::All))]
    #[case::two_sorted_once("b,a, b", Ok(Namespaces::Only(["a".into(), "b".into()].into())))]
    #[case::upper("Apps", Err(()))]
    #[case::slash("a/b", Err(()))]
    #[case::leading_dash("-a", Err(()))]
    fn watch_namespaces_is_a_list_of_names(
        #[case] text: &str,
        #[case] want: Result<Namespaces, ()>,
    ) {
        assert_eq!(Namespaces::parse(text).map_err(|_| ()), want, "{text:?}");
    }

    #[test]
    fn only_the_listed_namespaces_are_watched() {
        let only = Namespaces::parse("a,b").expect("names");
        assert!(only.watches("a") && only.watches("b"));
        assert!(!only.watches("c"));
        assert!(Namespaces::All.watches("c"));
    }

    fn cm(ns: &str, name: &str, v: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.namespace = Some(ns.into());
        c.metadata.name = Some(name.into());
        c.data = Some([("v".to_string(), v.to_string())].into());
        c
    }

    /// What an event says, for comparing: its kind and the object's `ns/name=v`.
    fn said(e: &watcher::Result<Event<ConfigMap>>) -> String {
        let o = |c: &ConfigMap| {
            format!(
                "{}/{}={}",
                c.namespace().unwrap_or_default(),
                c.name_any(),
                c.data
                    .as_ref()
                    .and_then(|d| d.get("v"))
                    .cloned()
                    .unwrap_or_default()
            )
        };
        match e {
            Ok(Event::Init) => "Init".into(),
            Ok(Event::InitApply(c)) => format!("InitApply {}", o(c)),
            Ok(Event::InitDone) => "InitDone".into(),
            Ok(Event::Apply(c)) => format!("Apply {}", o(c)),
            Ok(Event::Delete(c)) => format!("Delete {}", o(c)),
            Err(e) => format!("Err {e}"),
        }
    }

    fn held(store: &Store<ConfigMap>) -> Vec<String> {
        let mut v: Vec<String> = store
            .state()
            .iter()
            .map(|c| said(&Ok(Event::Apply((**c).clone()))).replace("Apply ", ""))
            .collect();
        v.sort();
        v
    }

    /// The real rewrite, fed event by event, its output applied to a store as a reflector does.
    struct Rig {
        tx: futures::channel::mpsc::UnboundedSender<(usize, watcher::Result<Event<ConfigMap>>)>,
        out: BoxStream<'static, watcher::Result<Event<ConfigMap>>>,
        writer: reflector::store::Writer<ConfigMap>,
        store: Store<ConfigMap>,
    }

    impl Rig {
        /// Namespace 0 is `a`, 1 is `b`.
        fn new() -> Self {
            let (store, writer) = reflector::store::<ConfigMap>();
            let (tx, rx) = futures::channel::mpsc::unbounded();
            let merge = Merge::new(vec!["a".into(), "b".into()], store.clone());
            Self {
                tx,
                out: merged(rx, merge).boxed(),
                writer,
                store,
            }
        }

        /// Sends `events`; returns what came out, once nothing more does.
        fn feed(&mut self, events: Vec<(usize, Event<ConfigMap>)>) -> Vec<String> {
            for (i, e) in events {
                self.tx.unbounded_send((i, Ok(e))).expect("open");
            }
            let mut out = vec![];
            while let Some(Some(e)) = self.out.next().now_or_never() {
                self.writer
                    .apply_watcher_event(e.as_ref().expect("no errors"));
                out.push(said(&e));
            }
            out
        }
    }

    #[test]
    fn several_namespaces_read_as_one_watch_to_one_store() {
        let mut rig = Rig::new();
        // The first lists, interleaved, with changes in `a` while `b` still lists.
        let out = rig.feed(vec![
            (0, Event::Init),
            (1, Event::Init),
            (0, Event::InitApply(cm("a", "x", "1"))),
            (0, Event::InitApply(cm("a", "gone", "1"))),
            (0, Event::InitDone),
            (1, Event::InitApply(cm("b", "y", "1"))),
            (0, Event::Apply(cm("a", "z", "1"))),
            (0, Event::Delete(cm("a", "gone", "1"))),
            (0, Event::Apply(cm("a", "x", "2"))),
        ]);
        assert_eq!(
            out,
            [
                "Init",
                "InitApply a/x=1",
                "InitApply a/gone=1",
                "InitApply b/y=1",
                "InitApply a/z=1",
                "InitApply a/x=2",
            ]
        );
        assert!(
            rig.store.wait_until_ready().now_or_never().is_none(),
            "not ready while b lists"
        );
        assert!(held(&rig.store).is_empty(), "nothing swapped in yet");

        // b's list ends: one InitDone, then what was deleted meanwhile.
        let out = rig.feed(vec![(1, Event::InitDone)]);
        assert_eq!(out, ["InitDone", "Delete a/gone=1"]);
        assert!(
            rig.store.wait_until_ready().now_or_never().is_some(),
            "ready"
        );
        assert_eq!(held(&rig.store), ["a/x=2", "a/z=1", "b/y=1"]);

        // a relists (its watch fell behind): applies, then deletes of what it left out; b's
        // objects stay.
        let out = rig.feed(vec![
            (0, Event::Init),
            (0, Event::InitApply(cm("a", "x", "3"))),
            (1, Event::Apply(cm("b", "y", "2"))),
            (0, Event::InitDone),
        ]);
        assert_eq!(out, ["Apply a/x=3", "Apply b/y=2", "Delete a/z=1"]);
        assert_eq!(held(&rig.store), ["a/x=3", "b/y=2"]);
    }
}
