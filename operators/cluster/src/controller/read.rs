//! Reads from the Kubernetes API for one pass: an object, a Secret and the keys and files in it,
//! and whether a NatsReferenceGrant admits a reference into another namespace (never one
//! outside `--watch-namespaces`). An object that
//! does not exist is `None`; only a failure to reach the API is an [`Error`].

use std::collections::BTreeMap;

use controller_kit::grants;
use controller_kit::scope::Namespaces;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use super::error::Error;

const CLUSTER_GROUP: &str = nats_api::cluster::GROUP;
const NATS_GROUP: &str = nats_api::nats::GROUP;

/// Reads Secret `name` in `namespace`, `None` when absent.
pub async fn secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Secret>, Error> {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(Error::kube(format!("Secret {namespace}/{name}")))
}

/// Reads the `kind` `name` in `ns`, `None` when absent.
pub async fn get_opt<K>(
    client: &kube::Client,
    ns: &str,
    name: &str,
    kind: &str,
) -> Result<Option<K>, Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(Error::kube(format!("{kind} {ns}/{name}")))
}

/// Whether a NatsCluster in `from_ns` may read `kind` `name` in `to_ns`.
pub async fn admitted(
    client: &kube::Client,
    namespaces: &Namespaces,
    from_ns: &str,
    kind: &str,
    to_ns: &str,
    name: &str,
) -> Result<bool, Error> {
    grants::admitted(
        client,
        namespaces,
        grants::From {
            group: CLUSTER_GROUP,
            kind: "NatsCluster",
            namespace: from_ns,
        },
        grants::To {
            group: NATS_GROUP,
            kind,
            namespace: to_ns,
            name,
        },
    )
    .await
    .map_err(Error::kube(format!("NatsReferenceGrants in {to_ns}")))
}

/// The bytes under `key` of a Secret.
pub fn secret_key(secret: &Secret, key: &str) -> Option<Vec<u8>> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|s| s.clone().into_bytes())
        })
}

/// The keys a listener's Secret holds, `None` when it does not exist.
pub fn keys_of(secret: Option<&Secret>) -> Option<Vec<String>> {
    secret.map(|s| {
        let mut keys: Vec<String> = s
            .data
            .as_ref()
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default();
        keys.extend(
            s.string_data
                .as_ref()
                .map(|d| d.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default(),
        );
        keys
    })
}

/// The certificate files of a listener's Secret, by file name (`tls.crt`, `tls.key`, `ca.crt`).
pub fn tls_files(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    ["tls.crt", "tls.key", "ca.crt"]
        .into_iter()
        .filter_map(|k| Some((k.to_string(), secret_key(secret, k)?)))
        .collect()
}
