//! NatsSystemAccount: its keys (generated here first), and the system account JWT its
//! NatsOperator signed into that NatsOperator's status, pushed as this object's own with its
//! status.distribution and JWTPushed Events. Only the one spec.systemAccountRef selects is signed.

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::auth::{
    GeneratedKind, NatsSystemAccount, NatsSystemAccountStatus, condition, reason,
};

use super::index::{Feed, Kind};
use super::keys::{self, Subject};
use super::{
    Cond, Context, Error, jwt_hash, merge_conditions, previous_conditions, retry_later, settled,
    write_status,
};
use crate::operator as core;

/// The NatsSystemAccount controller: wakes on NatsOperators.
pub(crate) async fn controller(ctx: Arc<Context>, feed: Feed<NatsSystemAccount>) {
    let wakes = [Kind::Operator, Kind::User, Kind::Grant];
    let c = super::pass::indexed(&ctx, feed, &wakes);
    super::drive(c, ctx, reconcile).await;
}

async fn reconcile(sys: Arc<NatsSystemAccount>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = sys.namespace().unwrap_or_default();
    let name = sys.name_any();
    let generation = sys.meta().generation;
    let prev = sys.status.clone().unwrap_or_default();
    let prev_conds = previous_conditions(&*sys);
    let finish = async |status: NatsSystemAccountStatus,
                        conds: Vec<Cond>,
                        ready: bool|
           -> Result<Action, Error> {
        let status = NatsSystemAccountStatus {
            observed_generation: generation,
            conditions: merge_conditions(
                &prev_conds,
                generation,
                &conds,
                &[condition::SIGNING_KEY_UNTRUSTED],
            ),
            ..status
        };
        write_status(&ctx, &*sys, &status).await?;
        if ready {
            settled(&ctx, &*sys);
            Ok(Action::requeue(ctx.settings.resync))
        } else {
            Ok(Action::requeue(retry_later(&ctx, &*sys)))
        }
    };

    let keys = match keys::resolve(
        &ctx,
        Subject {
            kind: GeneratedKind::SystemAccount,
            namespace: &ns,
            name: &name,
            keys: sys.spec.keys.as_ref(),
            offline: sys.spec.public_key.clone(),
            recorded: prev.public_key.as_deref(),
            may_generate: true,
        },
    )
    .await?
    {
        Ok(k) => k,
        Err(e) => {
            let cond = Cond::new(condition::READY, false, e.reason(), e.message());
            return finish(prev.clone(), vec![cond], false).await;
        }
    };
    let mut status = NatsSystemAccountStatus {
        public_key: Some(keys.public_key.clone()),
        jwt_hash: prev.jwt_hash.clone(),
        distribution: prev.distribution.clone(),
        revocations: prev.revocations.clone(),
        ..NatsSystemAccountStatus::default()
    };

    let op_ns = sys
        .spec
        .operator_ref
        .namespace
        .clone()
        .unwrap_or_else(|| ns.clone());
    let op_name = sys.spec.operator_ref.name.clone();
    let op = ctx.index.operator(&op_ns, &op_name);
    let Some(op) = op else {
        let message = format!("operatorRef {op_ns}/{op_name} not found");
        return finish(
            status,
            vec![
                Cond::new(
                    condition::READY,
                    false,
                    reason::REFERENCE_NOT_FOUND,
                    message.clone(),
                ),
                Cond::new(
                    condition::REFERENCES_RESOLVED,
                    false,
                    reason::REFERENCE_NOT_FOUND,
                    message,
                ),
            ],
            false,
        )
        .await;
    };
    // Across namespaces only through a NatsReferenceGrant in the NatsOperator's (§7).
    let from = controller_kit::grants::From {
        group: nats_api::auth::GROUP,
        kind: "NatsSystemAccount",
        namespace: &ns,
    };
    let to = controller_kit::grants::To {
        group: nats_api::auth::GROUP,
        kind: "NatsOperator",
        namespace: &op_ns,
        name: &op_name,
    };
    if !ctx.index.admits(from, to) {
        let message = format!(
            "operatorRef {op_ns}/{op_name} is not admitted by any NatsReferenceGrant in {op_ns}"
        );
        return finish(
            status,
            vec![
                Cond::new(
                    condition::READY,
                    false,
                    reason::REFERENCE_NOT_PERMITTED,
                    message.clone(),
                ),
                Cond::new(
                    condition::REFERENCES_RESOLVED,
                    false,
                    reason::REFERENCE_NOT_PERMITTED,
                    message,
                ),
            ],
            false,
        )
        .await;
    }
    let resolved = Cond::new(
        condition::REFERENCES_RESOLVED,
        true,
        reason::REFERENCES_RESOLVED,
        format!("operatorRef {op_ns}/{op_name} resolved"),
    );
    if !core::is_live_system_account(&op.spec.system_account_ref, &op_ns, &ns, &name) {
        let cond = Cond::new(
            condition::READY,
            false,
            reason::REFERENCE_NOT_FOUND,
            format!(
                "NatsOperator {op_ns}/{op_name} selects system account {} as its systemAccountRef, not this one; not signed",
                op.spec.system_account_ref.name
            ),
        );
        status.jwt_hash = None;
        status.distribution = None;
        return finish(status, vec![cond, resolved], false).await;
    }
    let op_status = op.status.clone().unwrap_or_default();
    // The revocation record: the NatsOperator signs the system account JWT from it.
    let users = ctx
        .index
        .users_of(nats_api::auth::AccountKind::NatsSystemAccount, &ns, &name);
    let mut record = super::revocation_record(
        &prev.revocations,
        op_status
            .system_account
            .as_ref()
            .and_then(|s| s.jwt.as_deref()),
        &users,
        &keys.signing_public_keys(),
        super::unix_now(),
    );
    // Revocations lost with the status come back from the JWTs the servers hold.
    let holding = super::nats::holding(&ctx, &keys.public_key, prev.distribution.as_ref())
        .await
        .ok()
        .flatten();
    if let Some(h) = &holding {
        for j in &h.jwts {
            if let Ok(c) = nats_claims::decode::<nats_claims::Account>(j) {
                record = crate::revocations::merge_from_jwt(&record, &c);
            }
        }
        record = crate::revocations::prune(
            &record,
            &keys.signing_public_keys(),
            |_| None,
            super::unix_now(),
        );
    }
    status.revocations = record;
    let signed = op_status
        .system_account
        .as_ref()
        .filter(|s| s.public_key.as_deref() == Some(keys.public_key.as_str()))
        .and_then(|s| s.jwt.clone());
    let (Some(jwt), Some(op_jwt)) = (signed, op_status.jwt.clone()) else {
        let cond = Cond::new(
            condition::READY,
            false,
            reason::KEYS_PENDING,
            format!("waiting for NatsOperator {op_ns}/{op_name} to sign this system account"),
        );
        return finish(status, vec![cond, resolved], false).await;
    };
    // Adoption: keys brought from elsewhere, never pushed from here, and a JWT the servers hold
    // for them whose fields the NatsOperator's re-signing from spec would drop, is refused unless
    // spec.adoption.droppedClaims is Accept (the same comparison as a NatsAccount's).
    let adopted = sys.spec.public_key.is_some()
        || sys.spec.keys.as_ref().is_some_and(|k| k.identity.is_some());
    if adopted
        && prev.distribution.is_none()
        && let Some(held) = holding.as_ref().and_then(|h| super::jwt::newest(&h.jwts))
    {
        let dropped = crate::gates::dropped_by_resign(&held, &jwt).unwrap_or_default();
        let policy = sys
            .spec
            .adoption
            .as_ref()
            .map(|a| a.dropped_claims)
            .unwrap_or_default();
        if let Err(m) = crate::gates::adoption(&dropped, policy) {
            let cond = Cond::new(condition::READY, false, reason::ADOPTION_DROPS_CLAIMS, m);
            return finish(status, vec![cond, resolved], false).await;
        }
    }
    status.jwt_hash = Some(jwt_hash(&jwt));
    let mut conds = vec![
        Cond::new(
            condition::READY,
            true,
            reason::SIGNED,
            format!("system account JWT signed by NatsOperator {op_ns}/{op_name}"),
        ),
        resolved,
    ];
    let waits = crate::gates::push_waits_for_lookup(
        adopted && prev.distribution.is_none(),
        holding.is_some(),
        ctx.settings.system_connection.is_some(),
    );
    if waits {
        conds.push(Cond::new(
            condition::DISTRIBUTED,
            false,
            reason::UNREACHABLE,
            "the servers could not be asked which JWT they hold for this adopted system account; nothing is pushed before they are".into(),
        ));
    }
    // Not pushed while the NatsOperator reads RevocationsUnrecovered True (§5.2).
    if !waits && crate::gates::may_push_system_account(&op_status.conditions) {
        let (d, cond) = super::nats::distribute(
            &ctx,
            &*sys,
            &op_jwt,
            &keys.public_key,
            &jwt,
            prev.distribution.as_ref(),
        )
        .await;
        status.distribution = d;
        if cond.reason == reason::UNTRUSTED_SIGNER {
            conds.push(Cond::new(
                condition::SIGNING_KEY_UNTRUSTED,
                true,
                reason::UNTRUSTED_SIGNER,
                cond.message.clone(),
            ));
        }
        conds.push(cond);
    }
    let wait = if conds.iter().all(|c| c.status) {
        ctx.settings.resync
    } else {
        super::WAIT_RETRY
    };
    finish(status, conds, true).await?;
    Ok(Action::requeue(wait))
}
