//! Fairness in the request slots: each Controller of the stream-backed kinds and consumers runs
//! at most `--concurrency` passes at once (32 by default, [`controller_kit::scope`]), and a pass
//! holds its slot while it waits on NATS. A NatsConnection to a server that accepts the
//! connection but never answers `$JS.API.>` (a tarpit, or just a wedged account) makes each of
//! its resources' passes wait out the request timeout (5 s): enough of them held every slot and
//! starved every other tenant.
//!
//! So no NatsConnection holds more than its share of one Controller's slots ([`share_of`]: a
//! quarter). A pass over a connection at its share waits in that connection's line, holding no
//! slot, and takes the first of its connection's slots given back, in the order the passes came
//! ([`Shares::take`]); only then does it wait for one of its Controller's slots. The wait is
//! counted ([`nats_api::jetstream::metric::CONNECTION_SHARE_DEFERRED`]). A tenant's passes so
//! keep their share busy, one following the next, and nobody else's; and a pass put off is the
//! same pass, run once, not a second one requeued behind a timer (1,000 streams applied at once
//! on one connection cost two passes a stream so).
//!
//! The lines are tokio's semaphores: fair (first come, first served) and safe when a waiting
//! pass is dropped, which a hand-written queue of wake-ups was not.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use super::lock::lock;

/// The most passes of one Controller one NatsConnection may have in flight: a quarter of its
/// slots, at least one. Three tenants at their share leave the fourth quarter free; one
/// tenant's passes run eight at a time under the default 32, which its reconciles (a few
/// milliseconds of work, the rest waiting on NATS and the apiserver) barely miss.
pub fn share_of(concurrency: u16) -> usize {
    usize::from(concurrency / 4).max(1)
}

/// One connection's line in one Controller: its share of slots, and the passes waiting for one.
#[derive(Debug)]
struct Line {
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
}

/// The slots of each Controller (by kind) and each connection's share of them (by
/// `kind|ns/connection`).
#[derive(Debug)]
pub struct Shares {
    share: usize,
    concurrency: usize,
    lines: Mutex<BTreeMap<String, Arc<Line>>>,
    controllers: Mutex<BTreeMap<String, Arc<Semaphore>>>,
}

/// A slot taken for one pass over a connection, and the connection's place in its share;
/// both given back when dropped, the first waiting pass of the connection taking the latter.
#[derive(Debug)]
pub struct Taken {
    _share: OwnedSemaphorePermit,
    _slot: OwnedSemaphorePermit,
}

/// The slots were closed. Shares never closes them: a pass that sees this is requeued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the request slots were closed")]
pub struct Closed;

