//! error_policy: a failed reconcile is retried after a backoff that doubles per consecutive
//! failure of the same object, capped, and reset by a success.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The first retry after a failure.
pub const BASE: Duration = Duration::from_secs(1);
/// The longest wait between retries.
pub const CAP: Duration = Duration::from_secs(300);

/// The wait before retry number `failures` (1 = the first failure): BASE·2^(failures−1), capped.
pub fn delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    BASE.saturating_mul(1u32 << exp).min(CAP)
}

/// Consecutive failures per object key.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Records a failure of `key`; returns the wait before its retry.
    pub fn failed(&self, key: &str) -> Duration {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        delay(*n)
    }

    /// Records a success of `key`: the next failure starts from BASE again.
    pub fn succeeded(&self, key: &str) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::first_failure(1, 1)]
    #[case::second_doubles(2, 2)]
    #[case::fifth(5, 16)]
    #[case::capped(10, 300)]
    #[case::far_beyond_the_cap(1000, 300)]
    fn delay_doubles_then_caps(#[case] failures: u32, #[case] secs: u64) {
        assert_eq!(delay(failures), Duration::from_secs(secs));
    }

    #[test]
    fn a_success_resets_the_count() {
        let b = Backoff::default();
        assert_eq!(b.failed("ns/a"), Duration::from_secs(1));
        assert_eq!(b.failed("ns/a"), Duration::from_secs(2));
        assert_eq!(b.failed("ns/b"), Duration::from_secs(1));
        b.succeeded("ns/a");
        assert_eq!(b.failed("ns/a"), Duration::from_secs(1));
    }
}
