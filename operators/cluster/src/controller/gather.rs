//! Phase 1, gather: what a NatsCluster's servers are rendered from — its trust roots
//! (NatsOperatorTrust), the accounts it preloads (NatsAccountTrusts), its leaf remotes
//! (NatsConnections a grant admits, and their Secrets) — and the keys of its gateway's
//! certificate Secret, for the refusal that reads them. A reference that is missing, not admitted
//! or not ready yet is a wait ([`Refusal`]), not an error; one outside `--watch-namespaces` is
//! not admitted, and never read.

use controller_kit::scope::Namespaces;
use kube::ResourceExt;
use nats_api::cluster::{NatsCluster, reason};
use nats_api::common::{DEFAULT_CA_KEY, DEFAULT_CREDS_KEY, ObjectReference};
use nats_api::nats::{NatsAccountTrust, NatsConnection, NatsOperatorTrust};
use nats_claims::Account;

use super::error::Error;
use super::read::{admitted, get_opt, keys_of, secret, secret_key};
use crate::conditions::leafnodes::LeafRemoteView;
use crate::objects::leaf_remotes::LeafRemoteFiles;
use crate::objects::tls_secret_name;
use crate::plan::{ResolvedLeafRemote, ResolvedTrust};
use crate::refusals::{self, Hold, Refusal};

/// Everything gathered for one pass.
#[derive(Clone, Debug, Default)]
pub struct Gathered {
    pub trusts: Trusts,
    pub leaf_remotes: LeafRemotes,
    /// The gateway's certificate Secret, when gateway TLS is set.
    pub gateway_certificate: Option<GatewayCertificate>,
}

/// The trust roots and the accounts preloaded from NatsAccountTrusts.
#[derive(Clone, Debug, Default)]
pub struct Trusts {
    pub trust: Option<ResolvedTrust>,
    /// Account JWTs by public key.
    pub account_preloads: Vec<(String, String)>,
    /// NatsAccountTrusts preloading a literal JWT (named for the leaf preload refusal).
    pub literal_preloads: Vec<String>,
    /// What the trust references wait for, in the order found (the first one is reported).
    pub waits: Vec<Refusal>,
}

/// spec.leafRemotes as resolved: the admitted ones, their files, and every one's view.
#[derive(Clone, Debug, Default)]
pub struct LeafRemotes {
    pub admitted: Vec<ResolvedLeafRemote>,
    pub files: Vec<LeafRemoteFiles>,
    /// Every remote, admitted or why not, for status.leafRemotes.
    pub views: Vec<LeafRemoteView>,
}

/// The gateway's certificate Secret and the keys it holds (`None`: it does not exist).
#[derive(Clone, Debug, Default)]
pub struct GatewayCertificate {
    pub secret: String,
    pub keys: Option<Vec<String>>,
}

fn wait(reason: &'static str, message: String) -> Refusal {
    Refusal::new(reason, Hold::Waiting, message)
}

fn target_ns<'a>(r: &'a ObjectReference, own: &'a str) -> &'a str {
    r.namespace.as_deref().unwrap_or(own)
}

/// Gathers the inputs of `cluster`.
pub async fn gather(
    client: &kube::Client,
    namespaces: &Namespaces,
    cluster: &NatsCluster,
) -> Result<Gathered, Error> {
    let trusts = trusts(client, namespaces, cluster).await?;
    let system_account = trusts.trust.as_ref().map(|t| t.system_account.as_str());
    let leaf_remotes = leaf_remotes(client, namespaces, cluster, system_account).await?;
    let gateway_certificate = gateway_certificate(client, cluster).await?;
    Ok(Gathered {
        trusts,
        leaf_remotes,
        gateway_certificate,
    })
}

/// The operator trust `auth.trustRef` names and the accounts `auth.accountTrustRefs` preload.
async fn trusts(
    client: &kube::Client,
    namespaces: &Namespaces,
    cluster: &NatsCluster,
) -> Result<Trusts, Error> {
    let ns = cluster.namespace().unwrap_or_default();
    let mut out = Trusts::default();
    let Some(auth) = &cluster.spec.auth else {
        return Ok(out);
    };
    let r = &auth.trust_ref;
    let tns = target_ns(r, &ns);
    let trust = if admitted(client, namespaces, &ns, "NatsOperatorTrust", tns, &r.name).await? {
        get_opt::<NatsOperatorTrust>(client, tns, &r.name, "NatsOperatorTrust").await?
    } else {
        None
    };
    match refusals::resolve_trust(&format!("{tns}/{}", r.name), trust.as_ref()) {
        Ok(t) => out.trust = Some(t),
        Err(refusal) => out.waits.push(refusal),
    }
    for r in &auth.account_trust_refs {
        account_trust(client, namespaces, &ns, r, &mut out).await?;
    }
    Ok(out)
}

