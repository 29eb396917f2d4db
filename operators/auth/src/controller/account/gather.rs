//! What a NatsAccount pass reads before it signs: its NatsOperator (from the index) and its
//! admission to it, its own keys, the uniqueness of its key under that NatsOperator, and the
//! NatsOperator's JWT and signing key.

use std::sync::Arc;

use kube::ResourceExt;
use nats_api::auth::{GeneratedKind, NatsAccount, NatsAccountStatus, NatsOperator, reason};
use nats_claims::NKey;

use super::stop::{Stop, not_ready, not_ready_conds, unresolved_conds};
use crate::controller::Context;
use crate::controller::refs::operator_of;
use crate::controller::seeds::{self, Resolved, Subject, kept};
use crate::controller::time::created;
use crate::uniqueness::{Holder, check_unique};
use crate::{deletions, grants};

/// The NatsOperator the account's operatorRef names, from the index.
pub(super) fn operator(ctx: &Context, acct: &NatsAccount) -> Option<Arc<NatsOperator>> {
    let (op_ns, op_name) = operator_of(acct);
    ctx.index.operator(&op_ns, &op_name)
}

/// The NatsOperator the account is admitted to.
pub(super) struct Admitted {
    pub op: Arc<NatsOperator>,
    pub namespace: String,
    pub name: String,
    /// " admitted by NatsReferenceGrant ns/name", or " resolved" within one namespace.
    pub by: String,
}

/// The NatsOperator (ReferenceNotFound) and the account's admission to it by the grants of its
/// namespace (ReferenceNotPermitted), checked before any key is recorded.
pub(super) fn admitted(
    ctx: &Context,
    acct: &NatsAccount,
    op: Option<Arc<NatsOperator>>,
    prev: &NatsAccountStatus,
) -> Result<Admitted, Stop> {
    let ns = acct.namespace().unwrap_or_default();
    let (op_ns, op_name) = operator_of(acct);
    let Some(op) = op else {
        let m = format!("operatorRef {op_ns}/{op_name} not found");
        let conds = unresolved_conds(reason::REFERENCE_NOT_FOUND, m.clone(), m);
        return Err(Stop::Refused(conds));
    };
    let grants = if ns == op_ns {
        vec![]
    } else {
        ctx.index.grants_in(&op_ns)
    };
    if let Err(t) = grants::account_admission(&ns, &op_ns, &op_name, &grants) {
        let refs = format!(
            "operatorRef {op_ns}/{op_name} is not admitted by any NatsReferenceGrant in {op_ns}"
        );
        // Once the NatsOperator records the deletion, this account's JWT is gone for good.
        let deleted = op.status.as_ref().map(|s| s.deleted_accounts.as_slice());
        let recorded = prev
            .public_key
            .as_deref()
            .is_some_and(|pk| deletions::may_clear_jwt(deleted.unwrap_or_default(), pk));
        let ready = withdrawn_message(&t.to_string(), prev, recorded, &op_ns, &op_name);
        let conds = unresolved_conds(t.reason(), ready, refs);
        return Err(if recorded {
            Stop::Forgotten(conds)
        } else {
            Stop::Refused(conds)
        });
    }
    let by = grants
        .iter()
        .find(|g| {
            grants::account_admission(&ns, &op_ns, &op_name, std::slice::from_ref(*g)).is_ok()
        })
        .map(|g| format!(" admitted by NatsReferenceGrant {op_ns}/{}", g.name_any()))
        .unwrap_or_else(|| " resolved".into());
    Ok(Admitted {
        op,
        namespace: op_ns,
        name: op_name,
        by,
    })
}

/// Ready's message for an account no grant admits: the refusal, and, for one signed before
/// (its grant withdrawn, §7), that it is no longer signed and is deleted from every server
/// through its NatsOperator's status.deletedAccounts (§6).
fn withdrawn_message(
    refusal: &str,
    prev: &NatsAccountStatus,
    recorded: bool,
    op_ns: &str,
    op_name: &str,
) -> String {
    let was_signed = prev.jwt.is_some() || recorded;
    match (was_signed, recorded) {
        (false, _) => refusal.to_string(),
        (true, false) => format!(
            "{refusal}; no longer signed: being deleted from every server through NatsOperator {op_ns}/{op_name}'s status.deletedAccounts"
        ),
        (true, true) => format!(
            "{refusal}; no longer signed: NatsOperator {op_ns}/{op_name}'s status.deletedAccounts records its deletion from every server"
        ),
    }
}

/// The account's own keys, generated here first; kept between its passes while its spec (its
/// generation) and the public key it recorded stay the same ([`kept`]: its status writes change
/// its resourceVersion every pass, and a revoking pass read the key Secrets again before the
/// push that kicks).
pub(super) async fn own_keys(
    ctx: &Context,
    acct: &NatsAccount,
    prev: &NatsAccountStatus,
) -> Result<Arc<Resolved>, Stop> {
    let desc = format!(
        "NatsAccount {}/{} (own keys)",
        acct.namespace().unwrap_or_default(),
        acct.name_any()
    );
    let version = match (
        &acct.metadata.uid,
        acct.metadata.generation,
        &prev.public_key,
    ) {
        (Some(uid), Some(generation), Some(pk)) => format!("{uid}/{generation}/{pk}"),
        _ => String::new(),
    };
    ctx.kept_keys
        .or_read(&desc, &version, || read_own_keys(ctx, acct, prev))
        .await
}

