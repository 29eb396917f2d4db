//! NatsAccount: admission to its NatsOperator (ReferenceNotPermitted before any key is
//! recorded), keys, PublicKeyInUse, imports resolved from the exports they name (activations
//! read from the exporter's status), activation tokens for its own private exports, the account
//! JWT signed by the NatsOperator's signing key (re-signed at half its jwtTTL), pushed, counted.
//!
//! A pass, phase by phase (a refusal ends it, written over the status as far as it got; a
//! deleted account goes to [`deleting`] instead):
//!
//! 1. gather [`gather::operator`]: the NatsOperator its operatorRef names, from the index.
//! 2. refuse [`gather::admitted`]: found and admitted, before any key is recorded (ReferenceNot*).
//! 3. gather [`gather::own_keys`]: its own keys, generated here first → status.publicKey.
//! 4. refuse [`gather::key_in_use`]: PublicKeyInUse under the NatsOperator.
//! 5. gather [`gather::operator_signer`]: the NatsOperator's JWT and signing key (KeysPending).
//! 6. plan [`imports::resolve`]: each import from the export it names → status.imports; one
//!    that does not resolve (no grant, another NatsOperator's account, ...) is left out of the
//!    JWT and named by Ready False ImportsUnresolved.
//! 7. sign [`activations::sign`]: tokens for its private exports → status.activations.
//! 8. observe [`recovery::record`], [`recovery::recover`]: users, servers → status.revocations.
//! 9. sign [`sign::sign`]: the account JWT (AdoptionDropsClaims) → status.jwt, jwtHash.
//! 10. push [`push::push`]: to every server → status.distribution, Distributed.
//! 11. write status [`status::ready`], [`status::write`]: at the resourceVersion read.

mod activations;
mod deleting;
mod gather;
mod imports;
mod push;
mod recovery;
mod sign;
mod status;
mod stop;

use std::sync::Arc;

use kube::runtime::controller::Action;
use nats_api::auth::{NatsAccount, NatsAccountStatus, NatsOperator};

use self::status::Signed;
use self::stop::Stop;
use super::finalizer;
use super::index::{Feed, Kind};
use super::jwt::jwt_hash;
use super::pass::Wake;
use super::time::unix_now;
use super::wakes;
use super::{Context, Error, pass};

/// The NatsAccount controller: wakes on NatsOperators, other accounts (imports, activations,
/// key uniqueness), system accounts, grants and users.
pub(crate) async fn controller(ctx: Arc<Context>, feed: Feed<NatsAccount>) {
    let wakes = [
        Wake::All(Kind::Operator),
        Wake::All(Kind::Account),
        Wake::All(Kind::SystemAccount),
        Wake::All(Kind::Grant),
        Wake::Related(Kind::User, wakes::account_of_user),
        Wake::Related(Kind::Connection, wakes::accounts_held_for_creds),
    ];
    pass::drive(pass::indexed(&ctx, feed, &wakes), ctx, reconcile).await;
}

/// One pass: the finalizer holds a deleted account until its NatsOperator records the
/// deletion ([`deleting`]); a live account runs its phases.
pub(crate) async fn reconcile(acct: Arc<NatsAccount>, ctx: Arc<Context>) -> Result<Action, Error> {
    let op = gather::operator(&ctx, &acct);
    let (live_op, deleted_op) = (op.clone(), op);
    let ctx: &Context = &ctx;
    finalizer::reconcile(
        ctx,
        acct,
        true,
        |acct| live(ctx, acct, live_op),
        |acct| async move { deleting::deleting(ctx, &acct, deleted_op.as_deref()).await },
    )
    .await
}

/// A live account: its phases, then its status.
async fn live(
    ctx: &Context,
    acct: Arc<NatsAccount>,
    op: Option<Arc<NatsOperator>>,
) -> Result<Action, Error> {
    let mut status = acct.status.clone().unwrap_or_default();
    let end = phases(ctx, &acct, op, &mut status).await;
    status::write(ctx, &acct, status, end).await
}

/// The phases in order, each adding to `status` what it decided.
async fn phases(
    ctx: &Context,
    acct: &NatsAccount,
    op: Option<Arc<NatsOperator>>,
    status: &mut NatsAccountStatus,
) -> Result<Signed, Stop> {
    let prev = acct.status.clone().unwrap_or_default();
    let admitted = gather::admitted(ctx, acct, op, &prev)?;
    let keys = gather::own_keys(ctx, acct, &prev).await?;
    status.public_key = Some(keys.public_key.clone());
    gather::key_in_use(ctx, acct, &admitted, &keys.public_key)?;
    let operator = gather::operator_signer(ctx, &admitted).await?;
    let imports = imports::resolve(ctx, acct, &keys.public_key).await?;
    status.imports = imports.states;
    let now = unix_now();
    let activations = activations::sign(ctx, acct, &keys, &prev, now)?;
    status.activations = activations.tokens.clone();
    let record = recovery::record(ctx, acct, &keys, &prev, now).await;
    let operator_key = crate::controller::nats::roster_key(&admitted.op);
    let under = (operator_key.as_str(), operator.jwt.as_str());
    let recovered = recovery::recover(ctx, under, &keys, &prev, record, now).await?;
    status.revocations = recovered.record.clone();
    let signed = sign::sign(
        ctx,
        acct,
        &operator.signer,
        &keys,
        &imports.imports,
        &recovered,
        now,
    )?;
    status.jwt_hash = Some(jwt_hash(&signed.jwt));
    status.jwt = Some(signed.jwt.clone());
    status::record_expiry(ctx, acct, signed.exp);
    let asked = recovered.holding.as_ref();
    let pk = &keys.public_key;
    let pushed = push::push(ctx, acct, under, pk, &signed.jwt, asked).await;
    status.distribution = pushed.distribution;
    let unrecovered = recovered.unrecovered;
    let unrecovered_now = unrecovered.as_ref().is_some_and(|c| c.status);
    let refused = &imports.refused;
    let mut conds = status::ready(acct, &admitted, &activations, &signed, refused);
    conds.extend(pushed.conds);
    conds.extend(status::retiring_in_use(ctx, acct, &keys).await?);
    conds.extend(unrecovered);
    let soon = !pushed.current || activations.unsigned > 0 || unrecovered_now;
    let wait = status::again(ctx, &signed, now, soon);
    let refused = !refused.is_empty();
    Ok(Signed {
        conds,
        wait,
        refused,
    })
}
