//! The pace of a balancer's passes: its `spec.interval`, never below the floor
//! ([`nats_api::jetstream::MIN_BALANCE_INTERVAL`], where the value is argued).
//!
//! The CRD refuses an interval below the floor at apply (CEL), but a cluster older than
//! Kubernetes 1.25 ignores CEL and an object applied before the rule keeps what it was stored
//! with: such an interval is raised to the floor here, and the pass says so ([`Pace::raised`]).

use std::time::Duration;

use nats_api::jetstream::{DEFAULT_BALANCE_INTERVAL, GoDuration, MIN_BALANCE_INTERVAL};

/// The floor, as a duration.
pub fn floor() -> Duration {
    GoDuration::new(MIN_BALANCE_INTERVAL)
        .parse()
        .unwrap_or(Duration::from_secs(5))
}

/// The default pace, for an interval that does not parse.
pub fn default_pace() -> Duration {
    GoDuration::new(DEFAULT_BALANCE_INTERVAL)
        .parse()
        .unwrap_or(Duration::from_secs(60))
}

/// How often a balancer passes, and why not as its spec says when it does not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pace {
    /// The time between quiet passes.
    pub every: Duration,
    /// Why `every` is not `spec.interval`: below the floor (raised to it) or unreadable (the
    /// default). `None` when it is the spec's.
    pub raised: Option<String>,
}

/// The pace `interval` asks for, at least the floor; one that does not parse reads as the
/// default minute.
pub fn pace(interval: &GoDuration) -> Pace {
    let floor = floor();
    match crate::units::duration_nanos("interval", interval) {
        Ok(n) => {
            let asked = Duration::from_nanos(u64::try_from(n).unwrap_or(0));
            if asked >= floor {
                Pace {
                    every: asked,
                    raised: None,
                }
            } else {
                Pace {
                    every: floor,
                    raised: Some(format!(
                        "spec.interval {} is below the floor of {MIN_BALANCE_INTERVAL} (stored \
                         before the CRD's rule refused it): passes run every \
                         {MIN_BALANCE_INTERVAL}",
                        interval.as_str()
                    )),
                }
            }
        }
        Err(e) => Pace {
            every: default_pace(),
            raised: Some(format!(
                "{e}: passes run every {DEFAULT_BALANCE_INTERVAL}, the default"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::the_default_minute_as_written("1m", 60_000, false)]
    #[case::the_floor_itself_as_written("5s", 5_000, false)]
    #[case::an_hour_as_written("1h", 3_600_000, false)]
    #[case::one_second_stored_before_the_rule_is_raised_to_the_floor("1s", 5_000, true)]
    #[case::one_nanosecond_a_hot_loop_is_raised_to_the_floor("1ns", 5_000, true)]
    #[case::zero_is_raised_to_the_floor("0", 5_000, true)]
    #[case::just_below_the_floor_is_raised("4999ms", 5_000, true)]
    #[case::unreadable_reads_as_the_default_minute("soon", 60_000, true)]
    fn a_balancers_passes_are_never_closer_than_the_floor(
        #[case] interval: &str,
        #[case] every_ms: u64,
        #[case] raised: bool,
    ) {
        let p = pace(&GoDuration::new(interval));
        assert_eq!(p.every, Duration::from_millis(every_ms));
        assert_eq!(p.raised.is_some(), raised, "{p:?}");
        assert!(p.every >= floor());
    }

    #[test]
    fn the_floor_is_the_one_the_crd_rule_names() {
        // The CEL rules on both balancer specs spell the floor as a literal (an attribute cannot
        // name a const); the CEL table's rows at 4999ms and 5s pin that literal, this pins the
        // const the controller paces by to the same value.
        assert_eq!(floor(), Duration::from_secs(5));
        let rule = serde_json::to_string(
            &<nats_api::jetstream::NatsBalancer as kube::CustomResourceExt>::crd(),
        )
        .unwrap_or_default();
        assert!(
            rule.contains(&format!("duration('{MIN_BALANCE_INTERVAL}')")),
            "NatsBalancer's CRD names the floor"
        );
        let rule = serde_json::to_string(
            &<nats_api::jetstream::NatsSystemBalancer as kube::CustomResourceExt>::crd(),
        )
        .unwrap_or_default();
        assert!(
            rule.contains(&format!("duration('{MIN_BALANCE_INTERVAL}')")),
            "NatsSystemBalancer's CRD names the floor"
        );
    }
}
