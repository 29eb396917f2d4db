//! Why a NatsAccount pass stops before it signs: a refusal, written as its conditions over the
//! status as far as the pass got, or a failure of the Kubernetes API.

use controller_kit::blocked::Blocked;
use controller_kit::conditions::Decided;
use nats_api::auth::{RosterServer, condition};

use crate::controller::error::Error;

/// How a pass ends unsigned.
pub(super) enum Stop {
    /// Refused or waiting on another object: these conditions, a requeue with backoff.
    Refused(Vec<Decided>),
    /// Not admitted, and the NatsOperator recorded the deletion: the JWT is gone for good, so
    /// status.jwt, jwtHash and distribution go too.
    Forgotten(Vec<Decided>),
    /// A silent server may hold a newer JWT: not signed. The distribution is kept as recorded
    /// with this roster, its silence included, so the next pass (maybe of a new process) still
    /// counts the silent server.
    Held {
        roster: Vec<RosterServer>,
        conds: Vec<Decided>,
    },
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
    Stop::Refused(not_ready_conds(reason, message))
}

/// Refused for `reason`: Ready False, as a list of conditions.
pub(super) fn not_ready_conds(reason: &'static str, message: String) -> Vec<Decided> {
    vec![Blocked::new(reason, message).condition(condition::READY)]
}

/// Refused for `reason`, a reference that does not resolve: Ready and ReferencesResolved False,
/// with a message each.
pub(super) fn unresolved_conds(reason: &'static str, ready: String, refs: String) -> Vec<Decided> {
    vec![
        Blocked::new(reason, ready).condition(condition::READY),
        Blocked::new(reason, refs).condition(condition::REFERENCES_RESOLVED),
    ]
}
