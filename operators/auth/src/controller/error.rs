//! The one error of the auth controller: what failed on which object, each variant with its
//! metric label. A refusal or a missing reference is not an error (it is a condition and a
//! requeue); only a failure to reach the Kubernetes API is, a finalizer write, or the index
//! stopping, and each is retried with backoff by the kit's error policy.

use controller_kit::error::{KubeError, ReconcileError, label};
use controller_kit::finalizer::WriteError;

/// A failure of a pass (refusals and NATS failures become conditions).
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
    /// Adding or removing the auth controller's finalizer failed.
    #[error(transparent)]
    Finalizer(#[from] WriteError),
    /// The watch feeding the index's store of `kind` ended before the store was filled.
    #[error("the index of {kind} stopped before its first list")]
    IndexStopped {
        /// The kind whose store never filled.
        kind: &'static str,
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
    /// A bounded set: `kube`, `finalizer`, `index`.
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => label::KUBE,
            Error::Finalizer(_) => label::FINALIZER,
            Error::IndexStopped { .. } => "index",
        }
    }
}

/// Maps a Kubernetes API error about `object` (kind namespace/name) into [`Error::Kube`].
pub(crate) fn kube_err(object: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let object = object.into();
    move |source| Error::Kube { object, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn api_error() -> kube::Error {
        kube::Error::LinesCodecMaxLineLengthExceeded
    }

    #[rstest]
    #[case::a_kubernetes_request(kube_err("NatsUser nats/u")(api_error()), "kube")]
    #[case::a_finalizer_write(Error::Finalizer(WriteError {
        object: "NatsUser nats/u".into(),
        finalizer: nats_api::auth::FINALIZER.into(),
        op: controller_kit::finalizer::Op::Remove,
        source: api_error(),
    }), "finalizer")]
    #[case::the_index(Error::IndexStopped { kind: "NatsUser" }, "index")]
    fn each_error_names_the_object_and_knows_its_metric_label(
        #[case] e: Error,
        #[case] label: &str,
    ) {
        assert_eq!(e.metric_label(), label);
        assert!(e.to_string().contains("NatsUser"), "{e}");
    }
}
