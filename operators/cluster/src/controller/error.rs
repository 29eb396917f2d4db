//! The reconciler's one error, naming what failed on which object. A failure to reach the
//! Kubernetes API fails the reconcile, retried with a backoff; a failing server-lifecycle port is
//! caught by the pass and written as Ready=False ReconcileFailed, looked at again after the same
//! backoff ([`super::pass`]).

use crate::lifecycle::LifecycleError;

/// What failed, on which object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the Kubernetes API about `object` failed.
    #[error("{object}: Kubernetes API: {source}")]
    Kube {
        object: String,
        #[source]
        source: kube::Error,
    },
    /// The server-lifecycle port failed; it names the object and what it was asked.
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
}

impl Error {
    /// A Kubernetes API failure about `object`, for `map_err`.
    pub fn kube(object: String) -> impl FnOnce(kube::Error) -> Error {
        move |source| Error::Kube { object, source }
    }

    /// The metric label of the error (`nats_operator_reconcile_errors_total`): bounded.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::Lifecycle(_) => "lifecycle",
        }
    }
}
