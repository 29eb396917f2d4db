//! A lent pair made as it was lent: what a test wrote into etcd undone, key by key, against the
//! baseline read once the pair booted. Keys the test made are deleted, keys of the baseline it
//! changed or deleted are put back as they were, and the keys the server itself keeps writing
//! ([`servers_own`]) are left to it. Then the server's own caches are waited for, and etcd read
//! again: a pair whose reset did not hold is not lent again.
//!
//! etcd is read and written through its JSON gateway (`/v3/kv/*` on the client URL, keys and
//! values base64), with the HTTP client the sim already has: an etcd client crate would bring a
//! gRPC stack into the sim for three calls.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, ListParams, VersionMatch};
use serde_json::{Value, json};

use crate::apiserver::ApiServerError;

/// Every key the server stores lies under it.
const PREFIX: &str = "/registry/";
/// The end of [`PREFIX`]'s range (`/registry/` with its last byte raised).
const PREFIX_END: &str = "/registry0";
/// etcd's default limit of operations in one transaction (`--max-txn-ops`).
const TXN_OPS: usize = 128;

/// One stored key: the revision it was last written at and its value (base64, as etcd's
/// gateway gives it: put back as read). A key is unchanged while its value is: a key put back
/// has a new revision, and the server's stored objects carry no revision of their own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) mod_revision: i64,
    pub(crate) value: String,
}

/// etcd's keys under [`PREFIX`] at one revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) revision: i64,
    pub(crate) keys: BTreeMap<String, Stored>,
}

/// What a reset writes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Keys the test made.
    pub(crate) delete: Vec<String>,
    /// Keys of the baseline the test changed or deleted, with their baseline value.
    pub(crate) restore: Vec<(String, String)>,
}

impl Plan {
    pub(crate) fn is_empty(&self) -> bool {
        self.delete.is_empty() && self.restore.is_empty()
    }
}

/// Keys the server writes on its own schedule, whoever holds it: its lease as the one master
/// (a TTL renewed every 10 s), the `kubernetes` Service's endpoints it reconciles, and the
/// APIServices its autoregister controller keeps in step with the CRDs (a CRD the reset
/// deletes takes its APIService with it).
pub(crate) fn servers_own(key: &str) -> bool {
    const OWN: &[&str] = &[
        "/registry/masterleases/",
        "/registry/services/endpoints/default/kubernetes",
        "/registry/endpointslices/default/kubernetes",
        "/registry/apiregistration.k8s.io/apiservices/",
        "/registry/leases/kube-system/kube-apiserver-",
    ];
    OWN.iter().any(|own| key.starts_with(own))
}

/// The reset that makes `now` the `baseline` again ([`servers_own`] keys aside).
pub(crate) fn plan(baseline: &Snapshot, now: &Snapshot) -> Plan {
    let delete = now
        .keys
        .keys()
        .filter(|k| !servers_own(k) && !baseline.keys.contains_key(*k))
        .cloned()
        .collect();
    let restore = baseline
        .keys
        .iter()
        .filter(|(k, _)| !servers_own(k))
        .filter(|(k, was)| now.keys.get(*k).map(|s| &s.value) != Some(&was.value))
        .map(|(k, was)| (k.clone(), was.value.clone()))
        .collect();
    Plan { delete, restore }
}

/// etcd at `url` (its client URL), read and written through its JSON gateway.
pub(crate) struct Etcd {
    url: String,
    http: reqwest::Client,
}

impl Etcd {
    pub(crate) fn new(url: &str) -> Self {
        Etcd {
            url: url.to_owned(),
            http: reqwest::Client::new(),
        }
    }

    fn failed(&self, what: impl std::fmt::Display) -> ApiServerError {
        ApiServerError::Reset {
            url: self.url.clone(),
            what: what.to_string(),
        }
    }

    async fn call(&self, path: &str, body: Value) -> Result<Value, ApiServerError> {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .map_err(|e| self.failed(format!("{path}: {e}")))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| self.failed(format!("{path}: {e}")))?;
        if !status.is_success() {
            return Err(self.failed(format!("{path}: {status}: {text}")));
        }
        serde_json::from_str(&text).map_err(|e| self.failed(format!("{path}: {e}: {text}")))
    }

    /// Every key under [`PREFIX`] and the revision read at.
    pub(crate) async fn snapshot(&self) -> Result<Snapshot, ApiServerError> {
        let body = json!({"key": B64.encode(PREFIX), "range_end": B64.encode(PREFIX_END)});
        let read = self.call("/v3/kv/range", body).await?;
        let revision = number(&read["header"]["revision"]);
        let mut keys = BTreeMap::new();
        for kv in read["kvs"].as_array().into_iter().flatten() {
            let key = B64
                .decode(kv["key"].as_str().unwrap_or_default())
                .map_err(|e| self.failed(format!("a key's base64: {e}")))?;
            keys.insert(
                String::from_utf8_lossy(&key).into_owned(),
                Stored {
                    mod_revision: number(&kv["mod_revision"]),
                    value: kv["value"].as_str().unwrap_or_default().to_owned(),
                },
            );
        }
        Ok(Snapshot { revision, keys })
    }

    /// Writes `plan`, [`TXN_OPS`] operations a transaction; the revision after the last.
    pub(crate) async fn write(&self, plan: &Plan) -> Result<i64, ApiServerError> {
        let ops: Vec<Value> = plan
            .delete
            .iter()
            .map(|k| json!({"request_delete_range": {"key": B64.encode(k)}}))
            .chain(
                plan.restore
                    .iter()
                    .map(|(k, v)| json!({"request_put": {"key": B64.encode(k), "value": v}})),
            )
            .collect();
        let mut revision = 0;
        for chunk in ops.chunks(TXN_OPS) {
            let done = self.call("/v3/kv/txn", json!({"success": chunk})).await?;
            revision = number(&done["header"]["revision"]);
        }
        Ok(revision)
    }
}

