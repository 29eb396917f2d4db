//! Gathering what a NatsCluster's servers are rendered from: its trust roots (NatsOperatorTrust),
//! the accounts it preloads (NatsAccountTrusts), its leaf remotes (NatsConnections a grant
//! admits, and their Secrets), and the certificates its listeners mount.

use std::collections::BTreeMap;

use controller_kit::grants;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use nats_api::cluster::{NatsCluster, reason};
use nats_api::common::{DEFAULT_CA_KEY, DEFAULT_CREDS_KEY, ObjectReference};
use nats_api::nats::{NatsAccountTrust, NatsConnection, NatsOperatorTrust};
use nats_claims::Account;

use super::Error;
use crate::conditions::leafnodes::LeafRemoteView;
use crate::objects::leaf_remotes::LeafRemoteFiles;
use crate::plan::{ResolvedLeafRemote, ResolvedTrust};
use crate::refusals::{self, Hold, Refusal};

const CLUSTER_GROUP: &str = nats_api::cluster::GROUP;
const NATS_GROUP: &str = nats_api::nats::GROUP;

/// Everything gathered for one pass.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub trust: Option<ResolvedTrust>,
    pub account_preloads: Vec<(String, String)>,
    /// NatsAccountTrusts preloading a literal JWT (named for the leaf preload refusal).
    pub literal_preloads: Vec<String>,
    pub leaf_remotes: Vec<ResolvedLeafRemote>,
    pub leaf_files: Vec<LeafRemoteFiles>,
    pub leaf_views: Vec<LeafRemoteView>,
    /// What holds the servers (the first one is reported).
    pub holds: Vec<Refusal>,
}

fn hold(reason: &'static str, hold: Hold, message: String) -> Refusal {
    Refusal {
        reason,
        message,
        hold,
    }
}

/// Reads Secret `name` in `namespace`, `None` when absent.
pub async fn secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Secret>, Error> {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|source| Error::Kube {
            object: format!("Secret {namespace}/{name}"),
            source,
        })
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