/// Counts a pass waiting in its connection's line while it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn on(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Shares {
    /// Shares of Controllers running `concurrency` passes at once.
    pub fn new(concurrency: u16) -> Self {
        Self {
            share: share_of(concurrency),
            concurrency: usize::from(concurrency).max(1),
            lines: Mutex::default(),
            controllers: Mutex::default(),
        }
    }

    /// The share of each connection.
    pub fn share(&self) -> usize {
        self.share
    }

    fn line(&self, connection: &str) -> Arc<Line> {
        lock(&self.lines)
            .entry(connection.to_string())
            .or_insert_with(|| {
                Arc::new(Line {
                    slots: Arc::new(Semaphore::new(self.share)),
                    waiting: AtomicUsize::new(0),
                })
            })
            .clone()
    }

    fn slots_of(&self, kind: &str) -> Arc<Semaphore> {
        lock(&self.controllers)
            .entry(kind.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.concurrency)))
            .clone()
    }

    /// A slot of the Controller of `kind` for a pass over `connection` (`kind|ns/name` of the
    /// NatsConnection), once the connection is below its share: a pass over a connection at its
    /// share waits in the connection's line (`on_wait` is called once, as it joins), holding no
    /// slot, and takes the connection's next place given back, first come, first served.
    pub async fn take(
        &self,
        connection: &str,
        kind: &str,
        on_wait: impl FnOnce(),
    ) -> Result<Taken, Closed> {
        let line = self.line(connection);
        let share = match line.slots.clone().try_acquire_owned() {
            Ok(place) => place,
            Err(TryAcquireError::Closed) => return Err(Closed),
            Err(TryAcquireError::NoPermits) => {
                on_wait();
                let _waiting = Waiting::on(&line.waiting);
                line.slots
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| Closed)?
            }
        };
        let slot = self
            .slots_of(kind)
            .acquire_owned()
            .await
            .map_err(|_| Closed)?;
        Ok(Taken {
            _share: share,
            _slot: slot,
        })
    }

    /// Passes `connection` has in flight (or about to take a slot).
    pub fn held(&self, connection: &str) -> usize {
        lock(&self.lines).get(connection).map_or(0, |l| {
            self.share.saturating_sub(l.slots.available_permits())
        })
    }

    /// Passes waiting in `connection`'s line.
    pub fn waiting(&self, connection: &str) -> usize {
        lock(&self.lines)
            .get(connection)
            .map_or(0, |l| l.waiting.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use rstest::rstest;

    #[rstest]
    #[case::the_default_32_slots_give_each_connection_8(32, 8)]
    #[case::four_slots_give_one(4, 1)]
    #[case::one_slot_still_gives_one(1, 1)]
    #[case::a_hundred_slots_give_25(100, 25)]
    fn no_connection_holds_more_than_a_quarter_of_the_slots(
        #[case] concurrency: u16,
        #[case] share: usize,
    ) {
        assert_eq!(share_of(concurrency), share);
    }

    /// Takes a slot now, or `None` when the pass would wait.
    fn now(shares: &Shares, connection: &str, kind: &str) -> Option<Taken> {
        shares
            .take(connection, kind, || {})
            .now_or_never()
            .and_then(Result::ok)
    }

    #[tokio::test]
    async fn a_connection_at_its_share_holds_its_passes_in_line_and_lets_them_in_in_order() {
        let shares = Shares::new(8);
        assert_eq!(shares.share(), 2);
        let tarpit = "S|t/tarpit";
        let a1 = now(&shares, tarpit, "S");
        let a2 = now(&shares, tarpit, "S");
        assert!(a1.is_some() && a2.is_some());
        let joined = AtomicUsize::new(0);
        let mut s3 = Box::pin(shares.take(tarpit, "S", || {
            joined.fetch_add(1, Ordering::Relaxed);
        }));
        let mut s4 = Box::pin(shares.take(tarpit, "S", || {
            joined.fetch_add(1, Ordering::Relaxed);
        }));
        assert!(futures::poll!(s3.as_mut()).is_pending(), "the third waits");
        assert!(futures::poll!(s4.as_mut()).is_pending(), "and the fourth");
        assert_eq!(joined.load(Ordering::Relaxed), 2, "each counted once");
        assert_eq!(shares.waiting(tarpit), 2);
        assert_eq!(shares.held(tarpit), 2);
        let healthy = now(&shares, "S|h/orders", "S");
        assert!(healthy.is_some(), "another connection is not held back");
        assert!(
            now(&shares, "K|t/tarpit", "K").is_some(),
            "another Controller's line is its own"
        );
        drop(a1);
        assert!(
            futures::poll!(s4.as_mut()).is_pending(),
            "the fourth does not jump the line"
        );
        let s3 = match futures::poll!(s3.as_mut()) {
            std::task::Poll::Ready(Ok(t)) => t,
            other => panic!("the first in line takes the place given back: {other:?}"),
        };
        drop(healthy);
        assert!(
            futures::poll!(s4.as_mut()).is_pending(),
            "a healthy connection's place lets nobody of the tarpit in"
        );
        drop(a2);
        assert!(matches!(
            futures::poll!(s4.as_mut()),
            std::task::Poll::Ready(Ok(_))
        ));
        assert_eq!(shares.waiting(tarpit), 0);
        drop(s3);
    }

    #[tokio::test]
    async fn a_pass_dropped_while_waiting_leaves_the_line() {
        let shares = Shares::new(4);
        let c = "S|t/c";
        let first = now(&shares, c, "S");
        assert!(first.is_some());
        let mut gone = Box::pin(shares.take(c, "S", || {}));
        assert!(futures::poll!(gone.as_mut()).is_pending());
        let mut next = Box::pin(shares.take(c, "S", || {}));
        assert!(futures::poll!(next.as_mut()).is_pending());
        drop(gone);
        assert_eq!(shares.waiting(c), 1);
        drop(first);
        assert!(
            matches!(futures::poll!(next.as_mut()), std::task::Poll::Ready(Ok(_))),
            "the place goes to the next pass still waiting"
        );
    }

    #[tokio::test]
    async fn a_controller_runs_at_most_its_concurrency_over_all_connections() {
        let shares = Shares::new(4);
        let held: Vec<_> = (0..4)
            .map(|i| now(&shares, &format!("S|t/c{i}"), "S"))
            .collect();
        assert!(held.iter().all(Option::is_some));
        let mut fifth = Box::pin(shares.take("S|t/c4", "S", || {}));
        assert!(
            futures::poll!(fifth.as_mut()).is_pending(),
            "four slots, four passes"
        );
        assert!(
            now(&shares, "K|t/c4", "K").is_some(),
            "another Controller's slots"
        );
        drop(held);
        assert!(matches!(
            futures::poll!(fifth.as_mut()),
            std::task::Poll::Ready(Ok(_))
        ));
    }
}
