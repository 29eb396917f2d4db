//! Connections shared by key, dialed outside any shared lock: one slot per connection key (a
//! NatsConnection's namespace/name), each with its own lock held only across that key's dial,
//! so an unreachable server stalls only the resources naming it. A failed dial is remembered
//! with its fingerprint and answered from memory until its backoff ([`redial_after`]) runs out;
//! a changed fingerprint (a new spec, a rotated Secret) dials at once.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// The wait before dialing again after the first failed dial.
pub const REDIAL_BASE: Duration = Duration::from_secs(1);
/// The longest wait between two dials of a key that keeps failing.
pub const REDIAL_CAP: Duration = Duration::from_secs(60);

/// How long a key that failed `failures` times in a row (1 = the first) is answered from memory
/// before it is dialed again: REDIAL_BASE·2^(failures−1), capped at REDIAL_CAP.
pub fn redial_after(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    REDIAL_BASE.saturating_mul(1u32 << exp).min(REDIAL_CAP)
}

/// A failed dial as remembered: what the dial said, how many failed in a row, and how long
/// until the next dial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed<F> {
    /// What the dial returned.
    pub failure: F,
    /// Consecutive failed dials of this key with this fingerprint.
    pub failures: u32,
    /// Until the next dial; the failure is answered from memory meanwhile.
    pub retry_in: Duration,
}

enum Slot<C, F> {
    Empty,
    Connected {
        fingerprint: String,
        client: C,
    },
    Failed {
        fingerprint: String,
        failure: F,
        failures: u32,
        until: Instant,
    },
}

/// One key's slot, under its own lock.
type Shared<C, F> = Arc<tokio::sync::Mutex<Slot<C, F>>>;

/// Shared connections by key. `C` is the client (cheap to clone), `F` what a failed dial says.
pub struct Dials<C, F> {
    slots: Mutex<HashMap<String, Shared<C, F>>>,
}

impl<C, F> Default for Dials<C, F> {
    fn default() -> Self {
        Dials {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<C: Clone, F: Clone> Dials<C, F> {
    fn slot(&self, key: &str) -> Shared<C, F> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .entry(key.to_string())
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(Slot::Empty)))
            .clone()
    }

    /// The client of `key` dialed from what `fingerprint` names: the one held when it matches and
    /// `live` says it still is; the remembered failure while its backoff runs; else `dial`, with
    /// only this key's lock held (callers of the same key wait for that one dial and share it).
    pub async fn get<Fut>(
        &self,
        key: &str,
        fingerprint: &str,
        live: impl Fn(&C) -> bool,
        dial: impl FnOnce() -> Fut,
    ) -> Result<C, Failed<F>>
    where
        Fut: Future<Output = Result<C, F>>,
    {
        let slot = self.slot(key);
        let mut slot = slot.lock().await;
        let now = Instant::now();
        let previous = match &*slot {
            Slot::Connected {
                fingerprint: f,
                client,
            } if f == fingerprint && live(client) => return Ok(client.clone()),
            Slot::Failed {
                fingerprint: f,
                failure,
                failures,
                until,
            } if f == fingerprint => {
                if now < *until {
                    return Err(Failed {
                        failure: failure.clone(),
                        failures: *failures,
                        retry_in: *until - now,
                    });
                }
                *failures
            }
            _ => 0,
        };
        match dial().await {
            Ok(client) => {
                *slot = Slot::Connected {
                    fingerprint: fingerprint.to_string(),
                    client: client.clone(),
                };
                Ok(client)
            }
            Err(failure) => {
                let failures = previous.saturating_add(1);
                let retry_in = redial_after(failures);
                *slot = Slot::Failed {
                    fingerprint: fingerprint.to_string(),
                    failure: failure.clone(),
                    failures,
                    until: Instant::now() + retry_in,
                };
                Err(Failed {
                    failure,
                    failures,
                    retry_in,
                })
            }
        }
    }

