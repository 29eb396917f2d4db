//! The status of a pass that stopped short, one rule over the balancers' and the evacuation's
//! status types: observedGeneration and the conditions the pass decided, every other field as
//! the previous status had it (a pass rewrites nothing it did not look at).

use controller_kit::conditions::{self, Decided};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use nats_api::jetstream::{
    NatsBalancerStatus, NatsClusterEvacuationStatus, NatsSystemBalancerStatus, condition,
};

/// A status a stopped pass rewrites in part: its observedGeneration and its conditions.
pub trait Stoppable: Clone {
    /// The condition types a pass drops when it does not set them.
    const DROPPED: &'static [&'static str];
    /// The observedGeneration and the conditions, to rewrite.
    fn stoppable(&mut self) -> (&mut Option<i64>, &mut Vec<Condition>);
}

/// `previous` of a pass that stopped short at `generation`: the conditions of `set` merged over
/// the previous ones (a [`Stoppable::DROPPED`] type not set removed), the rest as it was.
pub fn stopped<S: Stoppable>(
    previous: &S,
    generation: Option<i64>,
    set: &[Decided],
    now: &Time,
) -> S {
    let mut status = previous.clone();
    let (observed, held) = status.stoppable();
    *held = conditions::merge(held, generation, set, S::DROPPED, now);
    *observed = generation;
    status
}

impl Stoppable for NatsBalancerStatus {
    const DROPPED: &'static [&'static str] = &[condition::HOLDING, condition::OVERLAPPING];
    fn stoppable(&mut self) -> (&mut Option<i64>, &mut Vec<Condition>) {
        (&mut self.observed_generation, &mut self.conditions)
    }
}

impl Stoppable for NatsSystemBalancerStatus {
    const DROPPED: &'static [&'static str] = &[condition::HOLDING];
    fn stoppable(&mut self) -> (&mut Option<i64>, &mut Vec<Condition>) {
        (&mut self.observed_generation, &mut self.conditions)
    }
}

impl Stoppable for NatsClusterEvacuationStatus {
    const DROPPED: &'static [&'static str] = &[condition::HOLDING];
    fn stoppable(&mut self) -> (&mut Option<i64>, &mut Vec<Condition>) {
        (&mut self.observed_generation, &mut self.conditions)
    }
}

#[cfg(test)]
mod tests {
    use nats_api::jetstream::{PoolStatus, reason};
    use rstest::rstest;

    use super::*;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("a valid timestamp"))
    }

    fn decided(type_: &'static str, status: bool) -> Decided {
        Decided::new(
            type_,
            status,
            reason::BALANCING,
            format!("{type_} {status}"),
        )
    }

    /// Conditions as a pass at generation 1, time 1, left them.
    fn before(set: &[Decided]) -> Vec<Condition> {
        conditions::merge(&[], Some(1), set, &[], &at(1))
    }

    /// (type, status, observedGeneration, lastTransitionTime) of each condition.
    fn seen(c: &[Condition]) -> Vec<(String, String, Option<i64>, i64)> {
        c.iter()
            .map(|c| {
                let t = c.last_transition_time.0.as_second();
                (c.type_.clone(), c.status.clone(), c.observed_generation, t)
            })
            .collect()
    }

    #[rstest]
    #[case::ready_turns_false_its_transition_now(
        &[decided(condition::READY, true)], &[decided(condition::READY, false)],
        &[(condition::READY, "False", 2)])]
    #[case::ready_false_again_keeps_its_transition(
        &[decided(condition::READY, false)], &[decided(condition::READY, false)],
        &[(condition::READY, "False", 1)])]
    #[case::holding_not_set_is_dropped(
        &[decided(condition::READY, true), decided(condition::HOLDING, true)],
        &[decided(condition::READY, false)], &[(condition::READY, "False", 2)])]
    #[case::holding_set_stays(
        &[decided(condition::READY, true)],
        &[decided(condition::READY, false), decided(condition::HOLDING, true)],
        &[(condition::READY, "False", 2), (condition::HOLDING, "True", 2)])]
    #[case::overlapping_not_set_is_dropped(
        &[decided(condition::READY, true), decided(condition::OVERLAPPING, true)],
        &[decided(condition::READY, false)], &[(condition::READY, "False", 2)])]
    fn a_stopped_pass_writes_its_conditions_and_keeps_the_rest(
        #[case] previous: &[Decided],
        #[case] set: &[Decided],
        #[case] want: &[(&str, &str, i64)],
    ) {
        let previous = NatsBalancerStatus {
            observed_generation: Some(1),
            conditions: before(previous),
            pools: vec![PoolStatus {
                name: "all".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let got = stopped(&previous, Some(2), set, &at(2));
        let want: Vec<_> = want
            .iter()
            .map(|(t, s, since)| (t.to_string(), s.to_string(), Some(2), *since))
            .collect();
        assert_eq!(seen(&got.conditions), want);
        assert_eq!(got.observed_generation, Some(2));
        assert_eq!(got.pools, previous.pools, "the rest as it was");
    }

    #[test]
    fn the_system_balancer_and_the_evacuation_drop_holding_only() {
        let conditions = before(&[
            decided(condition::READY, true),
            decided(condition::HOLDING, true),
            decided(condition::OVERLAPPING, true),
        ]);
        let ready = [decided(condition::READY, false)];
        let types = |c: &[Condition]| c.iter().map(|c| c.type_.clone()).collect::<Vec<_>>();
        let want = [condition::READY, condition::OVERLAPPING];
        let system = NatsSystemBalancerStatus {
            conditions: conditions.clone(),
            ..Default::default()
        };
        assert_eq!(
            types(&stopped(&system, Some(2), &ready, &at(2)).conditions),
            want
        );
        let evacuation = NatsClusterEvacuationStatus {
            conditions,
            moved: 3,
            ..Default::default()
        };
        let got = stopped(&evacuation, Some(2), &ready, &at(2));
        assert_eq!(types(&got.conditions), want);
        assert_eq!(got.moved, 3, "the rest as it was");
    }
}
