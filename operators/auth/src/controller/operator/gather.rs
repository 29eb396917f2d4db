//! What a NatsOperator pass reads before it signs: its offline identity, its own keys, and the
//! NatsSystemAccount its systemAccountRef selects (from the index), admitted across namespaces,
//! with that system account's keys.

use std::sync::Arc;

use kube::ResourceExt;
use nats_api::auth::{GeneratedKind, NatsOperator, NatsOperatorStatus, NatsSystemAccount, reason};
use nats_claims::Operator;

use super::stop::{Stop, not_ready, unresolved};
use crate::controller::Context;
use crate::controller::seeds::{self, Resolved, Subject};
use crate::grants::{Referrer, Target};

/// The identity kept offline: the subject of spec.jwt (InvalidJwt where it does not decode).
pub(super) fn identity(op: &NatsOperator) -> Result<Option<String>, Stop> {
    match &op.spec.jwt {
        None => Ok(None),
        Some(jwt) => nats_claims::decode::<Operator>(jwt)
            .map(|c| Some(c.subject))
            .map_err(|e| not_ready(reason::INVALID_JWT, format!("spec.jwt: {e}"))),
    }
}

/// The operator's own keys, generated here first.
pub(super) async fn keys(
    ctx: &Context,
    op: &NatsOperator,
    offline: Option<String>,
    prev: &NatsOperatorStatus,
) -> Result<Resolved, Stop> {
    let (ns, name) = (op.namespace().unwrap_or_default(), op.name_any());
    let subject = Subject {
        kind: GeneratedKind::Operator,
        namespace: &ns,
        name: &name,
        keys: op.spec.keys.as_ref(),
        offline,
        recorded: prev.public_key.as_deref(),
        may_generate: true,
    };
    seeds::resolve(ctx, subject)
        .await?
        .map_err(|e| not_ready(e.reason(), e.message()))
}

/// The system account spec.systemAccountRef selects, with its keys.
pub(super) struct SystemAccount {
    pub object: Arc<NatsSystemAccount>,
    pub namespace: String,
    pub name: String,
    pub keys: Resolved,
}

/// The system account spec.systemAccountRef selects (ReferenceNotFound), admitted across
/// namespaces only through a NatsReferenceGrant in its namespace (ReferenceNotPermitted, §7),
/// and its keys, generated here first when missing.
pub(super) async fn system_account(
    ctx: &Context,
    op: &NatsOperator,
) -> Result<SystemAccount, Stop> {
    let ns = op.namespace().unwrap_or_default();
    let r = &op.spec.system_account_ref;
    let sys_ns = r.namespace.clone().unwrap_or_else(|| ns.clone());
    let sys_name = r.name.clone();
    let Some(sys) = ctx.index.system_account(&sys_ns, &sys_name) else {
        let message = format!("systemAccountRef {sys_ns}/{sys_name} not found");
        return Err(unresolved(reason::REFERENCE_NOT_FOUND, message));
    };
    let from = Referrer {
        group: nats_api::auth::GROUP,
        kind: "NatsOperator",
        namespace: &ns,
    };
    let to = Target {
        group: nats_api::auth::GROUP,
        kind: "NatsSystemAccount",
        namespace: &sys_ns,
        name: &sys_name,
    };
    if !ctx.index.admits(from, to) {
        let message = format!(
            "systemAccountRef {sys_ns}/{sys_name} is not admitted by any NatsReferenceGrant in {sys_ns}"
        );
        return Err(unresolved(reason::REFERENCE_NOT_PERMITTED, message));
    }
    let subject = Subject {
        kind: GeneratedKind::SystemAccount,
        namespace: &sys_ns,
        name: &sys_name,
        keys: sys.spec.keys.as_ref(),
        offline: sys.spec.public_key.clone(),
        recorded: sys.status.as_ref().and_then(|s| s.public_key.as_deref()),
        may_generate: true,
    };
    let keys = seeds::resolve(ctx, subject).await?.map_err(|e| {
        let message = format!("system account {sys_ns}/{sys_name}: {}", e.message());
        not_ready(e.reason(), message)
    })?;
    Ok(SystemAccount {
        object: sys,
        namespace: sys_ns,
        name: sys_name,
        keys,
    })
}
