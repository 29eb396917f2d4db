//! NatsOperator: its keys, the NATS operator JWT (signing keys, system account, strict signing),
//! the system account JWT it signs into its status (no expiry, the stepdown imports), and
//! status.deletedAccounts for accounts deleted or whose grant was withdrawn.
//!
//! A pass, phase by phase (a refusal ends it, written over the status as far as it got):
//!
//! 1. gather [`gather::identity`]: the offline identity, spec.jwt's subject (InvalidJwt).
//! 2. gather [`gather::keys`]: its own keys, generated here first → status.publicKey.
//! 3. gather [`gather::system_account`]: from the index, admitted, with its keys (ReferenceNot*).
//! 4. sign [`sign::operator_jwt`]: checked when kept offline, else signed → status.jwt.
//! 5. refuse [`sign::active_signer`]: the first signing key not retiring (InvalidKeys).
//! 6. observe [`observe::held`]: what the servers hold for the system account.
//! 7. sign [`sign::system_account_jwt`]: stepdown imports, revocations → status.systemAccount.
//! 8. push [`delete_accounts::deleted_accounts`]: CLAIMS.DELETE → status.deletedAccounts.
//! 9. write status [`status::signed`], [`status::write`]: Ready, RetiringKeysInUse, the wait.

mod delete_accounts;
mod gather;
mod observe;
mod sign;
mod status;
mod stop;

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::controller::Action;
use nats_api::auth::{NatsOperator, NatsOperatorStatus};

use self::status::Signed;
use self::stop::Stop;
use super::index::{Feed, Kind};
use super::pass::Wake;
use super::time::unix_now;
use super::{Context, Error, pass};

/// The NatsOperator controller: wakes on its system accounts, accounts and grants.
pub(crate) async fn controller(ctx: Arc<Context>, feed: Feed<NatsOperator>) {
    let wakes = [
        Wake::All(Kind::SystemAccount),
        Wake::All(Kind::Account),
        Wake::All(Kind::Grant),
    ];
    pass::drive(pass::indexed(&ctx, feed, &wakes), ctx, reconcile).await;
}

async fn reconcile(op: Arc<NatsOperator>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut status = op.status.clone().unwrap_or_default();
    let end = phases(&ctx, &op, &mut status).await;
    status::write(&ctx, &op, status, end).await
}

/// The phases in order, each adding to `status` what it decided.
async fn phases(
    ctx: &Context,
    op: &NatsOperator,
    status: &mut NatsOperatorStatus,
) -> Result<Signed, Stop> {
    let prev = op.status.clone().unwrap_or_default();
    let offline = gather::identity(op)?;
    let keys = gather::keys(ctx, op, offline, &prev).await?;
    status.public_key = Some(keys.public_key.clone());
    status.signing_keys = keys.signing_public_keys();
    status.seed_secrets = Some(keys.seed_secrets.clone());
    let system = gather::system_account(ctx, op).await?;
    let now = unix_now();
    status.jwt = Some(sign::operator_jwt(op, &keys, &system, &prev, now)?);
    let signer = sign::active_signer(&keys)?;
    let accounts = ctx
        .index
        .accounts_of(&op.namespace().unwrap_or_default(), &op.name_any());
    let held = observe::held(ctx, &keys.public_key, &system, &prev).await;
    let system_jwt = sign::system_account_jwt(ctx, &system, signer, &accounts, &held, &prev, now)?;
    status.system_account = Some(system_jwt);
    status.deleted_accounts = delete_accounts::deleted_accounts(
        ctx,
        op,
        &keys.public_key,
        &accounts,
        &prev,
        &signer.key,
        now,
    )
    .await;
    Ok(status::signed(
        ctx,
        op,
        &keys,
        &system,
        &accounts,
        status,
        held.recovery,
    ))
}
