//! A refusal: a pass that cannot go on until an input changes (a reference that is missing or
//! not granted, a server that cannot be reached, a spec the server refuses). It is no error: the
//! pass reports it as a condition (status False, its reason and message) and looks again later.

use std::fmt;

use crate::conditions::Decided;

/// Why a pass stopped short, as its condition says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The condition reason (CamelCase).
    pub reason: &'static str,
    /// What blocks it, for a human: what to change.
    pub message: String,
}

impl Blocked {
    /// A refusal for `reason`, saying `message`.
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// The condition of `type_` it reads as: False, with its reason and message.
    pub fn condition(&self, type_: &'static str) -> Decided {
        Decided::new(type_, false, self.reason, self.message.clone())
    }
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_reads_as_a_false_condition_of_any_type() {
        let b = Blocked::new(
            "ReferenceNotFound",
            "NatsConnection nats/demo does not exist",
        );
        assert_eq!(
            b.condition("Ready"),
            Decided::new(
                "Ready",
                false,
                "ReferenceNotFound",
                "NatsConnection nats/demo does not exist"
            )
        );
        assert_eq!(
            b.to_string(),
            "ReferenceNotFound: NatsConnection nats/demo does not exist"
        );
    }
}
