//! The finalizer split: a reconcile is either the apply path (the object is live; the finalizer is
//! added first) or the cleanup path (the object is being deleted; the finalizer is removed once
//! cleanup succeeds). Nothing else touches finalizers. Built on kube-runtime's helper.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use kube::api::Api;
use kube::core::Resource;
use kube::runtime::controller::Action;
pub use kube::runtime::finalizer::{Error, Event};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Runs `apply` or `cleanup` for `obj` under the finalizer `name`.
pub async fn run<K, E, A, AF, C, CF>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    apply: A,
    cleanup: C,
) -> Result<Action, Error<E>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    E: std::error::Error + 'static,
    A: FnOnce(Arc<K>) -> AF,
    AF: Future<Output = Result<Action, E>>,
    C: FnOnce(Arc<K>) -> CF,
    CF: Future<Output = Result<Action, E>>,
{
    kube::runtime::finalizer::finalizer(api, name, obj, |event| async move {
        match event {
            Event::Apply(o) => apply(o).await,
            Event::Cleanup(o) => cleanup(o).await,
        }
    })
    .await
}

/// The error inside a finalizer error: what apply or cleanup failed with, or the finalizer patch.
pub fn describe<E: std::error::Error>(e: &Error<E>) -> String {
    match e {
        Error::ApplyFailed(inner) | Error::CleanupFailed(inner) => inner.to_string(),
        other => other.to_string(),
    }
}