/// Whether a NatsCluster in `from_ns` may read `kind` `name` in `to_ns`.
async fn admitted(
    client: &kube::Client,
    from_ns: &str,
    kind: &str,
    to_ns: &str,
    name: &str,
) -> Result<bool, Error> {
    grants::admitted(
        client,
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
    .map_err(|source| Error::Kube {
        object: format!("NatsReferenceGrants in {to_ns}"),
        source,
    })
}

async fn get_opt<K>(
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
        .map_err(|source| Error::Kube {
            object: format!("{kind} {ns}/{name}"),
            source,
        })
}

fn target_ns<'a>(r: &'a ObjectReference, own: &'a str) -> &'a str {
    r.namespace.as_deref().unwrap_or(own)
}

/// Gathers the inputs of `cluster`.
pub async fn gather(client: &kube::Client, cluster: &NatsCluster) -> Result<Inputs, Error> {
    let ns = cluster.namespace().unwrap_or_default();
    let spec = &cluster.spec;
    let mut out = Inputs::default();

    if let Some(auth) = &spec.auth {
        let r = &auth.trust_ref;
        let tns = target_ns(r, &ns);
        let trust = if admitted(client, &ns, "NatsOperatorTrust", tns, &r.name).await? {
            get_opt::<NatsOperatorTrust>(client, tns, &r.name, "NatsOperatorTrust").await?
        } else {
            None
        };
        match refusals::resolve_trust(&format!("{tns}/{}", r.name), trust.as_ref()) {
            Ok(t) => out.trust = Some(t),
            Err(refusal) => out.holds.push(refusal),
        }
        for r in &auth.account_trust_refs {
            let tns = target_ns(r, &ns);
            let named = format!("NatsAccountTrust {tns}/{}", r.name);
            let at = if admitted(client, &ns, "NatsAccountTrust", tns, &r.name).await? {
                get_opt::<NatsAccountTrust>(client, tns, &r.name, "NatsAccountTrust").await?
            } else {
                None
            };
            let Some(at) = at else {
                out.holds.push(hold(
                    reason::ACCOUNT_TRUST_NOT_READY,
                    Hold::Waiting,
                    format!("{named} does not exist or no grant admits it"),
                ));
                continue;
            };
            let (Some(key), Some(jwt)) = (at.public_key(), at.jwt()) else {
                out.holds.push(hold(
                    reason::ACCOUNT_TRUST_NOT_READY,
                    Hold::Waiting,
                    format!("{named} holds no public key and account JWT yet"),
                ));
                continue;
            };
            match nats_claims::decode::<Account>(jwt) {
                Ok(claims) if claims.subject == key => {
                    out.account_preloads
                        .push((key.to_string(), jwt.to_string()));
                    if at.spec.account_ref.is_none() {
                        out.literal_preloads.push(named);
                    }
                }
                Ok(claims) => out.holds.push(hold(
                    reason::ACCOUNT_TRUST_INVALID,
                    Hold::Waiting,
                    format!(
                        "{named}: the JWT is for {}, the public key is {key}",
                        claims.subject
                    ),
                )),
                Err(e) => out.holds.push(hold(
                    reason::ACCOUNT_TRUST_INVALID,
                    Hold::Waiting,
                    format!("{named}: the JWT does not decode: {e}"),
                )),
            }
        }
    }

    for (index, remote) in spec.leaf_remotes.iter().enumerate() {
        let r = &remote.connection_ref;
        let cns = target_ns(r, &ns).to_string();
        let mut view = LeafRemoteView {
            index,
            connection_namespace: cns.clone(),
            connection_name: r.name.clone(),
            account: None,
            refused: None,
        };
        let label = format!(
            "spec.leafRemotes[{index}] (NatsConnection {cns}/{})",
            r.name
        );
        if !admitted(client, &ns, "NatsConnection", &cns, &r.name).await? {
            view.refused = Some((
                reason::REMOTE_NOT_PERMITTED,
                format!("{label}: no NatsReferenceGrant in {cns} admits it"),
            ));
            out.leaf_views.push(view);
            continue;
        }
        let Some(conn) = get_opt::<NatsConnection>(client, &cns, &r.name, "NatsConnection").await?
        else {
            view.refused = Some((reason::REMOTE_NOT_FOUND, format!("{label} does not exist")));
            out.leaf_views.push(view);
            continue;
        };
        let account = if remote.local_system_account {
            out.trust.as_ref().map(|t| t.system_account.clone())
        } else if let Some(a) = &remote.local_account_trust_ref {
            let ans = target_ns(a, &ns);
            get_opt::<NatsAccountTrust>(client, ans, &a.name, "NatsAccountTrust")
                .await?
                .and_then(|t| t.public_key().map(str::to_string))
        } else {
            None
        };
        let mut files = LeafRemoteFiles {
            index,
            credentials: None,
            ca: None,
        };
        if let Some(c) = &conn.spec.credentials {
            let key = c.secret_key_ref.key.as_deref().unwrap_or(DEFAULT_CREDS_KEY);
            files.credentials = secret(client, &cns, &c.secret_key_ref.name)
                .await?
                .and_then(|s| secret_key(&s, key));
        }
        if let Some(ca) = conn.spec.tls.as_ref().and_then(|t| t.ca.as_ref()) {
            let key = ca.secret_key_ref.key.as_deref().unwrap_or(DEFAULT_CA_KEY);
            files.ca = secret(client, &cns, &ca.secret_key_ref.name)
                .await?
                .and_then(|s| secret_key(&s, key));
        }
        view.account = account.clone();
        out.leaf_remotes.push(ResolvedLeafRemote {
            index,
            urls: conn.spec.servers.clone(),
            has_credentials: files.credentials.is_some(),
            has_ca: files.ca.is_some(),
            local_account: account,
        });
        out.leaf_files.push(files);
        out.leaf_views.push(view);
    }
    if let Some(r) = refusals::leaf_preload(spec, &out.literal_preloads) {
        out.holds.push(r);
    }
    Ok(out)
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
