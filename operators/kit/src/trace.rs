//! One tracing span per reconcile, naming the object, so every log line of a pass is attributed.

/// The span of one reconcile of `kind` `namespace`/`name`.
pub fn reconcile_span(kind: &str, namespace: &str, name: &str) -> tracing::Span {
    tracing::info_span!("reconcile", kind, namespace, name)
}
