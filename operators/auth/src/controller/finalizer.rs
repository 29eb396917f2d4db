//! The auth controller's finalizer (one per object it signs for: a deleted object stays until
//! what it waits on is done), and the Events of a held or forced deletion.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Context;
use controller_kit::reconcile::describe;

use super::error::{Error, kube_err};
use super::status::previous_conditions;
use controller_kit::conditions::Decided;

/// Whether the object carries the auth controller's finalizer.
pub(crate) fn has_finalizer<K: Resource>(obj: &K) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == nats_api::auth::FINALIZER))
}

/// Sets the object's finalizers to `finalizers` (a merge patch replaces the list).
async fn set_finalizers<K>(ctx: &Context, obj: &K, finalizers: Vec<String>) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(
        ctx.shared.client.clone(),
        &obj.namespace().unwrap_or_default(),
    );
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": obj.meta().resource_version,
    }});
    api.patch(
        &obj.name_any(),
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .map_err(kube_err(describe(obj)))?;
    Ok(())
}

/// Adds the auth controller's finalizer.
pub(crate) async fn add_finalizer<K>(ctx: &Context, obj: &K) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let mut f = obj.meta().finalizers.clone().unwrap_or_default();
    f.push(nats_api::auth::FINALIZER.to_string());
    set_finalizers(ctx, obj, f).await
}

/// Removes the auth controller's finalizer.
pub(crate) async fn remove_finalizer<K>(ctx: &Context, obj: &K) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let f: Vec<String> = obj
        .meta()
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != nats_api::auth::FINALIZER)
        .collect();
    set_finalizers(ctx, obj, f).await
}

/// A DeletionHeld Warning Event for a held deletion whose Ready condition `cond` is new (the
/// first pass that holds it, or a hold for another reason): not one per retry.
pub(crate) async fn deletion_held<K>(ctx: &Context, obj: &K, cond: &Decided)
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let already = previous_conditions(obj)
        .iter()
        .any(|c| c.type_ == cond.type_ && c.reason == cond.reason && c.message == cond.message);
    if !already {
        ctx.shared
            .events
            .publish(
                obj,
                true,
                nats_api::auth::event::DELETION_HELD,
                cond.message.clone(),
            )
            .await;
    }
}

/// A ForceDeleted Warning Event: the finalizer is released without what it waited for.
pub(crate) async fn force_deleted<K>(ctx: &Context, obj: &K, message: String)
where
    K: Resource<DynamicType = ()>,
{
    tracing::warn!(object = %describe(obj), "{message}");
    ctx.shared
        .events
        .publish(obj, true, nats_api::auth::event::FORCE_DELETED, message)
        .await;
}
