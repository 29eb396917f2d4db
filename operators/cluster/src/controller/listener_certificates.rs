//! The certificates each listener mounts, read from their Secrets; the self-signed route CA
//! (`<name>-routes-ca`) and the route certificate issued under it kept by the controller itself,
//! reissued under the same key once a third of its validity remains (design §4.1).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use nats_api::cluster::{NatsClusterSpec, names};

use super::context::Context;
use super::error::Error;
use super::read::{secret, secret_key, tls_files};
use crate::objects::server_side_apply::FIELD_MANAGER;
use crate::objects::{Owner, tls_secret_name};
use crate::refusals;
use crate::route_ca::{self, RouteCa};
use crate::server_lifecycle::ServerLifecycle;

/// The certificate files each listener mounts: listener → file name → contents.
pub type Listeners = BTreeMap<&'static str, BTreeMap<String, Vec<u8>>>;

/// A route CA or certificate as kept, or what is in the way of it: a Secret of its name the
/// NatsCluster does not control, or why it could not be made.
pub enum Kept<T> {
    Kept(T),
    InTheWay(String),
}

/// The certificates every listener mounts, and the objects in the way of the route
/// certificate's Secrets.
pub async fn listeners<L: ServerLifecycle>(
    ctx: &Context<L>,
    owner: &Owner,
    spec: &NatsClusterSpec,
) -> Result<(Listeners, Vec<String>), Error> {
    let (name, ns) = (&owner.name, &owner.namespace);
    let mut listeners = Listeners::new();
    let mut foreign = vec![];
    let self_signed_routes = crate::objects::cluster::controller_secret_names(owner, spec, false)
        .contains(&names::routes_ca_secret(name));
    if self_signed_routes {
        match route_certificate(ctx, owner).await? {
            Kept::Kept(files) => {
                listeners.insert("routes", files);
            }
            Kept::InTheWay(f) => foreign.push(f),
        }
    } else if spec.route_tls_enabled() {
        let tls = spec.routes.as_ref().and_then(|r| r.tls.as_ref());
        let secret_name = match tls.and_then(|t| t.secret_ref.as_ref()) {
            Some(s) => s.name.clone(),
            None => route_ca::routes_tls_secret(name),
        };
        if let Some(s) = secret(&ctx.shared.client, ns, &secret_name).await? {
            listeners.insert("routes", tls_files(&s));
        }
    }
    let named_listeners = [
        ("client", spec.tls.as_ref()),
        (
            "gateway",
            spec.gateway.as_ref().and_then(|g| g.tls.as_ref()),
        ),
        (
            "leafnodes",
            spec.leafnodes.as_ref().and_then(|l| l.tls.as_ref()),
        ),
    ];
    for (listener, tls) in named_listeners {
        if let Some(tls) = tls
            && let Some(s) = secret(
                &ctx.shared.client,
                ns,
                &tls_secret_name(name, listener, Some(tls)),
            )
            .await?
        {
            listeners.insert(listener, tls_files(&s));
        }
    }
    Ok((listeners, foreign))
}

/// Writes `secret` as `name` by server-side apply.
async fn apply_secret(
    api: &Api<Secret>,
    ns: &str,
    name: &str,
    secret: &Secret,
) -> Result<(), Error> {
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(secret),
    )
    .await
    .map_err(Error::kube(format!("Secret {ns}/{name}")))?;
    Ok(())
}

/// Keeps the self-signed route CA (`<name>-routes-ca`) and the route certificate issued under
/// it, reissued under the same key once a third of its validity remains.
async fn route_certificate<L: ServerLifecycle>(
    ctx: &Context<L>,
    owner: &Owner,
) -> Result<Kept<BTreeMap<String, Vec<u8>>>, Error> {
    let ns = &owner.namespace;
    let api: Api<Secret> = Api::namespaced(ctx.shared.client.clone(), ns);
    let uid = owner.reference.uid.as_str();
    let now = time::OffsetDateTime::now_utc();
    let ca = match route_ca(ctx, owner, &api, now).await? {
        Kept::Kept(ca) => ca,
        Kept::InTheWay(what) => return Ok(Kept::InTheWay(what)),
    };
    let tls_name = route_ca::routes_tls_secret(&owner.name);
    let current = secret(&ctx.shared.client, ns, &tls_name).await?;
    if let Some(s) = &current {
        if !refusals::controlled_by(s.owner_references(), uid) {
            return Ok(Kept::InTheWay(format!("Secret/{tls_name}")));
        }
        let same_ca =
            secret_key(s, route_ca::CA_CERT_KEY).is_some_and(|c| c == ca.cert_pem.as_bytes());
        if same_ca && !route_ca::secret_needs_reissue(s, now) {
            return Ok(Kept::Kept(tls_files(s)));
        }
    }
    let dns = route_ca::route_dns_names(&owner.name, ns, &ctx.settings.cluster_domain);
    let ips = [std::net::IpAddr::from([127, 0, 0, 1])];
    let issued = match ca.issue(&dns, &ips, now) {
        Ok(c) => c,
        Err(e) => return Ok(Kept::InTheWay(format!("route certificate: {e}"))),
    };
    let secret = issued.secret(owner);
    apply_secret(&api, ns, &tls_name, &secret).await?;
    Ok(Kept::Kept(tls_files(&secret)))
}

/// The route CA from its Secret, or generated and written when there is none that reads.
async fn route_ca<L: ServerLifecycle>(
    ctx: &Context<L>,
    owner: &Owner,
    api: &Api<Secret>,
    now: time::OffsetDateTime,
) -> Result<Kept<RouteCa>, Error> {
    let ns = &owner.namespace;
    let ca_name = names::routes_ca_secret(&owner.name);
    let ca_secret = secret(&ctx.shared.client, ns, &ca_name).await?;
    if let Some(s) = &ca_secret
        && !refusals::controlled_by(s.owner_references(), owner.reference.uid.as_str())
    {
        return Ok(Kept::InTheWay(format!("Secret/{ca_name}")));
    }
    if let Some(ca) = ca_secret
        .as_ref()
        .and_then(|s| RouteCa::from_secret(&owner.name, s).ok())
    {
        return Ok(Kept::Kept(ca));
    }
    let ca = match RouteCa::generate(&owner.name, now) {
        Ok(ca) => ca,
        Err(e) => return Ok(Kept::InTheWay(format!("route CA: {e}"))),
    };
    apply_secret(api, ns, &ca_name, &ca.secret(owner)).await?;
    Ok(Kept::Kept(ca))
}
