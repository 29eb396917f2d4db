//! The move lease (design §6.5): one balancer at a time moves on a NATS cluster. A balancer takes
//! the NATS cluster's lease before a move and holds it until a pass of its own finds the move
//! done; the others hold (MoveLeaseHeld) meanwhile. A lease lapses a minute after its holder's
//! last pass, so a balancer deleted or stuck mid-move does not hold the others forever. Kept in
//! the memory of the (leader-elected) JetStream controller: a new leader starts with none.
//!
//! A holder that keeps passing renews its lease at each pass, so a move that never finishes
//! would hold it for ever: a leader move whose leader went back to `from` (an operator's
//! stepdown, an election) is not done, and the lapse never comes. So a pending move found undone
//! — its group led by `from` again — in [`abandon_after`] passes in a row is given up
//! ([`judge_pending`]): a MoveAbandoned Event, the entry cleared, the lease released, counted.
//! The bound is the lapse over the pending poll (60 s / 2 s = 30 passes): an undone move holds the
//! others no longer than a holder that stopped passing would (its passes take time of their own,
//! so 30 of them span at least the minute), and a leader back on `from` for a pass or two of an
//! election is not mistaken for an undo. The balancer's `interval` does not enter: while a move
//! is pending its passes come every pending poll, whatever the interval.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long after its holder's last pass a lease lapses.
pub const LEASE_LAPSE: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Lease {
    holder: String,
    last_pass: Instant,
}

/// The leases of every NATS cluster, by cluster name; a holder is a balancer's `Kind ns/name`.
#[derive(Debug, Default)]
pub struct Leases {
    by_cluster: Mutex<BTreeMap<String, Lease>>,
    /// Passes in a row that found a pending move undone, by holder and move.
    undone: Mutex<BTreeMap<String, u32>>,
}

/// What a pass makes of a move it has pending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pending {
    /// Done: the entry goes (MoveDone).
    Done,
    /// Still pending; `undone` passes in a row found it undone.
    Waiting {
        /// Passes in a row (this one included) that found its subject back on `from`.
        undone: u32,
    },
    /// Found undone in `bound` passes in a row: given up (MoveAbandoned).
    Abandoned,
}

/// The passes in a row a pending move may be found undone before it is given up, for passes
/// `poll` apart: the lease's lapse over the poll, at least one.
pub fn abandon_after(poll: Duration) -> u32 {
    u32::try_from(LEASE_LAPSE.as_millis() / poll.as_millis().max(1))
        .unwrap_or(u32::MAX)
        .max(1)
}

/// A pending move as a pass finds it: `done`, or `undone` (its subject back on `from`, as it was
/// before the move), after `undone_before` passes in a row that found it so.
pub fn judge_pending(done: bool, undone: bool, undone_before: u32, bound: u32) -> Pending {
    if done {
        return Pending::Done;
    }
    let undone = if undone {
        undone_before.saturating_add(1)
    } else {
        0
    };
    if undone >= bound {
        Pending::Abandoned
    } else {
        Pending::Waiting { undone }
    }
}