    /// The client `key` holds connected now, without dialing: for a watcher that follows whatever
    /// connection the passes dialed. `None` while none is held or a dial of it is in progress.
    pub fn held(&self, key: &str) -> Option<C> {
        let slot = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.get(key).cloned()
        }?;
        let slot = slot.try_lock().ok()?;
        match &*slot {
            Slot::Connected { client, .. } => Some(client.clone()),
            _ => None,
        }
    }

    /// Drops what `key` holds (its object is gone, or cannot be dialed for a reason of its own).
    pub fn forget(&self, key: &str) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.remove(key);
    }

    /// How many keys hold a connected client. A key being dialed right now is not counted.
    pub fn connected(&self) -> usize {
        let slots: Vec<_> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.values().cloned().collect()
        };
        slots
            .iter()
            .filter(|s| {
                s.try_lock()
                    .is_ok_and(|s| matches!(*s, Slot::Connected { .. }))
            })
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[rstest]
    #[case::the_first_failure_waits_a_second(1, 1)]
    #[case::the_second_doubles(2, 2)]
    #[case::the_fourth(4, 8)]
    #[case::the_sixth_is_under_the_cap(6, 32)]
    #[case::the_seventh_is_capped(7, 60)]
    #[case::far_beyond_the_cap(1000, 60)]
    #[case::zero_reads_as_the_first(0, 1)]
    fn a_failing_key_is_dialed_again_after_a_doubling_capped_wait(
        #[case] failures: u32,
        #[case] secs: u64,
    ) {
        assert_eq!(redial_after(failures), Duration::from_secs(secs));
    }

    async fn dial_counting(
        dials: &Dials<u32, String>,
        key: &str,
        fingerprint: &str,
        count: &AtomicU32,
        ok: bool,
    ) -> Result<u32, Failed<String>> {
        dials
            .get(
                key,
                fingerprint,
                |_| true,
                || async {
                    let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                    if ok { Ok(n) } else { Err(format!("dial {n}")) }
                },
            )
            .await
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_dial_is_remembered_until_its_backoff_ends_and_a_new_fingerprint_dials() {
        let dials = Dials::<u32, String>::default();
        let count = AtomicU32::new(0);
        let first = dial_counting(&dials, "ns/a", "v1", &count, false).await;
        assert_eq!(first.as_ref().map_err(|f| f.failures), Err(1));
        // Within the backoff: answered from memory, no dial.
        let again = dial_counting(&dials, "ns/a", "v1", &count, false).await;
        assert_eq!(again.map_err(|f| f.failure), Err("dial 1".to_string()));
        assert_eq!(count.load(Ordering::SeqCst), 1);
        // After it: dialed again, the count of failures doubles the next wait.
        tokio::time::advance(Duration::from_millis(1001)).await;
        let second = dial_counting(&dials, "ns/a", "v1", &count, false).await;
        assert_eq!(
            second.map_err(|f| (f.failures, f.retry_in)),
            Err((2, Duration::from_secs(2)))
        );
        // A changed spec dials at once and starts the count afresh.
        let fixed = dial_counting(&dials, "ns/a", "v2", &count, true).await;
        assert_eq!(fixed, Ok(3));
        // Connected: shared, no dial.
        assert_eq!(
            dial_counting(&dials, "ns/a", "v2", &count, true).await,
            Ok(3)
        );
        assert_eq!(dials.connected(), 1);
        assert_eq!(
            dials.held("ns/a"),
            Some(3),
            "held: the connected client, no dial"
        );
        assert_eq!(
            dials.held("ns/b"),
            None,
            "held: nothing for a key never dialed"
        );
        assert_eq!(count.load(Ordering::SeqCst), 3);
        dials.forget("ns/a");
        assert_eq!(dials.connected(), 0);
        assert_eq!(dials.held("ns/a"), None);
        let _ = dial_counting(&dials, "ns/a", "v3", &count, false).await;
        assert_eq!(dials.held("ns/a"), None, "held: nothing for a failed dial");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dial_that_hangs_holds_only_its_own_key() {
        let dials = Arc::new(Dials::<u32, String>::default());
        let hanging = {
            let dials = dials.clone();
            tokio::spawn(async move {
                dials
                    .get(
                        "ns/blackhole",
                        "v1",
                        |_| true,
                        || async {
                            tokio::time::sleep(Duration::from_secs(5)).await;
                            Err::<u32, _>("timed out".to_string())
                        },
                    )
                    .await
            })
        };
        tokio::task::yield_now().await;
        let started = Instant::now();
        let count = AtomicU32::new(0);
        let healthy = dial_counting(&dials, "ns/healthy", "v1", &count, true).await;
        assert_eq!(healthy, Ok(1));
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "no wait on the other key"
        );
        let hung = hanging.await.expect("the task ends");
        assert_eq!(hung.map_err(|f| f.failure), Err("timed out".to_string()));
    }
}
