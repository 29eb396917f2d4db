//! Writing the rendered objects: server-side apply under the cluster controller's one field
//! manager, and deletion, both only of objects the NatsCluster controls. An existing object of a
//! rendered name that the NatsCluster does not control is never written or deleted: the apply
//! names it as `Kind/name` (design §4.1). Every delete is of one object by name, with the uid
//! and resourceVersion it was judged at as preconditions; none is by label selector. The reconciler writes its own Secrets with these, the
//! Kubernetes server lifecycle everything else it renders.

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::refusals::controlled_by;
use crate::server_lifecycle::ServerLifecycleError;

/// The field manager of every object the cluster controller writes.
pub const FIELD_MANAGER: &str = "cluster-controller";

/// The port's error for a failed request `action` on `kind` `name`.
pub fn failed(
    action: &'static str,
    kind: &str,
    name: &str,
    e: kube::Error,
) -> ServerLifecycleError {
    ServerLifecycleError::Failed {
        action,
        object: format!("{kind}/{name}"),
        reason: e.to_string(),
    }
}

/// Writes `obj` by server-side apply unless an object of its name exists that `owner` does not
/// control; then returns `Some("Kind/name")` and leaves it as it is.
pub async fn apply_owned<K>(
    api: &Api<K>,
    kind: &str,
    owner_uid: &str,
    obj: &K,
) -> Result<Option<String>, ServerLifecycleError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|e| failed("read", kind, &name, e))?;
    if let Some(existing) = existing
        && !controlled_by(existing.owner_references(), owner_uid)
    {
        return Ok(Some(format!("{kind}/{name}")));
    }
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map_err(|e| failed("apply", kind, &name, e))?;
    Ok(None)
}

/// How often a delete whose object changed between the read and the delete is judged again.
const DELETE_ATTEMPTS: usize = 3;

/// Deletes the object `name` when it exists and `owner` controls it; what it does not control is
/// left alone (it was never ours). The delete carries the uid and resourceVersion the object was
/// judged at as preconditions ([`delete_as_read`]): one replaced or changed in between (its
/// owner reference taken away, say) is read and judged again, never deleted unseen.
pub async fn delete_owned<K>(
    api: &Api<K>,
    kind: &str,
    owner_uid: &str,
    name: &str,
) -> Result<(), ServerLifecycleError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    for _ in 0..DELETE_ATTEMPTS {
        let existing = api
            .get_opt(name)
            .await
            .map_err(|e| failed("read", kind, name, e))?;
        let Some(existing) = existing else {
            return Ok(());
        };
        if !controlled_by(existing.owner_references(), owner_uid)
            || existing.meta().deletion_timestamp.is_some()
        {
            return Ok(());
        }
        if delete_as_read(api, kind, existing.meta()).await? {
            return Ok(());
        }
    }
    Err(ServerLifecycleError::Failed {
        action: "delete",
        object: format!("{kind}/{name}"),
        reason: format!("it changed between each of {DELETE_ATTEMPTS} reads and its delete"),
    })
}

/// Deletes the object `meta` describes only as it was read: its uid and resourceVersion are the
/// delete's preconditions. `Ok(true)` once deleted (or gone), `Ok(false)` when it was replaced
/// or changed since (409 Conflict): nothing was deleted, and it is to be judged again.
pub async fn delete_as_read<K>(
    api: &Api<K>,
    kind: &str,
    meta: &ObjectMeta,
) -> Result<bool, ServerLifecycleError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let name = meta.name.as_deref().unwrap_or_default();
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(failed("delete", kind, name, e)),
    }
}
