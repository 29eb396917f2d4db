//! Conditions (metav1.Condition): an upsert that keeps lastTransitionTime while the status is
//! unchanged, so a condition's age says how long it has held.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// One condition as a reconcile decides it; the time is filled in by [`upsert`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired<'a> {
    /// The condition type (Ready, Synced, …).
    pub type_: &'a str,
    /// True or False.
    pub status: bool,
    /// The reason (CamelCase).
    pub reason: &'a str,
    /// A human-readable message.
    pub message: String,
}

impl<'a> Desired<'a> {
    /// A condition of `type_` with `status`, `reason` and `message`.
    pub fn new(type_: &'a str, status: bool, reason: &'a str, message: impl Into<String>) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
}

fn status_text(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Sets the condition of `desired.type_` in `conditions`: lastTransitionTime moves to `now` only
/// when the status changes (or the condition is new); reason, message and observedGeneration
/// always take the new values.
pub fn upsert(
    conditions: &mut Vec<Condition>,
    desired: &Desired<'_>,
    observed_generation: Option<i64>,
    now: &Time,
) {
    let status = status_text(desired.status);
    let transition = match conditions.iter().find(|c| c.type_ == desired.type_) {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => now.clone(),
    };
    let new = Condition {
        type_: desired.type_.to_string(),
        status: status.to_string(),
        reason: desired.reason.to_string(),
        message: desired.message.clone(),
        observed_generation,
        last_transition_time: transition,
    };
    match conditions.iter_mut().find(|c| c.type_ == desired.type_) {
        Some(c) => *c = new,
        None => conditions.push(new),
    }
}

/// Removes the condition of `type_`, if present.
pub fn remove(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

/// The condition of `type_`, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present and True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// The current time as a metav1.Time.
pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("a valid timestamp"))
    }

    fn existing(status: &str, reason: &str) -> Vec<Condition> {
        vec![Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: reason.into(),
            message: "before".into(),
            observed_generation: Some(1),
            last_transition_time: at(100),
        }]
    }

    #[rstest]
    #[case::new_condition_takes_now(vec![], true, "Connected", 200)]
    #[case::same_status_keeps_the_transition_time(
        existing("True", "Connected"),
        true,
        "Connected",
        100
    )]
    #[case::same_status_new_reason_keeps_the_transition_time(
        existing("False", "ConnectFailed"),
        false,
        "SecretNotFound",
        100
    )]
    #[case::status_flip_moves_the_transition_time(
        existing("False", "ConnectFailed"),
        true,
        "Connected",
        200
    )]
    fn upsert_keeps_last_transition_time_while_status_holds(
        #[case] mut conditions: Vec<Condition>,
        #[case] status: bool,
        #[case] reason: &str,
        #[case] want_transition: i64,
    ) {
        upsert(
            &mut conditions,
            &Desired::new("Ready", status, reason, "after"),
            Some(2),
            &at(200),
        );
        assert_eq!(conditions.len(), 1);
        let c = &conditions[0];
        assert_eq!(c.last_transition_time, at(want_transition));
        assert_eq!(
            (c.reason.as_str(), c.message.as_str(), c.observed_generation),
            (reason, "after", Some(2))
        );
        assert_eq!(c.status, if status { "True" } else { "False" });
    }

    #[test]
    fn upsert_leaves_other_types_alone_and_remove_drops_one() {
        let mut conditions = existing("True", "Connected");
        upsert(
            &mut conditions,
            &Desired::new("Synced", false, "DriftCorrected", "maxMsgs"),
            None,
            &at(300),
        );
        assert_eq!(conditions.len(), 2);
        assert!(is_true(&conditions, "Ready"));
        assert!(!is_true(&conditions, "Synced"));
        remove(&mut conditions, "Ready");
        assert!(find(&conditions, "Ready").is_none());
        assert!(find(&conditions, "Synced").is_some());
    }
}
