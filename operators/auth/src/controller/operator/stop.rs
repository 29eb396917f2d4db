//! Why a NatsOperator pass stops before it signs: a refusal, written as its conditions over the
//! status as far as the pass got, or a failure of the Kubernetes API.

use controller_kit::blocked::Blocked;
use controller_kit::conditions::Decided;
use nats_api::auth::condition;

use crate::controller::error::Error;

/// How a pass ends unsigned.
pub(super) enum Stop {
    /// Refused or waiting on another object: these conditions, a requeue with backoff.
    Refused(Vec<Decided>),
    /// The Kubernetes API failed: retried by the error policy.
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

/// Refused for `reason`: Ready False.
pub(super) fn not_ready(reason: &'static str, message: String) -> Stop {
    Stop::Refused(vec![
        Blocked::new(reason, message).condition(condition::READY),
    ])
}

/// Refused for `reason`, a reference that does not resolve: Ready and ReferencesResolved False.
pub(super) fn unresolved(reason: &'static str, message: String) -> Stop {
    let blocked = Blocked::new(reason, message);
    Stop::Refused(vec![
        blocked.condition(condition::READY),
        blocked.condition(condition::REFERENCES_RESOLVED),
    ])
}
