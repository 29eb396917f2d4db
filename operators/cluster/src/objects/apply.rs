//! Writing the rendered objects: server-side apply under the cluster controller's one field
//! manager, and deletion, both only of objects the NatsCluster controls. An existing object of a
//! rendered name that the NatsCluster does not control is never written or deleted: the apply
//! names it as `Kind/name` (design §4.1). The reconciler writes its own Secrets with these, the
//! Kubernetes server lifecycle everything else it renders.

use std::fmt::Debug;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::lifecycle::LifecycleError;
use crate::refusals::controlled_by;

/// The field manager of every object the cluster controller writes.
pub const FIELD_MANAGER: &str = "cluster-controller";

/// The port's error for a failed request `action` on `kind` `name`.
pub fn failed(action: &'static str, kind: &str, name: &str, e: kube::Error) -> LifecycleError {
    LifecycleError::Failed {
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
) -> Result<Option<String>, LifecycleError>
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

/// Deletes the object `name` when it exists and `owner` controls it; what it does not control is
/// left alone (it was never ours).
pub async fn delete_owned<K>(
    api: &Api<K>,
    kind: &str,
    owner_uid: &str,
    name: &str,
) -> Result<(), LifecycleError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let existing = api
        .get_opt(name)
        .await
        .map_err(|e| failed("read", kind, name, e))?;
    if existing.is_some_and(|o| controlled_by(o.owner_references(), owner_uid)) {
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(failed("delete", kind, name, e)),
        }
    }
    Ok(())
}