/// The account's own keys as its Secrets hold them, generated here first.
async fn read_own_keys(
    ctx: &Context,
    acct: &NatsAccount,
    prev: &NatsAccountStatus,
) -> Result<Resolved, Stop> {
    let (ns, name) = (acct.namespace().unwrap_or_default(), acct.name_any());
    let subject = Subject {
        kind: GeneratedKind::Account,
        namespace: &ns,
        name: &name,
        keys: acct.spec.keys.as_ref(),
        offline: acct.spec.public_key.clone(),
        recorded: prev.public_key.as_deref(),
        may_generate: true,
    };
    seeds::resolve(ctx, subject)
        .await?
        .map_err(|e| Stop::Refused(not_ready_conds(e.reason(), e.message())))
}

/// PublicKeyInUse: the key is unique under the NatsOperator (the accounts of it in the index),
/// the system account's key included; where two record one key, the older keeps it.
pub(super) fn key_in_use(
    ctx: &Context,
    acct: &NatsAccount,
    admitted: &Admitted,
    public_key: &str,
) -> Result<(), Stop> {
    let holder = |a: &NatsAccount, public_key: String| Holder {
        name: format!(
            "NatsAccount {}/{}",
            a.namespace().unwrap_or_default(),
            a.name_any()
        ),
        public_key,
        created: created(a),
    };
    let me = holder(acct, public_key.to_string());
    let others: Vec<Holder> = ctx
        .index
        .accounts_of(&admitted.namespace, &admitted.name)
        .iter()
        .filter_map(|a| Some(holder(a, a.status.as_ref()?.public_key.clone()?)))
        .collect();
    let op = &admitted.op;
    let op_status = op.status.clone().unwrap_or_default();
    let sys_holder = op_status.system_account.as_ref().and_then(|s| {
        let sys_ns = op.spec.system_account_ref.namespace.clone();
        Some(Holder {
            name: format!(
                "NatsSystemAccount {}/{}",
                sys_ns.unwrap_or_else(|| admitted.namespace.clone()),
                s.name.clone().unwrap_or_default()
            ),
            public_key: s.public_key.clone()?,
            created: 0,
        })
    });
    check_unique(&me, &others, sys_holder.as_ref())
        .map_err(|e| not_ready(reason::PUBLIC_KEY_IN_USE, e.to_string()))
}

/// The NatsOperator's JWT and the signing key that signs accounts.
pub(super) struct OperatorSigner {
    pub jwt: String,
    pub signer: NKey,
}

/// The NatsOperator's JWT and its active signing seed (KeysPending until it has both).
pub(super) async fn operator_signer(
    ctx: &Context,
    admitted: &Admitted,
) -> Result<OperatorSigner, Stop> {
    let (op, op_ns, op_name) = (&admitted.op, &admitted.namespace, &admitted.name);
    let op_status = op.status.clone().unwrap_or_default();
    let (Some(op_jwt), Some(op_pk)) = (op_status.jwt, op_status.public_key) else {
        let m = format!("waiting for NatsOperator {op_ns}/{op_name} to sign its JWT");
        return Err(not_ready(reason::KEYS_PENDING, m));
    };
    let subject = Subject {
        kind: GeneratedKind::Operator,
        namespace: op_ns,
        name: op_name,
        keys: op.spec.keys.as_ref(),
        offline: op.spec.jwt.as_ref().map(|_| op_pk.clone()),
        recorded: Some(&op_pk),
        may_generate: false,
    };
    let desc = format!("NatsOperator {op_ns}/{op_name}");
    let version = kept::version_of(&**op);
    let op_keys = ctx
        .kept_keys
        .or_read(&desc, &version, || async {
            seeds::resolve(ctx, subject).await?.map_err(|e| {
                let m = format!("{desc}: {}", e.message());
                not_ready(reason::KEYS_PENDING, m)
            })
        })
        .await?;
    let Some(signer) = op_keys.active() else {
        let m = format!("NatsOperator {op_ns}/{op_name} has no signing key that is not retiring");
        return Err(not_ready(reason::KEYS_PENDING, m));
    };
    Ok(OperatorSigner {
        jwt: op_jwt,
        signer: signer.key.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const REFUSAL: &str =
        "no NatsReferenceGrant in nats-system admits NatsAccount from t to NatsOperator demo";

    #[rstest]
    #[case::never_signed(false, false, None)]
    #[case::grant_withdrawn(true, false, Some("being deleted from every server"))]
    #[case::deletion_recorded(false, true, Some("records its deletion from every server"))]
    fn a_withdrawn_account_says_it_is_no_longer_signed(
        #[case] had_jwt: bool,
        #[case] recorded: bool,
        #[case] says: Option<&str>,
    ) {
        let prev = NatsAccountStatus {
            jwt: had_jwt.then(|| "eyJ...".to_string()),
            ..Default::default()
        };
        let m = withdrawn_message(REFUSAL, &prev, recorded, "nats-system", "demo");
        assert!(m.starts_with(REFUSAL), "{m}");
        match says {
            None => assert_eq!(m, REFUSAL),
            Some(s) => assert!(m.contains("no longer signed") && m.contains(s), "{m}"),
        }
    }
}
