//! Objects a relist dropped are reconciled again.
//!
//! When a watch falls too far behind (410 Gone) kube's watcher lists every object again. Each
//! listed object triggers a reconcile at once, but the store the reconciler reads is swapped in
//! only when the whole list is in; a trigger run before that, for an object the store has never
//! held (one created while the watch was failing), finds nothing and is dropped
//! (`ObjectNotFound`). Nothing triggers it again: it does not change, and it has never been
//! reconciled, so it has no requeue either. Seen with 1,000 NatsStreams applied at once on a
//! loaded machine: half of them were never reconciled. A dropped trigger therefore asks, a
//! moment later, for every object in the store to be reconciled again, by then holding it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::Stream;
use kube::runtime::controller::Error as RunError;

/// How long after a dropped trigger every object is reconciled again: long enough for the
/// relist that dropped it to have put its objects in the store (a later drop asks again).
pub const AGAIN_AFTER: Duration = Duration::from_secs(2);

/// Whether one item of `Controller::run` is a trigger dropped because its object was not in the
/// store.
pub fn dropped<T, R, Q>(result: &Result<T, RunError<R, Q>>) -> bool {
    matches!(result, Err(RunError::ObjectNotFound(_)))
}

/// Asks for every object to be reconciled again after a dropped trigger; hand the paired
/// stream to `Controller::reconcile_all_on`.
#[derive(Clone)]
pub struct Redrive {
    tx: tokio::sync::mpsc::Sender<()>,
    armed: Arc<AtomicBool>,
    kind: String,
}

/// A [`Redrive`] for the controller of `kind` and the stream its controller reconciles all on.
pub fn redrive(kind: &str) -> (Redrive, impl Stream<Item = ()> + Send + 'static) {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let again = futures::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|()| ((), rx)) },
    );
    (
        Redrive {
            tx,
            armed: Arc::new(AtomicBool::new(false)),
            kind: kind.to_string(),
        },
        again,
    )
}

impl Redrive {
    /// Notes one item of `Controller::run`: a dropped trigger arms one reconcile of every object
    /// [`AGAIN_AFTER`] from now (the drops of one relist share it).
    pub fn note<T, R, Q>(&self, result: &Result<T, RunError<R, Q>>) {
        if !dropped(result) || self.armed.swap(true, Ordering::SeqCst) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(AGAIN_AFTER).await;
            this.armed.store(false, Ordering::SeqCst);
            tracing::info!(
                controller = this.kind,
                "a trigger was dropped while the watch relisted; reconciling every object again"
            );
            // Full means a reconcile of every object is already asked for.
            let _ = this.tx.try_send(());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tests::{Item, obj};
    use futures::StreamExt;
    use kube::runtime::watcher;

    #[test]
    fn only_a_trigger_for_an_object_missing_from_the_store_is_dropped() {
        let cases: Vec<(&str, Item, bool)> = vec![
            ("a pass that ended well", Ok(()), false),
            (
                "a failed pass (its error policy requeues it)",
                Err(RunError::ReconcilerFailed(
                    std::io::Error::other("x"),
                    obj(),
                )),
                false,
            ),
            (
                "a trigger for an object the store does not hold",
                Err(RunError::ObjectNotFound(obj())),
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
    async fn the_drops_of_one_relist_ask_for_one_reconcile_of_everything() {
        let (redrive, again) = redrive("NatsStream");
        let mut again = Box::pin(again);
        let dropped: Item = Err(RunError::ObjectNotFound(obj()));
        for _ in 0..500 {
            redrive.note(&dropped);
        }
        redrive.note(&Item::Ok(()));
        assert_eq!(again.next().await, Some(()));
        // No second one for the same drops.
        let more = tokio::time::timeout(AGAIN_AFTER * 3, again.next()).await;
        assert!(more.is_err(), "one reconcile of everything per relist");
        // A later drop asks again.
        redrive.note(&dropped);
        assert_eq!(again.next().await, Some(()));
    }
}
