//! Fairness in the request slots: each Controller of the JetStream controller runs at most
//! `--concurrency` passes at once (32 by default, [`controller_kit::scope`]), and a pass holds
//! its slot while it waits on NATS. A NatsConnection to a server that accepts the connection
//! but never answers `$JS.API.>` (a tarpit, or just a wedged account) makes each of its
//! resources' passes wait out the request timeout (5 s): enough of them held every slot and
//! starved every other tenant.
//!
//! So no NatsConnection holds more than its share of one Controller's slots ([`share_of`]: a
//! quarter). A pass over a connection already at its share does no I/O: it gives its slot
//! back at once, joins its connection's line, and is woken as soon as one of that
//! connection's passes ends ([`Shares::on_wake`], fed to its Controller with `reconcile_on`);
//! [`fallback_at`] its place in the line later at the latest. The deferral is counted
//! ([`nats_api::jetstream::metric::CONNECTION_SHARE_DEFERRED`]). A tenant's passes so keep
//! their share busy (one waits on the next rather than on a timer), and nobody else's.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::lock::lock;

/// How long a deferred pass near the head of its line waits at most before it looks again,
/// should no wake-up come.
pub const DEFERRAL_FALLBACK: Duration = Duration::from_secs(5);

/// The longest a deferred pass waits before it looks again, however far back in its line.
pub const DEFERRAL_FALLBACK_MAX: Duration = Duration::from_secs(60);

/// How many places of a line share one [`DEFERRAL_FALLBACK`] step.
const PLACES_PER_STEP: usize = 64;

/// How long a pass deferred at `place` in its connection's line (0: the head) waits at most
/// before it looks again: [`DEFERRAL_FALLBACK`] for the first [`PLACES_PER_STEP`] places, one
/// more step for each further [`PLACES_PER_STEP`], at most [`DEFERRAL_FALLBACK_MAX`]. The
/// wake-up, not the timer, moves a line along: an object far back that looked again every 5 s
/// would be deferred again each time (10,000 streams applied at once on one connection cost 12
/// passes a stream so), while a lost wake-up still costs a bounded wait.
pub fn fallback_at(place: usize) -> Duration {
    let steps = u32::try_from(place / PLACES_PER_STEP + 1).unwrap_or(u32::MAX);
    DEFERRAL_FALLBACK
        .saturating_mul(steps)
        .min(DEFERRAL_FALLBACK_MAX)
}

/// The most passes of one Controller one NatsConnection may have in flight: a quarter of its
/// slots, at least one. Three tenants at their share leave the fourth quarter free; one
/// tenant's passes run eight at a time under the default 32, which its reconciles (a few
/// milliseconds of work, the rest waiting on NATS and the apiserver) barely miss.
pub fn share_of(concurrency: u16) -> usize {
    usize::from(concurrency / 4).max(1)
}

/// An object a pass was deferred for: its kind, namespace and name.
type Waiting = (String, String, String);

/// What wakes an object of one kind: its Controller's `reconcile_on` feed.
type Waker = Box<dyn Fn(&str, &str) + Send + Sync>;

/// The passes each connection has in flight, per Controller, and the objects waiting on it.
pub struct Shares {
    share: usize,
    state: Mutex<State>,
    wakers: Mutex<BTreeMap<String, Waker>>,
}

impl std::fmt::Debug for Shares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shares")
            .field("share", &self.share)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    /// `kind|ns/connection` → passes in flight.
    held: BTreeMap<String, usize>,
    /// `kind|ns/connection` → objects whose pass was deferred, in order, each once.
    waiting: BTreeMap<String, VecDeque<Waiting>>,
}

/// A slot taken for one pass over a connection; given back when dropped, waking the next
/// object waiting on that connection.
#[derive(Debug)]
pub struct Taken {
    shares: Arc<Shares>,
    key: String,
}

impl Drop for Taken {
    fn drop(&mut self) {
        let next = {
            let mut s = lock(&self.shares.state);
            if let Some(n) = s.held.get_mut(&self.key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    s.held.remove(&self.key);
                }
            }
            let next = s.waiting.get_mut(&self.key).and_then(VecDeque::pop_front);
            if s.waiting.get(&self.key).is_some_and(VecDeque::is_empty) {
                s.waiting.remove(&self.key);
            }
            next
        };
        if let Some((kind, ns, name)) = next
            && let Some(wake) = lock(&self.shares.wakers).get(&kind)
        {
            wake(&ns, &name);
        }
    }
}

impl Shares {
    /// Shares of a Controller running `concurrency` passes at once.
    pub fn new(concurrency: u16) -> Self {
        Self {
            share: share_of(concurrency),
            state: Mutex::default(),
            wakers: Mutex::default(),
        }
    }

    /// The share of each connection.
    pub fn share(&self) -> usize {
        self.share
    }

