//! The reconciler's one error, naming what failed on which object, with the label it is counted
//! under (`nats_operator_reconcile_errors_total{error}`): a failure to reach the Kubernetes API
//! (`kube`) or to write the deletion guard's finalizer (`finalizer`) fails the reconcile,
//! retried with a backoff by the kit's error policy; a failing server-lifecycle port
//! (`server_lifecycle`) is caught by the pass and written as Ready=False ReconcileFailed, looked at again
//! after a backoff too ([`super::pass`]).

use controller_kit::error::{KubeError, ReconcileError, label};
use controller_kit::finalizer::WriteError;

use crate::server_lifecycle::ServerLifecycleError;

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
    /// Adding or removing the deletion guard's finalizer failed (it names the object).
    #[error(transparent)]
    Finalizer(#[from] WriteError),
    /// The server-lifecycle port failed; it names the object and what it was asked.
    #[error(transparent)]
    ServerLifecycle(#[from] ServerLifecycleError),
}

impl Error {
    /// A Kubernetes API failure about `object`, for `map_err`.
    pub fn kube(object: String) -> impl FnOnce(kube::Error) -> Error {
        move |source| Error::Kube { object, source }
    }
}

impl From<KubeError> for Error {
    fn from(e: KubeError) -> Self {
        Error::Kube {
            object: e.object,
            source: e.source,
        }
    }
}

impl ReconcileError for Error {
    /// The metric label of the error: bounded.
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => label::KUBE,
            Error::Finalizer(_) => label::FINALIZER,
            Error::ServerLifecycle(_) => "server_lifecycle",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn api_error() -> kube::Error {
        kube::Error::LinesCodecMaxLineLengthExceeded
    }

    #[rstest]
    #[case::kube(Error::Kube { object: "NatsCluster nats/demo".into(), source: api_error() }, "kube")]
    #[case::finalizer(Error::Finalizer(WriteError {
        object: "NatsCluster nats/demo".into(),
        finalizer: "f".into(),
        op: controller_kit::finalizer::Op::Remove,
        source: api_error(),
    }), "finalizer")]
    #[case::server_lifecycle(Error::ServerLifecycle(ServerLifecycleError::Failed {
        action: "apply",
        object: "NatsCluster nats/demo".into(),
        reason: "r".into(),
    }), "server_lifecycle")]
    fn every_error_names_its_object_and_knows_its_label(#[case] e: Error, #[case] label: &str) {
        assert_eq!(e.metric_label(), label);
        assert!(e.to_string().contains("NatsCluster nats/demo"), "{e}");
    }
}