impl Leases {
    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<String, Lease>) -> T) -> T {
        f(&mut self.by_cluster.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Who holds `cluster`'s lease now, if anyone but `who` (a lapsed lease counts as none).
    pub fn held_by_other(&self, cluster: &str, who: &str, now: Instant) -> Option<String> {
        self.with(|m| {
            m.get(cluster)
                .filter(|l| l.holder != who && now.duration_since(l.last_pass) < LEASE_LAPSE)
                .map(|l| l.holder.clone())
        })
    }

    /// Takes (or keeps) `cluster`'s lease for `who` before a move; `Err(holder)` when another
    /// holds it.
    pub fn take(&self, cluster: &str, who: &str, now: Instant) -> Result<(), String> {
        if let Some(holder) = self.held_by_other(cluster, who, now) {
            return Err(holder);
        }
        self.with(|m| {
            m.insert(
                cluster.to_string(),
                Lease {
                    holder: who.to_string(),
                    last_pass: now,
                },
            )
        });
        Ok(())
    }

    /// A pass of `who` that still waits for its move: the lease's lapse pushed back.
    pub fn renew(&self, cluster: &str, who: &str, now: Instant) {
        self.with(|m| {
            if let Some(l) = m.get_mut(cluster).filter(|l| l.holder == who) {
                l.last_pass = now;
            }
        });
    }

    /// A pass of `who` found its move done (or `who` is gone): the lease is released.
    pub fn release(&self, cluster: &str, who: &str) {
        self.with(|m| {
            if m.get(cluster).is_some_and(|l| l.holder == who) {
                m.remove(cluster);
            }
        });
    }

    /// `who` is gone: every lease it holds is released.
    pub fn release_all(&self, who: &str) {
        self.with(|m| m.retain(|_, l| l.holder != who));
    }

    /// Passes in a row that found the pending move `key` undone.
    pub fn undone(&self, key: &str) -> u32 {
        lock_map(&self.undone).get(key).copied().unwrap_or(0)
    }

    /// Records `n` passes in a row that found `key` undone (0 forgets it).
    pub fn set_undone(&self, key: &str, n: u32) {
        let mut m = lock_map(&self.undone);
        if n == 0 {
            m.remove(key);
        } else {
            m.insert(key.to_string(), n);
        }
    }

    /// Forgets the undone counts of `who`'s moves but those `keep`.
    pub fn keep_undone(&self, who: &str, keep: &[String]) {
        let prefix = format!("{who}|");
        lock_map(&self.undone).retain(|k, _| !k.starts_with(&prefix) || keep.contains(k));
    }

    /// Whether `who` holds `cluster`'s lease (unlapsed).
    pub fn holds(&self, cluster: &str, who: &str, now: Instant) -> bool {
        self.with(|m| {
            m.get(cluster)
                .is_some_and(|l| l.holder == who && now.duration_since(l.last_pass) < LEASE_LAPSE)
        })
    }
}

fn lock_map<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::done(true, false, 7, Pending::Done)]
    #[case::done_even_when_counted(true, true, 29, Pending::Done)]
    #[case::first_undone_pass(false, true, 0, Pending::Waiting { undone: 1 })]
    #[case::one_short_of_the_bound(false, true, 28, Pending::Waiting { undone: 29 })]
    #[case::the_bound_reached(false, true, 29, Pending::Abandoned)]
    #[case::leaderless_restarts_the_count(false, false, 20, Pending::Waiting { undone: 0 })]
    fn a_move_undone_for_the_bound_is_given_up(
        #[case] done: bool,
        #[case] undone: bool,
        #[case] before: u32,
        #[case] want: Pending,
    ) {
        assert_eq!(judge_pending(done, undone, before, 30), want);
    }

    #[rstest]
    #[case::the_pending_poll(2, 30)]
    #[case::a_slower_poll(5, 12)]
    #[case::a_poll_longer_than_the_lapse(90, 1)]
    fn the_bound_spans_the_lapse(#[case] poll_secs: u64, #[case] want: u32) {
        assert_eq!(abandon_after(Duration::from_secs(poll_secs)), want);
    }

    const S: &str = "NatsSystemBalancer nats/system";
    const A: &str = "NatsBalancer orders/orders";

    #[test]
    fn one_balancer_at_a_time_moves_on_a_nats_cluster() {
        let leases = Leases::default();
        let t0 = Instant::now();
        assert_eq!(leases.take("east", S, t0), Ok(()));
        assert_eq!(leases.take("east", S, t0), Ok(()), "its holder keeps it");
        assert_eq!(leases.take("east", A, t0), Err(S.to_string()));
        assert_eq!(
            leases.take("west", A, t0),
            Ok(()),
            "leases are per NATS cluster"
        );
        assert_eq!(leases.held_by_other("east", A, t0), Some(S.to_string()));
        assert_eq!(leases.held_by_other("east", S, t0), None);
        assert!(leases.holds("east", S, t0));
    }

    #[test]
    fn held_until_a_pass_of_its_own_finds_the_move_done() {
        let leases = Leases::default();
        let t0 = Instant::now();
        leases.take("east", S, t0).unwrap();
        // Another's release does nothing.
        leases.release("east", A);
        assert_eq!(leases.take("east", A, t0), Err(S.to_string()));
        leases.release("east", S);
        assert_eq!(leases.take("east", A, t0), Ok(()));
        // A balancer deleted: its leases go, others' stay.
        leases.take("west", S, t0).unwrap();
        leases.release_all(A);
        assert_eq!(leases.held_by_other("east", S, t0), None);
        assert_eq!(leases.held_by_other("west", A, t0), Some(S.to_string()));
    }

    #[test]
    fn a_lease_lapses_a_minute_after_its_holders_last_pass() {
        let leases = Leases::default();
        let t0 = Instant::now();
        leases.take("east", S, t0).unwrap();
        let t50 = t0 + Duration::from_secs(50);
        leases.renew("east", S, t50);
        // 59 s after the last pass: still held.
        let t109 = t50 + Duration::from_secs(59);
        assert_eq!(leases.take("east", A, t109), Err(S.to_string()));
        // A renewal by another does not push it back.
        leases.renew("east", A, t109);
        let t110 = t50 + LEASE_LAPSE;
        assert!(!leases.holds("east", S, t110));
        assert_eq!(leases.take("east", A, t110), Ok(()));
        assert!(leases.holds("east", A, t110));
    }
}