/// One preloaded account: its NatsAccountTrust admitted, holding a key and a JWT for that key.
async fn account_trust(
    client: &kube::Client,
    namespaces: &Namespaces,
    ns: &str,
    r: &ObjectReference,
    out: &mut Trusts,
) -> Result<(), Error> {
    let tns = target_ns(r, ns);
    let named = format!("NatsAccountTrust {tns}/{}", r.name);
    let at = if admitted(client, namespaces, ns, "NatsAccountTrust", tns, &r.name).await? {
        get_opt::<NatsAccountTrust>(client, tns, &r.name, "NatsAccountTrust").await?
    } else {
        None
    };
    let Some(at) = at else {
        out.waits.push(wait(
            reason::ACCOUNT_TRUST_NOT_READY,
            format!("{named} does not exist or no grant admits it"),
        ));
        return Ok(());
    };
    let (Some(key), Some(jwt)) = (at.public_key(), at.jwt()) else {
        out.waits.push(wait(
            reason::ACCOUNT_TRUST_NOT_READY,
            format!("{named} holds no public key and account JWT yet"),
        ));
        return Ok(());
    };
    match nats_claims::decode::<Account>(jwt) {
        Ok(claims) if claims.subject == key => {
            out.account_preloads
                .push((key.to_string(), jwt.to_string()));
            if at.spec.account_ref.is_none() {
                out.literal_preloads.push(named);
            }
        }
        Ok(claims) => out.waits.push(wait(
            reason::ACCOUNT_TRUST_INVALID,
            format!(
                "{named}: the JWT is for {}, the public key is {key}",
                claims.subject
            ),
        )),
        Err(e) => out.waits.push(wait(
            reason::ACCOUNT_TRUST_INVALID,
            format!("{named}: the JWT does not decode: {e}"),
        )),
    }
    Ok(())
}

/// Every entry of spec.leafRemotes: admitted by a grant and found, with its local account and
/// its connection's creds and CA; or rendered out, saying why. `system_account` is the trust's.
async fn leaf_remotes(
    client: &kube::Client,
    namespaces: &Namespaces,
    cluster: &NatsCluster,
    system_account: Option<&str>,
) -> Result<LeafRemotes, Error> {
    let mut out = LeafRemotes::default();
    for index in 0..cluster.spec.leaf_remotes.len() {
        let (view, admitted) =
            leaf_remote(client, namespaces, cluster, index, system_account).await?;
        if let Some((resolved, files)) = admitted {
            out.admitted.push(resolved);
            out.files.push(files);
        }
        out.views.push(view);
    }
    Ok(out)
}

/// Entry `index` of spec.leafRemotes: its view, and when admitted and found, it resolved and
/// its files.
async fn leaf_remote(
    client: &kube::Client,
    namespaces: &Namespaces,
    cluster: &NatsCluster,
    index: usize,
    system_account: Option<&str>,
) -> Result<
    (
        LeafRemoteView,
        Option<(ResolvedLeafRemote, LeafRemoteFiles)>,
    ),
    Error,
> {
    let ns = cluster.namespace().unwrap_or_default();
    let remote = &cluster.spec.leaf_remotes[index];
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
    if !admitted(client, namespaces, &ns, "NatsConnection", &cns, &r.name).await? {
        view.refused = Some((
            reason::REMOTE_NOT_PERMITTED,
            format!("{label}: no NatsReferenceGrant in {cns} admits it"),
        ));
        return Ok((view, None));
    }
    let Some(conn) = get_opt::<NatsConnection>(client, &cns, &r.name, "NatsConnection").await?
    else {
        view.refused = Some((reason::REMOTE_NOT_FOUND, format!("{label} does not exist")));
        return Ok((view, None));
    };
    let account = if remote.local_system_account {
        system_account.map(str::to_string)
    } else if let Some(a) = &remote.local_account_trust_ref {
        let ans = target_ns(a, &ns);
        if namespaces.watches(ans) {
            get_opt::<NatsAccountTrust>(client, ans, &a.name, "NatsAccountTrust")
                .await?
                .and_then(|t| t.public_key().map(str::to_string))
        } else {
            None
        }
    } else {
        None
    };
    let files = connection_files(client, &cns, &conn, index).await?;
    view.account = account.clone();
    let resolved = ResolvedLeafRemote {
        index,
        urls: conn.spec.servers.clone(),
        has_credentials: files.credentials.is_some(),
        has_ca: files.ca.is_some(),
        local_account: account,
    };
    Ok((view, Some((resolved, files))))
}

/// A NatsConnection's creds and CA, read from its Secrets in `cns`.
async fn connection_files(
    client: &kube::Client,
    cns: &str,
    conn: &NatsConnection,
    index: usize,
) -> Result<LeafRemoteFiles, Error> {
    let mut files = LeafRemoteFiles {
        index,
        credentials: None,
        ca: None,
    };
    if let Some(c) = &conn.spec.credentials {
        let key = c.secret_key_ref.key.as_deref().unwrap_or(DEFAULT_CREDS_KEY);
        files.credentials = secret(client, cns, &c.secret_key_ref.name)
            .await?
            .and_then(|s| secret_key(&s, key));
    }
    if let Some(ca) = conn.spec.tls.as_ref().and_then(|t| t.ca.as_ref()) {
        let key = ca.secret_key_ref.key.as_deref().unwrap_or(DEFAULT_CA_KEY);
        files.ca = secret(client, cns, &ca.secret_key_ref.name)
            .await?
            .and_then(|s| secret_key(&s, key));
    }
    Ok(files)
}

/// The gateway's certificate Secret and its keys, when gateway TLS is set.
async fn gateway_certificate(
    client: &kube::Client,
    cluster: &NatsCluster,
) -> Result<Option<GatewayCertificate>, Error> {
    let Some(gw_tls) = cluster.spec.gateway.as_ref().and_then(|g| g.tls.as_ref()) else {
        return Ok(None);
    };
    let ns = cluster.namespace().unwrap_or_default();
    let name = tls_secret_name(&cluster.name_any(), "gateway", Some(gw_tls));
    let s = secret(client, &ns, &name).await?;
    Ok(Some(GatewayCertificate {
        keys: keys_of(s.as_ref()),
        secret: name,
    }))
}
