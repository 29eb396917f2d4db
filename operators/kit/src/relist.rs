//! Objects a relist dropped are reconciled again; objects that are gone are not.
//!
//! When a watch falls too far behind (410 Gone) kube's watcher lists every object again. Each
//! listed object triggers a reconcile at once, but the store the reconciler reads is swapped in
//! only when the whole list is in; a trigger run before that, for an object the store has never
//! held (one created while the watch was failing), finds nothing and is dropped
//! (`ObjectNotFound`). Nothing triggers it again: it does not change, and it has never been
//! reconciled, so it has no requeue either. Seen with 1,000 NatsStreams applied at once on a
//! loaded machine: half of them were never reconciled.
//!
//! A trigger is also dropped for an object deleted while a wake of it was on its way: a requeue
//! a pass asked for before another pass (the revocation lane's) released its finalizer, a wake
//! naming it sent just before its deletion. That one must not be redriven. Redriving every
//! object on any drop did: each NatsUser deleted in `just bench` reconciled the other 1,000
//! again two seconds later (issue 40's extra passes).
//!
//! So a dropped trigger is looked at again [`AGAIN_AFTER`] later, and again at that interval
//! for up to [`GIVE_UP_AFTER`]: once the store holds its object (the relist's list is in), that
//! object is reconciled; one still absent by then was deleted, and is forgotten.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use kube::runtime::controller::Error as RunError;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::time::Instant;

use crate::watched::Watched;

/// How long after a dropped trigger the store is looked at for its object: long enough for the
/// relist that dropped it to have put its objects in the store, usually.
pub const AGAIN_AFTER: Duration = Duration::from_secs(2);

/// How long a dropped trigger's object is waited for in the store before it counts as deleted:
/// a relist of thousands of objects on a loaded machine has its list in well before (a forgotten
/// deleted object costs a look every [`AGAIN_AFTER`] until then, nothing more).
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(120);

/// Whether one item of `Controller::run` is a trigger dropped because its object was not in the
/// store.
pub fn dropped<T, R, Q>(result: &Result<T, RunError<R, Q>>) -> bool {
    matches!(result, Err(RunError::ObjectNotFound(_)))
}

/// The object of a dropped trigger, as a reference to `K`.
fn dropped_ref<K: Watched, T, R, Q>(result: &Result<T, RunError<R, Q>>) -> Option<ObjectRef<K>> {
    let Err(RunError::ObjectNotFound(obj)) = result else {
        return None;
    };
    let r = ObjectRef::<K>::new(&obj.name);
    Some(match &obj.namespace {
        Some(ns) => r.within(ns),
        None => r,
    })
}

/// The dropped triggers still waited for, each with when it was first dropped, and whether a
/// task is looking at them.
struct Waiting<K: Watched> {
    since: HashMap<ObjectRef<K>, Instant>,
    looking: bool,
}

/// Reconciles again the objects of dropped triggers once the store holds them; hand the paired
/// stream to `Controller::reconcile_on`.
pub struct Redrive<K: Watched> {
    tx: tokio::sync::mpsc::UnboundedSender<ObjectRef<K>>,
    store: Store<K>,
    waiting: Arc<Mutex<Waiting<K>>>,
    kind: String,
}

impl<K: Watched> Clone for Redrive<K> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            store: self.store.clone(),
            waiting: self.waiting.clone(),
            kind: self.kind.clone(),
        }
    }
}

/// A [`Redrive`] for the controller of `kind` reading `store`, and the stream of the objects it
/// asks that controller to reconcile.
pub fn redrive<K: Watched>(
    kind: &str,
    store: Store<K>,
) -> (
    Redrive<K>,
    impl Stream<Item = ObjectRef<K>> + Send + 'static,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let again =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    let waiting = Waiting {
        since: HashMap::new(),
        looking: false,
    };
    (
        Redrive {
            tx,
            store,
            waiting: Arc::new(Mutex::new(waiting)),
            kind: kind.to_string(),
        },
        again,
    )
}

impl<K: Watched> Redrive<K> {
    /// Notes one item of `Controller::run`: a dropped trigger's object is waited for in the
    /// store ([`Redrive::look`]).
    pub fn note<T, R, Q>(&self, result: &Result<T, RunError<R, Q>>) {
        let Some(r) = dropped_ref::<K, T, R, Q>(result) else {
            return;
        };
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        waiting.since.entry(r).or_insert_with(Instant::now);
        if std::mem::replace(&mut waiting.looking, true) {
            return;
        }
        drop(waiting);
        let this = self.clone();
        tokio::spawn(async move { this.look().await });
    }

