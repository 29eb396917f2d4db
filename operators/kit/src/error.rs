//! The error convention of every controller: one `thiserror` enum per controller, each variant
//! saying what failed on which object ("NatsStream nats/orders: Kubernetes API: …"), and
//! [`ReconcileError::metric_label`] naming it for the failure counter
//! (`nats_operator_reconcile_errors_total{controller, error}`), which the generic error policy
//! (`reconcile::error_policy`) counts under.
//!
//! Outcomes that are not failures (a refusal, a missing reference, a server that cannot be
//! reached) are no errors: a pass reports them as conditions (`blocked::Blocked`).

/// A controller's reconcile error.
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// The `error` label of the failure counter: one of [`label`] or the controller's own.
    fn metric_label(&self) -> &'static str;
}

/// The labels every controller shares.
pub mod label {
    /// A Kubernetes API request failed.
    pub const KUBE: &str = "kube";
    /// Something holding a deletion failed: a finalizer write, or the cleanup's own work.
    pub const FINALIZER: &str = "finalizer";
}

/// A Kubernetes API request about an object failed: what every controller's error is built from
/// where the kit makes the request (a fresh read of the object).
#[derive(Debug, thiserror::Error)]
#[error("{object}: Kubernetes API: {source}")]
pub struct KubeError {
    /// The object (kind namespace/name).
    pub object: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

impl KubeError {
    /// The error of a request about `obj`, for `map_err`.
    pub fn of<K: kube::Resource<DynamicType = ()>>(obj: &K) -> impl FnOnce(kube::Error) -> Self {
        let object = crate::object::describe(obj);
        move |source| KubeError { object, source }
    }
}

impl ReconcileError for KubeError {
    fn metric_label(&self) -> &'static str {
        label::KUBE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kube_error_names_the_object_and_counts_as_kube() {
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        cm.metadata.name = Some("a".into());
        cm.metadata.namespace = Some("nats".into());
        let e = KubeError::of(&cm)(kube::Error::LinesCodecMaxLineLengthExceeded);
        assert_eq!(e.metric_label(), "kube");
        assert!(
            e.to_string()
                .starts_with("ConfigMap nats/a: Kubernetes API: "),
            "{e}"
        );
    }
}
