//! The finalizer path, one for every controller: whether an object wants this controller's
//! finalizer ([`reconcile`]'s `wants`), adding it before the apply path runs, and on deletion a
//! cleanup that says [`Cleanup::Done`] (the finalizer is removed) or [`Cleanup::Wait`] (it stays;
//! the pass looks again after a while). Nothing else touches finalizers.
//!
//! Every write is a JSON patch guarded by a `test` of what it was decided from, so a finalizer
//! another controller added or removed meanwhile is never dropped: the write fails (HTTP 422),
//! the pass is retried with the fresh object. [`step`] is the decision, [`add_ops`] and
//! [`remove_ops`] the patches, all pure.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::core::Resource;
use kube::runtime::controller::Action;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::ReconcileError;
use crate::object::describe;

/// What a deletion's cleanup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    /// Done: the finalizer is removed and the deletion goes on.
    Done,
    /// Not yet: the finalizer stays and the object is looked at again `after`; `reason` says
    /// what the deletion waits for (logged; the cleanup writes its own condition).
    Wait {
        /// When to look again.
        after: Duration,
        /// What the deletion waits for.
        reason: String,
    },
}

/// What one pass does about the finalizer, from the object as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Live, and the finalizer is as it should be: the apply path.
    Apply,
    /// Live and wants the finalizer it lacks: add it, then the apply path.
    AddThenApply,
    /// Live and carries the finalizer it no longer wants: remove it, then the apply path.
    RemoveThenApply,
    /// Being deleted with the finalizer: the cleanup, then its removal once done.
    Cleanup,
    /// Being deleted without the finalizer: nothing of this controller's holds it.
    Nothing,
}

/// The step for an object that `has` the finalizer or not, `wants` it or not, and is being
/// deleted or not. A deletion runs the cleanup whenever the finalizer is there, wanted or not.
pub fn step(has: bool, wants: bool, deleting: bool) -> Step {
    match (deleting, has, wants) {
        (true, true, _) => Step::Cleanup,
        (true, false, _) => Step::Nothing,
        (false, false, true) => Step::AddThenApply,
        (false, true, false) => Step::RemoveThenApply,
        (false, _, _) => Step::Apply,
    }
}

/// Whether `obj` carries the finalizer `name`.
pub fn has<K: Resource>(obj: &K, name: &str) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == name))
}

/// The JSON patch adding `name` to `finalizers` (the list as read): it applies only while the
/// list is still exactly that, so a finalizer added meanwhile is neither lost nor doubled.
pub fn add_ops(finalizers: &[String], name: &str) -> Value {
    if finalizers.is_empty() {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [name]},
        ])
    } else {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
            {"op": "add", "path": "/metadata/finalizers/-", "value": name},
        ])
    }
}

/// The JSON patch removing `name` from `finalizers` (the list as read), or None when it is not
/// there: it removes the entry at its index only while that entry is still `name`.
pub fn remove_ops(finalizers: &[String], name: &str) -> Option<Value> {
    let i = finalizers.iter().position(|f| f == name)?;
    let path = format!("/metadata/finalizers/{i}");
    Some(json!([
        {"op": "test", "path": path, "value": name},
        {"op": "remove", "path": path},
    ]))
}

/// Which finalizer write failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Adding the finalizer.
    Add,
    /// Removing the finalizer.
    Remove,
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Add => "adding",
            Op::Remove => "removing",
        })
    }
}

/// Adding or removing the finalizer of an object failed (a 422 when the object's finalizers
/// changed since it was read: the next pass works from the fresh list).
#[derive(Debug, thiserror::Error)]
#[error("{object}: {op} finalizer {finalizer}: {source}")]
pub struct WriteError {
    /// The object (kind namespace/name).
    pub object: String,
    /// The finalizer.
    pub finalizer: String,
    /// Adding or removing.
    pub op: Op,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

impl ReconcileError for WriteError {
    fn metric_label(&self) -> &'static str {
        crate::error::label::FINALIZER
    }
}

async fn patch<K>(api: &Api<K>, obj: &K, name: &str, op: Op, ops: Value) -> Result<K, WriteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let fail = |source| WriteError {
        object: describe(obj),
        finalizer: name.to_string(),
        op,
        source,
    };
    let ops = serde_json::from_value(ops).map_err(|e| fail(kube::Error::SerdeError(e)))?;
    let object = obj.meta().name.clone().unwrap_or_default();
    api.patch(&object, &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .map_err(fail)
}

/// Adds the finalizer `name` to `obj`; returns the object as written.
pub async fn add<K>(api: &Api<K>, obj: &K, name: &str) -> Result<K, WriteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let finalizers = obj.meta().finalizers.clone().unwrap_or_default();
    patch(api, obj, name, Op::Add, add_ops(&finalizers, name)).await
}

/// Removes the finalizer `name` from `obj` (nothing when it has none); returns the object as
/// written, which the apiserver may already have deleted.
pub async fn remove<K>(api: &Api<K>, obj: &K, name: &str) -> Result<Option<K>, WriteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let finalizers = obj.meta().finalizers.clone().unwrap_or_default();
    match remove_ops(&finalizers, name) {
        Some(ops) => patch(api, obj, name, Op::Remove, ops).await.map(Some),
        None => Ok(None),
    }
}

/// One pass under the finalizer `name`: the apply path for a live object (the finalizer added
/// first when it `wants` one, removed first when it does not), the cleanup for one being
/// deleted. [`Cleanup::Done`] removes the finalizer and waits for the next change (the
/// deletion); [`Cleanup::Wait`] keeps it and looks again after its wait.
pub async fn reconcile<K, E, A, AF, C, CF>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    wants: bool,
    apply: A,
    cleanup: C,
) -> Result<Action, E>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    E: From<WriteError>,
    A: FnOnce(Arc<K>) -> AF,
    AF: Future<Output = Result<Action, E>>,
    C: FnOnce(Arc<K>) -> CF,
    CF: Future<Output = Result<Cleanup, E>>,
{
    let deleting = obj.meta().deletion_timestamp.is_some();
    match step(has(&*obj, name), wants, deleting) {
        Step::Apply => apply(obj).await,
        Step::AddThenApply => {
            let written = add(api, &obj, name).await?;
            apply(Arc::new(written)).await
        }
        Step::RemoveThenApply => match remove(api, &obj, name).await? {
            Some(written) => apply(Arc::new(written)).await,
            None => apply(obj).await,
        },
        Step::Cleanup => match cleanup(obj.clone()).await? {
            Cleanup::Done => {
                remove(api, &obj, name).await?;
                Ok(Action::await_change())
            }
            Cleanup::Wait { after, reason } => {
                tracing::info!(object = %describe(&*obj), ?after, "deletion waits: {reason}");
                Ok(Action::requeue(after))
            }
        },
        Step::Nothing => Ok(Action::await_change()),
    }
}

#[cfg(test)]
mod tests;
