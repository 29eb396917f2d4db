//! The one error of the controller: what failed on which object. A refusal or a missing
//! reference is not an error (it is a condition and a requeue); only a failure to reach the
//! Kubernetes API is, or the index stopping, and both are retried with backoff.

use kube::{Resource, ResourceExt};

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
    /// The watch feeding the index's store of `kind` ended before the store was filled.
    #[error("the index of {kind} stopped before its first list")]
    IndexStopped {
        /// The kind whose store never filled.
        kind: &'static str,
    },
}

impl Error {
    /// The metric label of the error (a bounded set: `kube`, `index`).
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::IndexStopped { .. } => "index",
        }
    }
}

/// "Kind namespace/name" of an object, for errors and logs.
pub(crate) fn describe<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{} {}/{}",
        K::kind(&()),
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

/// Maps a Kubernetes API error about `object` into [`Error::Kube`].
pub(crate) fn kube_err(object: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let object = object.into();
    move |source| Error::Kube { object, source }
}
