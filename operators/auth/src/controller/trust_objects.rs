//! NatsOperatorTrust and NatsAccountTrust: the reference form gets its status written here from
//! the NatsOperator (operator and system account JWTs) or NatsAccount (public key and JWT); the
//! literal form is checked and its material copied alike (Ready Literal, or InvalidJWT).

use std::sync::Arc;

use controller_kit::conditions::Decided;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::auth::{NatsAccount, NatsOperator};
use nats_api::nats::{
    NatsAccountTrust, NatsAccountTrustStatus, NatsOperatorTrust, NatsOperatorTrustStatus,
    condition, reason,
};

use controller_kit::reconcile::describe;

use super::error::kube_err;
use super::index::Kind;
use super::pass::{self, retry_later, settled};
use super::write_status::{merged, write_status};
use super::{Context, Error};
use crate::trust::{self as core, Found, TrustStatus};

/// The NatsOperatorTrust controller: wakes on NatsOperators and grants.
pub(crate) async fn operator_trust_controller(ctx: Arc<Context>) {
    let c = pass::watched::<NatsOperatorTrust>(&ctx, &[Kind::Operator, Kind::Grant]);
    pass::drive(c, ctx, reconcile_operator_trust).await;
}

/// The NatsAccountTrust controller: wakes on NatsAccounts and grants.
pub(crate) async fn account_trust_controller(ctx: Arc<Context>) {
    let c = pass::watched::<NatsAccountTrust>(&ctx, &[Kind::Account, Kind::Grant]);
    pass::drive(c, ctx, reconcile_account_trust).await;
}

/// The object a trust object references, as looked up.
enum Referenced<K> {
    /// Not there.
    Missing,
    /// In another namespace, and no grant admits the trust object to it.
    NotPermitted,
    /// There and admitted.
    Present(K),
}

impl<K> Referenced<K> {
    /// As the pure core takes it: what `status` reads of the object found.
    fn found<'a, S>(&'a self, status: impl FnOnce(&'a K) -> Option<&'a S>) -> Found<'a, S> {
        match self {
            Referenced::Missing => Found::Missing,
            Referenced::NotPermitted => Found::NotPermitted,
            Referenced::Present(k) => Found::Present(status(k)),
        }
    }
}

/// Looks up `kind` `namespace`/`name` for a trust object in `from_ns`, through a grant when
/// the namespaces differ.
async fn find<K>(
    ctx: &Context,
    from_kind: &str,
    from_ns: &str,
    namespace: &str,
    name: &str,
) -> Result<Referenced<K>, Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let from = controller_kit::grants::From {
        group: nats_api::nats::GROUP,
        kind: from_kind,
        namespace: from_ns,
    };
    let to = controller_kit::grants::To {
        group: nats_api::auth::GROUP,
        kind: &K::kind(&()),
        namespace,
        name,
    };
    if !ctx.shared.scope.namespaces.watches(namespace) {
        // Outside --watch-namespaces: never read, reads as absent.
        return Ok(Referenced::Missing);
    }
    let got = Api::<K>::namespaced(ctx.shared.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(kube_err(format!("{} {namespace}/{name}", K::kind(&()))))?;
    let Some(got) = got else {
        return Ok(Referenced::Missing);
    };
    let ok = controller_kit::grants::admitted(
        &ctx.shared.client,
        &ctx.shared.scope.namespaces,
        from,
        to,
    )
    .await
    .map_err(kube_err(format!("NatsReferenceGrant list {namespace}")))?;
    Ok(if ok {
        Referenced::Present(got)
    } else {
        Referenced::NotPermitted
    })
}

fn ready(t: &TrustStatus, from: &str) -> Decided {
    match t {
        TrustStatus::Literal { message, .. } => {
            Decided::new(condition::READY, true, reason::LITERAL, message.clone())
        }
        TrustStatus::Mirrored { .. } => Decided::new(
            condition::READY,
            true,
            reason::MIRRORED,
            format!("mirrored from {from}"),
        ),
        TrustStatus::NotReady(blocked) => blocked.condition(condition::READY),
    }
}

/// The material a Ready trust object's status carries: its first and second JWT or key.
fn material(t: &TrustStatus) -> (Option<String>, Option<String>) {
    match t {
        TrustStatus::Mirrored { first, second } | TrustStatus::Literal { first, second, .. } => {
            (Some(first.clone()), second.clone())
        }
        TrustStatus::NotReady(_) => (None, None),
    }
}

async fn reconcile_operator_trust(
    t: Arc<NatsOperatorTrust>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let (decided, from) = match &t.spec.operator_ref {
        None => (core::literal_operator(&t.spec), String::new()),
        Some(r) => {
            let ns = t.namespace().unwrap_or_default();
            let op_ns = r.namespace.clone().unwrap_or_else(|| ns.clone());
            let found =
                find::<NatsOperator>(&ctx, "NatsOperatorTrust", &ns, &op_ns, &r.name).await?;
            (
                core::operator_trust(&t.spec, found.found(|op| op.status.as_ref())),
                format!("NatsOperator {op_ns}/{}", r.name),
            )
        }
    };
    let cond = ready(
        &decided,
        &format!("{from}: NATS operator and system account JWTs"),
    );
    let (op_jwt, sys_jwt) = material(&decided);
    let ok = cond.status;
    let generation = t.meta().generation;
    let status = NatsOperatorTrustStatus {
        observed_generation: generation,
        conditions: merged(&*t, &[cond], &[]),
        operator_jwt: op_jwt,
        system_account_jwt: sys_jwt,
    };
    write_status(&ctx, &*t, &status).await?;
    tracing::debug!(object = %describe(&*t), ok, "trust status written");
    if ok {
        settled(&ctx, &*t);
        Ok(Action::requeue(ctx.settings.resync))
    } else {
        Ok(Action::requeue(retry_later(&ctx, &*t)))
    }
}

async fn reconcile_account_trust(
    t: Arc<NatsAccountTrust>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let (decided, from) = match &t.spec.account_ref {
        None => (core::literal_account(&t.spec), String::new()),
        Some(r) => {
            let ns = t.namespace().unwrap_or_default();
            let a_ns = r.namespace.clone().unwrap_or_else(|| ns.clone());
            let found = find::<NatsAccount>(&ctx, "NatsAccountTrust", &ns, &a_ns, &r.name).await?;
            (
                core::account_trust(&t.spec, found.found(|a| a.status.as_ref())),
                format!("NatsAccount {a_ns}/{}", r.name),
            )
        }
    };
    let cond = ready(&decided, &format!("{from}: public key and JWT"));
    let (pk, jwt) = material(&decided);
    let ok = cond.status;
    let generation = t.meta().generation;
    let status = NatsAccountTrustStatus {
        observed_generation: generation,
        conditions: merged(&*t, &[cond], &[]),
        public_key: pk,
        jwt,
    };
    write_status(&ctx, &*t, &status).await?;
    if ok {
        settled(&ctx, &*t);
        Ok(Action::requeue(ctx.settings.resync))
    } else {
        Ok(Action::requeue(retry_later(&ctx, &*t)))
    }
}
