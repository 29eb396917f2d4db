//! The NatsConnection a JetStream resource names, reached: admitted by a NatsReferenceGrant when
//! it crosses namespaces, dialed through the pool ([`reach`]); and, for a deletion, whether it
//! still exists and is admitted ([`connection_state`]). The balancers and the evacuation read
//! an unreached connection as a reason and a message (`moves::reached`) and, the balancers, a
//! server in no NATS cluster as nothing to judge ([`nats_cluster`]).

use controller_kit::blocked::Blocked;
use controller_kit::grants;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use nats_api::common::ObjectReference;
use nats_api::jetstream::reason;

use super::context::Context;
use super::error::{Error, kube_err};
use super::outcome::Stop;
use crate::lifecycle_policies::ConnectionState;
use crate::pool::Resolved;
use crate::references::{self, CONNECTION_GROUP, JETSTREAM_GROUP};

/// The referrer of a JetStream resource of `kind` in `ns`.
fn referrer<'a>(kind: &'a str, ns: &'a str) -> grants::From<'a> {
    grants::From {
        group: JETSTREAM_GROUP,
        kind,
        namespace: ns,
    }
}

/// The NATS client of the connection `conn` (absolute), or why not: not admitted by a grant
/// (checked when `check_grant`), missing, or not connecting — each a [`Stop::NotReady`].
pub(crate) async fn reach<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    conn: &ObjectReference,
    check_grant: bool,
) -> Result<async_nats::Client, Stop> {
    let ns = obj.namespace().unwrap_or_default();
    let kind = K::kind(&());
    let target_ns = conn.namespace.clone().unwrap_or_else(|| ns.clone());
    if check_grant && !admitted(ctx, obj, conn, &target_ns).await? {
        return Err(Stop::NotReady(Blocked::new(
            reason::REFERENCE_NOT_PERMITTED,
            format!(
                "no NatsReferenceGrant in {target_ns} admits NatsConnection {} from {kind} in {ns}",
                conn.name
            ),
        )));
    }
    if !ctx.shared.scope.namespaces.watches(&target_ns) {
        // Outside --watch-namespaces: never read, reads as absent.
        return Err(Stop::NotReady(Blocked::new(
            reason::REFERENCE_NOT_FOUND,
            format!(
                "NatsConnection {target_ns}/{} is in a namespace this controller does not watch",
                conn.name
            ),
        )));
    }
    // From the NatsConnection Controller's watch cache when it holds it: no GET per pass.
    let known = ctx.cached_connection(&target_ns, &conn.name);
    let resolved = ctx
        .pool
        .resolve_with(&ctx.shared.client, &target_ns, &conn.name, known.as_deref())
        .await
        .map_err(kube_err(obj))?;
    match resolved {
        Resolved::Connected(c) => Ok(c),
        Resolved::Missing => Err(Stop::NotReady(Blocked::new(
            reason::REFERENCE_NOT_FOUND,
            format!("NatsConnection {target_ns}/{} does not exist", conn.name),
        ))),
        Resolved::NotReady(r) => Err(Stop::NotReady(Blocked::new(
            r.reason(),
            format!("NatsConnection {target_ns}/{}: {}", conn.name, r.message()),
        ))),
    }
}

/// The NATS cluster the server `client` is connected to names, or `NotClustered` when it names
/// none: a lone server has nothing to balance.
pub(crate) fn nats_cluster(client: &async_nats::Client) -> Result<String, (&'static str, String)> {
    let cluster = client.server_info().cluster.unwrap_or_default();
    if cluster.is_empty() {
        return Err((
            reason::NOT_CLUSTERED,
            "the server spec.connectionRef reaches is in no NATS cluster: there is nothing to \
             balance"
                .into(),
        ));
    }
    Ok(cluster)
}

/// Whether a NatsReferenceGrant in `target_ns` admits `obj`'s reference to `conn`.
async fn admitted<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    conn: &ObjectReference,
    target_ns: &str,
) -> Result<bool, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let kind = K::kind(&());
    grants::admitted(
        &ctx.shared.client,
        &ctx.shared.scope.namespaces,
        referrer(&kind, &ns),
        grants::To {
            group: CONNECTION_GROUP,
            kind: "NatsConnection",
            namespace: target_ns,
            name: &conn.name,
        },
    )
    .await
    .map_err(kube_err(obj))
}

/// Whether the connection the resource names still exists (being deleted or not) and is
/// admitted.
pub(crate) async fn connection_state<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    conn: &ObjectReference,
) -> Result<ConnectionState, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let kind = K::kind(&());
    let target_ns = references::namespace_of(conn, &ns).to_string();
    let namespaces = &ctx.shared.scope.namespaces;
    let grants = if target_ns == ns {
        Vec::new()
    } else {
        grants::grants_in(&ctx.shared.client, namespaces, &target_ns)
            .await
            .map_err(kube_err(obj))?
    };
    // A connection outside --watch-namespaces is never read: it reads as absent. One being
    // deleted but still there (held by the in-use finalizer for resources like this one) exists.
    let exists = namespaces.watches(&target_ns) && {
        let api: Api<nats_api::nats::NatsConnection> =
            Api::namespaced(ctx.shared.client.clone(), &target_ns);
        api.get_opt(&conn.name)
            .await
            .map_err(kube_err(obj))?
            .is_some()
    };
    Ok(references::connection_state(
        &grants,
        referrer(&kind, &ns),
        conn,
        exists,
    ))
}
