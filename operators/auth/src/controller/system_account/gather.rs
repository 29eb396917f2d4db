//! What a NatsSystemAccount pass reads: its own keys (generated here first), and its NatsOperator
//! from the index, admitted across namespaces, selecting this system account as its own.

use std::sync::Arc;

use controller_kit::blocked::Blocked;
use controller_kit::conditions::Decided;
use kube::ResourceExt;
use nats_api::auth::{
    GeneratedKind, NatsOperator, NatsSystemAccount, NatsSystemAccountStatus, condition, reason,
};

use super::stop::{Stop, unresolved};
use crate::controller::Context;
use crate::controller::refs::operator_of_system_account;
use crate::controller::seeds::{self, Resolved, Subject};
use crate::grants::{Referrer, Target};
use crate::operator as core;

/// The system account's own keys, generated here first.
pub(super) async fn keys(
    ctx: &Context,
    sys: &NatsSystemAccount,
    prev: &NatsSystemAccountStatus,
) -> Result<Resolved, Stop> {
    let (ns, name) = (sys.namespace().unwrap_or_default(), sys.name_any());
    let subject = Subject {
        kind: GeneratedKind::SystemAccount,
        namespace: &ns,
        name: &name,
        keys: sys.spec.keys.as_ref(),
        offline: sys.spec.public_key.clone(),
        recorded: prev.public_key.as_deref(),
        may_generate: true,
    };
    seeds::resolve(ctx, subject).await?.map_err(|e| {
        Stop::Refused(vec![
            Blocked::new(e.reason(), e.message()).condition(condition::READY),
        ])
    })
}

/// The NatsOperator that selects this system account, and the ReferencesResolved it earns.
pub(super) struct Operator {
    pub object: Arc<NatsOperator>,
    /// "namespace/name".
    pub name: String,
    pub resolved: Decided,
}

/// The NatsOperator operatorRef names (ReferenceNotFound), admitted across namespaces only
/// through a NatsReferenceGrant in its namespace (ReferenceNotPermitted, §7), whose
/// systemAccountRef selects this system account (else it is not signed at all).
pub(super) fn operator(ctx: &Context, sys: &NatsSystemAccount) -> Result<Operator, Stop> {
    let (ns, name) = (sys.namespace().unwrap_or_default(), sys.name_any());
    let (op_ns, op_name) = operator_of_system_account(sys);
    let Some(op) = ctx.index.operator(&op_ns, &op_name) else {
        let message = format!("operatorRef {op_ns}/{op_name} not found");
        return Err(unresolved(reason::REFERENCE_NOT_FOUND, message));
    };
    let from = Referrer {
        group: nats_api::auth::GROUP,
        kind: "NatsSystemAccount",
        namespace: &ns,
    };
    let to = Target {
        group: nats_api::auth::GROUP,
        kind: "NatsOperator",
        namespace: &op_ns,
        name: &op_name,
    };
    if !ctx.index.admits(from, to) {
        let message = format!(
            "operatorRef {op_ns}/{op_name} is not admitted by any NatsReferenceGrant in {op_ns}"
        );
        return Err(unresolved(reason::REFERENCE_NOT_PERMITTED, message));
    }
    let resolved = Decided::new(
        condition::REFERENCES_RESOLVED,
        true,
        reason::REFERENCES_RESOLVED,
        format!("operatorRef {op_ns}/{op_name} resolved"),
    );
    if !core::is_live_system_account(&op.spec.system_account_ref, &op_ns, &ns, &name) {
        let cond = Decided::new(
            condition::READY,
            false,
            reason::REFERENCE_NOT_FOUND,
            format!(
                "NatsOperator {op_ns}/{op_name} selects system account {} as its systemAccountRef, not this one; not signed",
                op.spec.system_account_ref.name
            ),
        );
        return Err(Stop::NotSelected(vec![cond, resolved]));
    }
    Ok(Operator {
        object: op,
        name: format!("{op_ns}/{op_name}"),
        resolved,
    })
}
