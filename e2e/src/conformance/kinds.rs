//! The API of a kind a story's document names by its apiVersion and kind, in one namespace: what
//! the run's actions, its waits and its connections read objects through.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

/// The namespaced API of `kind` in `api_version` (`group/version`, or `version` for the core group).
pub(super) fn api_of(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    namespace: &str,
) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}
