//! Why a NatsSystemAccount pass stops before it pushes: a refusal, written as its conditions over
//! the status as far as the pass got, or a failure of the Kubernetes API.

use controller_kit::blocked::Blocked;
use controller_kit::conditions::Decided;
use nats_api::auth::condition;

use crate::controller::error::Error;

/// How a pass ends before its push.
pub(super) enum Stop {
    /// Refused or waiting on its NatsOperator: these conditions, a requeue with backoff.
    Refused(Vec<Decided>),
    /// Not the system account its NatsOperator selects: not signed, so the JWT hash and the
    /// distribution of before are dropped too.
    NotSelected(Vec<Decided>),
    /// The Kubernetes API failed: retried by the error policy.
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

/// Refused for `reason`, a reference that does not resolve: Ready and ReferencesResolved False.
pub(super) fn unresolved(reason: &'static str, message: String) -> Stop {
    let blocked = Blocked::new(reason, message);
    Stop::Refused(vec![
        blocked.condition(condition::READY),
        blocked.condition(condition::REFERENCES_RESOLVED),
    ])
}
