//! A deleted NatsAccount that was signed stays while a NatsConnection still uses the creds of one
//! of its users (Ready False CredentialsInUse: its NatsOperator does not record it either, see
//! `user::in_use`), then until its NatsOperator's status.deletedAccounts
//! records it (that NatsOperator sends CLAIMS.DELETE, and again to servers that rejoin); then
//! its finalizer is released and its metrics go.

use controller_kit::conditions::Decided;
use controller_kit::finalizer::Cleanup;
use controller_kit::metrics;
use kube::{Resource, ResourceExt};
use nats_api::auth::{
    AccountKind, NatsAccount, NatsAccountStatus, NatsOperator, condition, reason,
};

use crate::controller::Context;
use crate::controller::error::Error;
use crate::controller::finalizer::{deletion_held, force_deleted};
use crate::controller::user::in_use;
use crate::controller::write_status::{merged, write_status};
use crate::deletion_hold::{self, Held, Hold};
use crate::deletions;

/// How soon an account held for its users' creds looks again, should a wake be missed (a
/// NatsConnection's change wakes it).
const IN_USE_RECHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// The cleanup of a deleted account: held (Ready False Distributing, a DeletionHeld Event, again
/// in a second) until `op` (its NatsOperator, from the index) records the deletion or the
/// deletion is forced; then done (its metrics go, the finalizer is released).
pub(super) async fn deleting(
    ctx: &Context,
    acct: &NatsAccount,
    op: Option<&NatsOperator>,
) -> Result<Cleanup, Error> {
    let prev = acct.status.clone().unwrap_or_default();
    let signed = prev.jwt.as_deref().is_some_and(|j| !j.is_empty());
    let force = deletion_hold::force_delete(acct.annotations());
    if let (Some(_), Some(_), true, false) = (&prev.public_key, op, signed, force) {
        let (ns, name) = (acct.namespace().unwrap_or_default(), acct.name_any());
        let users = ctx.index.users_of(AccountKind::NatsAccount, &ns, &name);
        let using = in_use::account_users_in_use(ctx, &users);
        if !using.is_empty() {
            let message = format!(
                "the creds of its users are still in use: {}; the account is deleted on the \
                 servers once they are gone",
                using.join(", ")
            );
            let cond = Decided::new(condition::READY, false, reason::CREDENTIALS_IN_USE, message);
            return held_for(ctx, acct, prev, cond, IN_USE_RECHECK).await;
        }
    }
    if let (Some(pk), Some(op), true) = (&prev.public_key, op, signed) {
        let recorded = op
            .status
            .as_ref()
            .is_some_and(|s| deletions::may_clear_jwt(&s.deleted_accounts, pk));
        if !recorded {
            let waiting_for = format!(
                "NatsOperator {} to record the deletion of {pk}",
                op.name_any()
            );
            let force = deletion_hold::force_delete(acct.annotations());
            match deletion_hold::hold(Held::Account, &waiting_for, force) {
                Hold::Wait(message) => return held(ctx, acct, prev, message).await,
                Hold::Release(message) => force_deleted(ctx, acct, message).await,
            }
        }
    }
    let (ns, name) = (acct.namespace().unwrap_or_default(), acct.name_any());
    ctx.shared.metrics.forget("NatsAccount", &ns, &name);
    ctx.shared.metrics.remove_gauge(
        metrics::ACCOUNT_JWT_EXPIRY,
        &[("namespace", &ns), ("name", &name)],
    );
    ctx.shared.settled(acct);
    Ok(Cleanup::Done)
}

/// Ready False Distributing saying what the deletion waits for, and a DeletionHeld Event.
async fn held(
    ctx: &Context,
    acct: &NatsAccount,
    prev: NatsAccountStatus,
    message: String,
) -> Result<Cleanup, Error> {
    let cond = Decided::new(condition::READY, false, reason::DISTRIBUTING, message);
    let after = ctx.shared.deletion_wait(acct);
    held_for(ctx, acct, prev, cond, after).await
}

/// Ready False as `cond` says, and a DeletionHeld Event; looked at again `after`.
async fn held_for(
    ctx: &Context,
    acct: &NatsAccount,
    prev: NatsAccountStatus,
    cond: Decided,
    after: std::time::Duration,
) -> Result<Cleanup, Error> {
    let generation = acct.meta().generation;
    let status = NatsAccountStatus {
        observed_generation: generation,
        conditions: merged(acct, std::slice::from_ref(&cond), &[]),
        ..prev
    };
    write_status(ctx, acct, &status).await?;
    deletion_held(ctx, acct, &cond).await;
    Ok(Cleanup::Wait {
        after,
        reason: cond.message,
    })
}
