//! One tracing span per reconcile, naming the object, so every log line of a pass is attributed,
//! and the log line of what a Controller's run yields besides a reconcile.

use kube::runtime::controller::Error as RunError;

/// The span of one reconcile of `kind` `namespace`/`name`.
pub fn reconcile_span(kind: &str, namespace: &str, name: &str) -> tracing::Span {
    tracing::info_span!("reconcile", kind, namespace, name)
}

/// How loudly a Controller's run result is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loudness {
    /// Nothing to tell: a pass that ended well.
    Quiet,
    /// Told at debug: a failed pass (its error policy already warned) or a trigger for an object
    /// no longer in the store.
    Debug,
    /// Told at warn: a watch or the runner failed. While a watch fails no change of its kind
    /// reaches the controller, so it must be visible at the default level.
    Warn,
}

/// The loudness of one item of `Controller::run`.
pub fn loudness<T, R, Q>(result: &Result<T, RunError<R, Q>>) -> Loudness {
    match result {
        Ok(_) => Loudness::Quiet,
        Err(RunError::ReconcilerFailed(..) | RunError::ObjectNotFound(_)) => Loudness::Debug,
        Err(RunError::QueueError(_) | RunError::RunnerError(_)) => Loudness::Warn,
    }
}

/// Logs one item of `Controller::run` of `kind` at its [`loudness`].
pub fn run_result<T, R, Q>(kind: &str, result: &Result<T, RunError<R, Q>>)
where
    R: std::error::Error,
    Q: std::error::Error,
{
    match (loudness(result), result) {
        (Loudness::Warn, Err(e)) => {
            tracing::warn!(controller = kind, error = %e, "watching or running the controller failed")
        }
        (Loudness::Debug, Err(e)) => {
            tracing::debug!(controller = kind, error = %e, "controller event")
        }
        _ => {}
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kube::runtime::reflector::ObjectRef;
    use kube::runtime::watcher;

    /// One item of `Controller::run`, as the tests of this crate build them.
    pub(crate) type Item = Result<(), RunError<std::io::Error, watcher::Error>>;

    /// The object a test item names.
    pub(crate) fn obj() -> Box<ObjectRef<kube::core::DynamicObject>> {
        Box::new(ObjectRef::new_with(
            "s1",
            kube::core::ApiResource {
                group: "jetstream.nats.mikluko.io".into(),
                version: "v1beta1".into(),
                api_version: "jetstream.nats.mikluko.io/v1beta1".into(),
                kind: "NatsStream".into(),
                plural: "natsstreams".into(),
            },
        ))
    }

    #[test]
    fn a_failed_watch_is_told_louder_than_a_failed_pass() {
        let cases: Vec<(&str, Item, Loudness)> = vec![
            ("a pass that ended well", Ok(()), Loudness::Quiet),
            (
                "a failed pass, already warned by the error policy",
                Err(RunError::ReconcilerFailed(
                    std::io::Error::other("x"),
                    obj(),
                )),
                Loudness::Debug,
            ),
            (
                "a trigger for an object gone from the store",
                Err(RunError::ObjectNotFound(obj())),
                Loudness::Debug,
            ),
            (
                "a watch that failed",
                Err(RunError::QueueError(watcher::Error::NoResourceVersion)),
                Loudness::Warn,
            ),
        ];
        for (what, item, want) in cases {
            assert_eq!(loudness(&item), want, "{what}");
        }
    }
}