    /// Wakes objects of `kind` with `wake(namespace, name)` when their connection frees a slot.
    pub fn on_wake(&self, kind: &str, wake: impl Fn(&str, &str) + Send + Sync + 'static) {
        lock(&self.wakers).insert(kind.to_string(), Box::new(wake));
    }

    /// A slot for a pass of the object `kind` `ns`/`name` over `connection` (`kind|ns/name` of
    /// the NatsConnection: per Controller), or, when the connection holds its share, the
    /// object put in the connection's line (once) and the longest wait before it looks again
    /// ([`fallback_at`] its place).
    pub fn take(
        self: &Arc<Self>,
        connection: &str,
        (kind, ns, name): (&str, &str, &str),
    ) -> Result<Taken, Duration> {
        let mut s = lock(&self.state);
        let held = s.held.get(connection).copied().unwrap_or(0);
        if held >= self.share {
            let line = s.waiting.entry(connection.to_string()).or_default();
            let place = match line
                .iter()
                .position(|(k, n, m)| k == kind && n == ns && m == name)
            {
                Some(place) => place,
                None => {
                    line.push_back((kind.to_string(), ns.to_string(), name.to_string()));
                    line.len() - 1
                }
            };
            return Err(fallback_at(place));
        }
        s.held.insert(connection.to_string(), held + 1);
        Ok(Taken {
            shares: self.clone(),
            key: connection.to_string(),
        })
    }

    /// Passes `connection` has in flight.
    pub fn held(&self, connection: &str) -> usize {
        lock(&self.state).held.get(connection).copied().unwrap_or(0)
    }

    /// Objects waiting on `connection`.
    pub fn waiting(&self, connection: &str) -> usize {
        lock(&self.state)
            .waiting
            .get(connection)
            .map_or(0, VecDeque::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[rstest]
    #[case::the_head_of_the_line(0, 5)]
    #[case::the_last_of_the_first_step(63, 5)]
    #[case::the_second_step(64, 10)]
    #[case::the_third_step(128, 15)]
    #[case::eleven_steps_back(704, 60)]
    #[case::far_back_stays_at_the_most(10_000, 60)]
    #[case::no_overflow(usize::MAX, 60)]
    fn a_pass_further_back_in_its_line_looks_again_later(#[case] place: usize, #[case] secs: u64) {
        assert_eq!(fallback_at(place), Duration::from_secs(secs));
    }

    #[test]
    fn a_pass_deferred_again_keeps_its_place_and_its_wait() {
        let shares = Arc::new(Shares::new(4));
        let busy = "S|t/busy";
        let _held = shares.take(busy, ("S", "t", "s0"));
        for i in 1..=70 {
            assert!(shares.take(busy, ("S", "t", &format!("s{i}"))).is_err());
        }
        assert_eq!(
            shares.take(busy, ("S", "t", "s70")).err(),
            Some(Duration::from_secs(10)),
            "the 70th in line (place 69) waits a step longer"
        );
        assert_eq!(
            shares.take(busy, ("S", "t", "s1")).err(),
            Some(DEFERRAL_FALLBACK)
        );
        assert_eq!(shares.waiting(busy), 70, "each object waits once");
    }

    #[test]
    fn a_connection_at_its_share_defers_its_passes_and_wakes_them_in_order() {
        let shares = Arc::new(Shares::new(8));
        assert_eq!(shares.share(), 2);
        let woken = Arc::new(Mutex::new(Vec::new()));
        let w = woken.clone();
        shares.on_wake("S", move |ns, name| lock(&w).push(format!("{ns}/{name}")));
        let tarpit = "S|t/tarpit";
        let a1 = shares.take(tarpit, ("S", "t", "s1"));
        let a2 = shares.take(tarpit, ("S", "t", "s2"));
        assert!(a1.is_ok() && a2.is_ok());
        assert_eq!(
            shares.take(tarpit, ("S", "t", "s3")).err(),
            Some(DEFERRAL_FALLBACK),
            "the third pass of the tarpit's connection waits"
        );
        assert!(shares.take(tarpit, ("S", "t", "s4")).is_err());
        assert!(shares.take(tarpit, ("S", "t", "s3")).is_err());
        assert_eq!(shares.waiting(tarpit), 2, "each object waits once");
        let healthy = shares.take("S|h/orders", ("S", "h", "o1"));
        assert!(healthy.is_ok(), "another connection is not held back");
        assert!(
            shares.take("K|t/tarpit", ("K", "t", "b1")).is_ok(),
            "another Controller's slots are its own"
        );
        drop(a1);
        assert_eq!(shares.held(tarpit), 1);
        assert_eq!(*lock(&woken), ["t/s3"], "the first in line is woken");
        let s3 = shares.take(tarpit, ("S", "t", "s3"));
        assert!(s3.is_ok(), "and takes the slot given back");
        drop(healthy);
        assert_eq!(
            *lock(&woken),
            ["t/s3"],
            "a healthy slot wakes nobody of the tarpit"
        );
        drop(a2);
        assert_eq!(*lock(&woken), ["t/s3", "t/s4"]);
    }
}
