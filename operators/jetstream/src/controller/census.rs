//! The JSZ ping of the system balancer and the evacuation, collected only as long as it must
//! be: until as many servers answered as the same object's last full ping saw, or the deadline.
//! A pass then waits the whole deadline only the first time, when a server fell silent (which
//! the evacuation's `ServersDown` reads), and once a minute, when a full collection notices a
//! server added since.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nats_wire::monitor::{Jsz, JszOptions};
use nats_wire::{Collect, PingReplies, Wire, WireError};

use super::lock::lock;

/// How long a JSZ ping collects answers at most.
pub const JSZ_DEADLINE: Duration = Duration::from_secs(2);

/// How often a ping collects until the deadline even when the count is known.
pub const FULL_EVERY: Duration = Duration::from_secs(60);

/// How many servers each object's pings were last answered by, and when it last collected
/// until the deadline.
#[derive(Default)]
pub struct Census(Mutex<BTreeMap<String, Counted>>);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counted {
    answered: usize,
    full_at: Instant,
}

impl Census {
    /// How the next ping of `key` collects at `now`.
    fn collect(&self, key: &str, now: Instant) -> Collect {
        collect_for(lock(&self.0).get(key).copied(), now)
    }

    /// Records what a ping of `key`, collected as `collect`, saw at `now`.
    fn record(&self, key: &str, collect: Collect, answered: usize, now: Instant) {
        let mut counts = lock(&self.0);
        let full_at = match (collect.expect, counts.get(key)) {
            (Some(_), Some(c)) => c.full_at,
            _ => now,
        };
        counts.insert(key.to_owned(), Counted { answered, full_at });
    }

    /// Forgets `key` (its object is gone).
    pub fn forget(&self, key: &str) {
        lock(&self.0).remove(key);
    }

    /// `$SYS.REQ.SERVER.PING.JSZ` with `options` over `wire` for the object `key`.
    pub async fn ping(
        &self,
        key: &str,
        wire: &Wire,
        options: &JszOptions,
    ) -> Result<PingReplies<Jsz>, WireError> {
        let collect = self.collect(key, Instant::now());
        let replies = wire.ping_jsz(options, collect).await?;
        self.record(key, collect, replies.replies.len(), Instant::now());
        Ok(replies)
    }
}

/// The rule: until the deadline with nothing known, nobody answering last time, or the last
/// full collection a minute old; else until as many answered as then.
fn collect_for(last: Option<Counted>, now: Instant) -> Collect {
    match last {
        Some(c) if c.answered > 0 && now < c.full_at + FULL_EVERY => {
            Collect::expecting(c.answered, JSZ_DEADLINE)
        }
        _ => Collect::until(JSZ_DEADLINE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::first_ping_waits_the_deadline(None, 0, None)]
    #[case::nobody_answered_last_time(Some(0), 1, None)]
    #[case::known_count_stops_at_it(Some(6), 1, Some(6))]
    #[case::a_minute_after_the_full_one_waits_again(Some(6), 60, None)]
    fn a_ping_stops_at_the_count_last_seen_until_a_minute_has_passed(
        #[case] answered: Option<usize>,
        #[case] seconds_since_full: u64,
        #[case] expect: Option<usize>,
    ) {
        let full_at = Instant::now();
        let last = answered.map(|answered| Counted { answered, full_at });
        let got = collect_for(last, full_at + Duration::from_secs(seconds_since_full));
        assert_eq!(got.expect, expect);
        assert_eq!(got.deadline, JSZ_DEADLINE);
    }

    #[test]
    fn only_a_ping_collected_to_the_deadline_restarts_the_minute() {
        let census = Census::default();
        let t0 = Instant::now();
        census.record("ns/e", Collect::until(JSZ_DEADLINE), 6, t0);
        let later = t0 + Duration::from_secs(30);
        census.record("ns/e", Collect::expecting(6, JSZ_DEADLINE), 6, later);
        assert_eq!(
            census.collect("ns/e", t0 + Duration::from_secs(59)).expect,
            Some(6)
        );
        assert_eq!(
            census.collect("ns/e", t0 + Duration::from_secs(61)).expect,
            None,
            "the full collection was at t0, not at the expecting one"
        );
        census.forget("ns/e");
        assert_eq!(census.collect("ns/e", later).expect, None);
    }
}
