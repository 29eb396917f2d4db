//! The JetStream controller's one error type: a failure to talk to the Kubernetes API, a
//! finalizer write, or a deletion's cleanup on the server (NATS failures of a live resource are
//! conditions instead). Each variant names the object.

use controller_kit::error::{KubeError, ReconcileError, label};
use controller_kit::finalizer::WriteError;
use controller_kit::reconcile::describe;
use kube::Resource;

/// What failed, on which object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API request about `object` failed.
    #[error("{object}: Kubernetes API: {source}")]
    Kube {
        /// The object concerned (kind namespace/name).
        object: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Adding or removing the finalizer failed.
    #[error(transparent)]
    Finalizer(#[from] WriteError),
    /// A server object must be removed but NATS could not be reached or refused: the finalizer
    /// stays.
    #[error("{object}: cleanup on the server: {message}")]
    Cleanup {
        /// The object concerned.
        object: String,
        /// What failed.
        message: String,
    },
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
    /// A failure that holds a deletion (the finalizer's writes, the cleanup) counts as
    /// `finalizer`; a Kubernetes API request as `kube`.
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => label::KUBE,
            Error::Finalizer(_) | Error::Cleanup { .. } => label::FINALIZER,
        }
    }
}

/// The error of a Kubernetes API request about `obj`, for `map_err`.
pub(crate) fn kube_err<K: Resource<DynamicType = ()>>(
    obj: &K,
) -> impl FnOnce(kube::Error) -> Error + '_ {
    move |source| Error::Kube {
        object: describe(obj),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn write_error() -> WriteError {
        WriteError {
            object: "x".into(),
            finalizer: "f".into(),
            op: controller_kit::finalizer::Op::Add,
            source: kube::Error::LinesCodecMaxLineLengthExceeded,
        }
    }

    #[rstest]
    #[case::kube(Error::Kube { object: "x".into(), source: kube::Error::LinesCodecMaxLineLengthExceeded }, "kube")]
    #[case::finalizer(Error::Finalizer(write_error()), "finalizer")]
    #[case::a_cleanup_holds_the_deletion_too(Error::Cleanup { object: "x".into(), message: "m".into() }, "finalizer")]
    fn errors_know_their_metric_label(#[case] e: Error, #[case] label: &str) {
        assert_eq!(e.metric_label(), label);
    }
}
