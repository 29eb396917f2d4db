//! Conditions (metav1.Condition): [`Decided`], a condition as a pass decides it, and [`merge`],
//! which writes a pass's decisions over the previous conditions: observedGeneration set once for
//! all of them, lastTransitionTime kept while a condition's status is unchanged (so its age says
//! how long it has held), and the types a pass no longer reports removed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// One condition as a pass decides it: type, status, reason, message. The times and the
/// observedGeneration are filled in by [`merge`] (or [`Decided::upsert`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The condition type (Ready, Synced, …).
    pub type_: &'static str,
    /// True or False.
    pub status: bool,
    /// The reason (CamelCase).
    pub reason: &'static str,
    /// A human-readable message.
    pub message: String,
}

impl Decided {
    /// A condition of `type_` with `status`, `reason` and `message`.
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }

    /// Sets this condition in `conditions`: lastTransitionTime kept while the status holds.
    pub fn upsert(&self, conditions: &mut Vec<Condition>, generation: Option<i64>, now: &Time) {
        set(
            conditions,
            (self.type_, self.status, self.reason, &self.message),
            generation,
            now,
        );
    }
}

/// The `previous` conditions with every condition of `set` upserted (observedGeneration
/// `generation`), and every type of `remove` that `set` does not hold removed.
pub fn merge(
    previous: &[Condition],
    generation: Option<i64>,
    set: &[Decided],
    remove: &[&str],
    now: &Time,
) -> Vec<Condition> {
    let mut out = previous.to_vec();
    for c in set {
        c.upsert(&mut out, generation, now);
    }
    for r in remove {
        if !set.iter().any(|c| c.type_ == *r) {
            self::remove(&mut out, r);
        }
    }
    out
}

fn status_text(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Sets the condition of `type_` in `conditions`: lastTransitionTime moves to `now` only when
/// the status changes (or the condition is new); reason, message and observedGeneration always
/// take the new values.
fn set(
    conditions: &mut Vec<Condition>,
    (type_, status, reason, message): (&str, bool, &str, &str),
    observed_generation: Option<i64>,
    now: &Time,
) {
    let status = status_text(status);
    let transition = match conditions.iter().find(|c| c.type_ == type_) {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => now.clone(),
    };
    let new = Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation,
        last_transition_time: transition,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
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
        #[case] reason: &'static str,
        #[case] want_transition: i64,
    ) {
        Decided::new("Ready", status, reason, "after").upsert(&mut conditions, Some(2), &at(200));
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
        Decided::new("Synced", false, "DriftCorrected", "maxMsgs").upsert(
            &mut conditions,
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

    #[test]
    fn merge_sets_the_decided_once_and_removes_only_what_it_does_not_set() {
        let mut prev = existing("False", "KeysPending");
        Decided::new("Distributed", false, "NoSystemConnection", "m").upsert(
            &mut prev,
            Some(1),
            &at(100),
        );
        let out = merge(
            &prev,
            Some(2),
            &[Decided::new("Ready", true, "Signed", "signed")],
            &["Distributed", "Ready"],
            &at(200),
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            (
                out[0].type_.as_str(),
                out[0].status.as_str(),
                out[0].reason.as_str(),
                out[0].observed_generation,
                &out[0].last_transition_time
            ),
            ("Ready", "True", "Signed", Some(2), &at(200))
        );
    }
}
