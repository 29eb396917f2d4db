//! Why a NatsUser pass stops before it signs: a refusal, written as its conditions over the
//! status of before, a creds Secret that changed under the pass, or a failure of the Kubernetes
//! API.

use std::time::Duration;

use controller_kit::blocked::Blocked;
use controller_kit::conditions::Decided;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nats_api::auth::condition;

use crate::controller::error::Error;

/// How a pass ends unsigned.
pub(super) enum Stop {
    /// Refused or waiting on its account: these conditions over the status of before, a requeue
    /// with backoff.
    Refused(Vec<Decided>),
    /// PublicKeyInUse: only the key recorded before is kept (no JWT, no replaced keys).
    KeyInUse(Vec<Decided>),
    /// AccountNotAdmitted for a user signed before (§7): these conditions over the status of
    /// before, with status.withdrawnAt `at`; looked at again after `again` while connections are
    /// kicked, else after the backoff.
    Withdrawn {
        conds: Vec<Decided>,
        at: Time,
        again: Option<Duration>,
    },
    /// Nothing written; judged again after this long (a JWT that would still be revoked).
    Again(Duration),
    /// The creds Secret was deleted or rewritten since it was read: nothing written, judged again
    /// in 200 ms from what is there now.
    SecretChanged,
    /// The Kubernetes API failed: retried by the error policy.
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

/// Refused for `reason`: Ready False, with ReferencesResolved True (`resolved`) once the
/// account is.
pub(super) fn not_ready(reason: &'static str, message: String, resolved: &Decided) -> Stop {
    Stop::Refused(vec![
        Blocked::new(reason, message).condition(condition::READY),
        resolved.clone(),
    ])
}
