//! The move lease (design §6.5): one balancer at a time moves on a NATS cluster. A balancer takes
//! the NATS cluster's lease before a move and holds it until a pass of its own finds the move
//! done; the others hold (MoveLeaseHeld) meanwhile. A lease lapses a minute after its holder's
//! last pass, so a balancer deleted or stuck mid-move does not hold the others forever. Kept in
//! the memory of the (leader-elected) JetStream controller: a new leader starts with none.

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

    /// Whether `who` holds `cluster`'s lease (unlapsed).
    pub fn holds(&self, cluster: &str, who: &str, now: Instant) -> bool {
        self.with(|m| {
            m.get(cluster)
                .is_some_and(|l| l.holder == who && now.duration_since(l.last_pass) < LEASE_LAPSE)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