    /// Every [`AGAIN_AFTER`] while any dropped trigger is waited for: the objects the store now
    /// holds are reconciled, those waited for [`GIVE_UP_AFTER`] forgotten (deleted).
    async fn look(self) {
        loop {
            tokio::time::sleep(AGAIN_AFTER).await;
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            let (found, gone) = self.sort(&mut waiting.since);
            if found > 0 {
                tracing::info!(
                    controller = self.kind,
                    objects = found,
                    "triggers dropped while the watch relisted; reconciling their objects again"
                );
            }
            if gone > 0 {
                tracing::debug!(
                    controller = self.kind,
                    objects = gone,
                    "dropped triggers of objects deleted since"
                );
            }
            if waiting.since.is_empty() {
                waiting.looking = false;
                return;
            }
        }
    }

    /// Sends the objects of `since` the store holds, forgets those waited for too long; returns
    /// how many of each.
    fn sort(&self, since: &mut HashMap<ObjectRef<K>, Instant>) -> (usize, usize) {
        let (mut found, mut gone) = (0, 0);
        since.retain(|r, at| {
            if self.store.get(r).is_some() {
                found += 1;
                let _ = self.tx.send(r.clone());
                false
            } else if at.elapsed() >= GIVE_UP_AFTER {
                gone += 1;
                false
            } else {
                true
            }
        });
        (found, gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tests::Item;
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;

    fn cm(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("t".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn dropped_trigger(name: &str) -> Item {
        let r = ObjectRef::from_obj(&cm(name)).erase();
        Err(RunError::ObjectNotFound(Box::new(r)))
    }

    fn put(writer: &mut Writer<ConfigMap>, name: &str) {
        writer.apply_watcher_event(&watcher::Event::Apply(cm(name)));
    }

    #[test]
    fn only_a_trigger_for_an_object_missing_from_the_store_is_dropped() {
        let cases: Vec<(&str, Item, bool)> = vec![
            ("a pass that ended well", Ok(()), false),
            (
                "a failed pass (its error policy requeues it)",
                Err(RunError::ReconcilerFailed(
                    std::io::Error::other("x"),
                    crate::trace::tests::obj(),
                )),
                false,
            ),
            (
                "a trigger for an object the store does not hold",
                dropped_trigger("a"),
                true,
            ),
            (
                "a failed watch (the watcher relists by itself)",
                Err(RunError::QueueError(watcher::Error::NoResourceVersion)),
                false,
            ),
        ];
        for (what, item, want) in cases {
            assert_eq!(dropped(&item), want, "{what}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_object_the_relist_puts_in_the_store_is_reconciled_once() {
        let (store, mut writer) = kube::runtime::reflector::store::<ConfigMap>();
        let (redrive, again) = redrive("ConfigMap", store);
        let mut again = Box::pin(again);
        for _ in 0..50 {
            redrive.note(&dropped_trigger("a"));
        }
        redrive.note(&Item::Ok(()));
        put(&mut writer, "a");
        let first = again.next().await.map(|r| r.name);
        assert_eq!(first.as_deref(), Some("a"));
        let more = tokio::time::timeout(GIVE_UP_AFTER * 2, again.next()).await;
        assert!(more.is_err(), "the drops of one object ask once");
        // A later drop asks again.
        redrive.note(&dropped_trigger("a"));
        assert_eq!(again.next().await.map(|r| r.name).as_deref(), Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_object_deleted_meanwhile_is_not_reconciled_nor_anything_else() {
        let (store, mut writer) = kube::runtime::reflector::store::<ConfigMap>();
        put(&mut writer, "other");
        let (redrive, again) = redrive("ConfigMap", store);
        let mut again = Box::pin(again);
        redrive.note(&dropped_trigger("deleted"));
        let asked = tokio::time::timeout(GIVE_UP_AFTER * 2, again.next()).await;
        assert!(
            asked.is_err(),
            "nothing reconciled for a deleted object: {asked:?}"
        );
        assert!(
            redrive
                .waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .since
                .is_empty(),
            "forgotten after {GIVE_UP_AFTER:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_relist_slower_than_the_first_look_still_has_its_objects_reconciled() {
        let (store, mut writer) = kube::runtime::reflector::store::<ConfigMap>();
        let (redrive, again) = redrive("ConfigMap", store);
        let mut again = Box::pin(again);
        redrive.note(&dropped_trigger("late"));
        redrive.note(&dropped_trigger("gone"));
        tokio::time::sleep(AGAIN_AFTER * 4).await;
        put(&mut writer, "late");
        let got = again.next().await.map(|r| r.name);
        assert_eq!(got.as_deref(), Some("late"));
        let more = tokio::time::timeout(GIVE_UP_AFTER * 2, again.next()).await;
        assert!(more.is_err(), "the deleted one is not asked for: {more:?}");
    }
}