/// etcd's gateway writes 64-bit numbers as strings.
fn number(v: &Value) -> i64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_i64())
        .unwrap_or(0)
}

/// Waits until the server's watch caches of namespaces, webhook configurations and role
/// bindings have seen etcd's `revision` (a list at that revision is answered from the cache once
/// it has; the admission webhooks and the RBAC authorizer read through those caches): what the
/// next test does first lands in namespaces, a deleted judge's webhook must be gone, and a
/// binding the last test made must not let the next one's ServiceAccount do what it may not.
pub(crate) async fn caught_up(client: &kube::Client, revision: i64) -> Result<(), kube::Error> {
    let at = ListParams {
        resource_version: Some(revision.to_string()),
        version_match: Some(VersionMatch::NotOlderThan),
        limit: Some(1),
        ..ListParams::default()
    };
    Api::<Namespace>::all(client.clone()).list(&at).await?;
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&at)
        .await?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .list(&at)
        .await?;
    Api::<RoleBinding>::all(client.clone()).list(&at).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(keys: &[(&str, i64, &str)]) -> Snapshot {
        Snapshot {
            revision: keys.iter().map(|k| k.1).max().unwrap_or(0),
            keys: keys
                .iter()
                .map(|(k, rev, v)| {
                    (
                        (*k).to_owned(),
                        Stored {
                            mod_revision: *rev,
                            value: (*v).to_owned(),
                        },
                    )
                })
                .collect(),
        }
    }

    const NS: &str = "/registry/namespaces/default";
    const RANGE: &str = "/registry/ranges/serviceips";
    const LEASE: &str = "/registry/masterleases/127.0.0.1";
    const APISVC: &str = "/registry/apiregistration.k8s.io/apiservices/v1.apps";

    #[test]
    fn a_reset_plan_undoes_what_the_test_wrote_and_leaves_the_servers_own() {
        let baseline = snap(&[
            (NS, 5, "ns"),
            (RANGE, 6, "r0"),
            (LEASE, 7, "l0"),
            (APISVC, 4, "a"),
        ]);
        #[rustfmt::skip]
        let cases: &[(&str, Snapshot, Plan)] = &[
            ("untouched", baseline.clone(), Plan::default()),
            ("a key made is deleted",
                snap(&[(NS, 5, "ns"), (RANGE, 6, "r0"), (LEASE, 7, "l0"), (APISVC, 4, "a"),
                    ("/registry/secrets/t/s", 9, "x")]),
                Plan { delete: vec!["/registry/secrets/t/s".into()], restore: vec![] }),
            ("a key changed is put back as it was",
                snap(&[(NS, 5, "ns"), (RANGE, 12, "r1"), (LEASE, 7, "l0"), (APISVC, 4, "a")]),
                Plan { delete: vec![], restore: vec![(RANGE.into(), "r0".into())] }),
            ("a key put back as it was is unchanged, at its new revision",
                snap(&[(NS, 5, "ns"), (RANGE, 14, "r0"), (LEASE, 7, "l0"), (APISVC, 4, "a")]),
                Plan::default()),
            ("a key deleted is put back",
                snap(&[(RANGE, 6, "r0"), (LEASE, 7, "l0"), (APISVC, 4, "a")]),
                Plan { delete: vec![], restore: vec![(NS.into(), "ns".into())] }),
            ("the server's own lease renewed, an APIService added: left to it",
                snap(&[(NS, 5, "ns"), (RANGE, 6, "r0"), (LEASE, 30, "l9"), (APISVC, 4, "a"),
                    ("/registry/apiregistration.k8s.io/apiservices/v1.x.io", 31, "b")]),
                Plan::default()),
            ("the server's own lease gone: left to it",
                snap(&[(NS, 5, "ns"), (RANGE, 6, "r0"), (APISVC, 4, "a")]),
                Plan::default()),
        ];
        for (name, now, want) in cases {
            assert_eq!(&plan(&baseline, now), want, "{name}");
        }
    }

    #[test]
    fn the_servers_own_keys_are_its_lease_endpoints_and_apiservices_only() {
        #[rustfmt::skip]
        let cases = [
            ("/registry/masterleases/127.0.0.1", true),
            ("/registry/services/endpoints/default/kubernetes", true),
            ("/registry/endpointslices/default/kubernetes", true),
            ("/registry/apiregistration.k8s.io/apiservices/v1.", true),
            ("/registry/services/endpoints/default/other", false),
            ("/registry/services/specs/default/kubernetes", false),
            ("/registry/namespaces/kube-system", false),
            ("/registry/leases/kube-system/nats-cluster-controller", false),
            ("/registry/admissionregistration.k8s.io/validatingwebhookconfigurations/j", false),
        ];
        for (key, own) in cases {
            assert_eq!(servers_own(key), own, "{key}");
        }
    }
}
