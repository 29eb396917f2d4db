//! Status written with server-side apply on the status subresource, under one field manager per
//! controller, so the controller owns exactly the status fields it writes.

use kube::api::{Api, Patch, PatchParams};
use kube::core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

/// Applies `status` to the status subresource of `name` as `field_manager` (forced: the
/// controller is the only writer of status).
pub async fn apply<K, S>(
    api: &Api<K>,
    name: &str,
    field_manager: &str,
    status: &S,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    apply_status(api, name, None, field_manager, status).await
}

/// Applies `status` as [`apply`] does, only while the object is still at `resource_version` (the
/// one the status was judged from): a pass that read the object before someone else rewrote its
/// status (a lost status, a restore) must not write back what it read. A 409 says it changed.
pub async fn apply_at<K, S>(
    api: &Api<K>,
    name: &str,
    resource_version: &str,
    field_manager: &str,
    status: &S,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    apply_status(api, name, Some(resource_version), field_manager, status).await
}

/// The status apply of [`apply`] and [`apply_at`]: with a resourceVersion, a precondition.
async fn apply_status<K, S>(
    api: &Api<K>,
    name: &str,
    resource_version: Option<&str>,
    field_manager: &str,
    status: &S,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let mut body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    if let Some(rv) = resource_version {
        body["metadata"] = json!({ "resourceVersion": rv });
    }
    api.patch_status(
        name,
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(&body),
    )
    .await
}

/// Applies a partial `spec` (Adopt and late-initialization write the server's config into spec).
pub async fn apply_spec<K, S>(
    api: &Api<K>,
    name: &str,
    field_manager: &str,
    spec: &S,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "spec": spec,
    });
    api.patch(
        name,
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(&body),
    )
    .await
}
