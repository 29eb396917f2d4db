//! NatsSystemAccount: its keys (generated here first), and the system account JWT its
//! NatsOperator signed into that NatsOperator's status, pushed as this object's own with its
//! status.distribution and JWTPushed Events. Only the one spec.systemAccountRef selects is signed.
//!
//! A pass, phase by phase (a refusal ends it, written over the status as far as it got):
//!
//! 1. gather [`gather::keys`]: its own keys, generated here first → status.publicKey.
//! 2. gather [`gather::operator`]: from the index, admitted, selecting this one (ReferenceNot*).
//! 3. observe [`record::record`]: users (index) and the servers' JWTs → status.revocations.
//! 4. gather [`push::signed`]: the JWT the NatsOperator signed for this key (KeysPending).
//! 5. refuse [`push::adoption`]: an adopted JWT re-signing would drop (AdoptionDropsClaims).
//! 6. push [`push::push`]: unless it must wait → status.jwtHash, status.distribution.
//! 7. write status [`status::write`]: Ready Signed, ReferencesResolved, Distributed, the wait.

mod gather;
mod push;
mod record;
mod status;
mod stop;

use std::sync::Arc;

use controller_kit::conditions::Decided;
use kube::runtime::controller::Action;
use nats_api::auth::{NatsSystemAccount, NatsSystemAccountStatus, condition, reason};

use self::stop::Stop;
use super::index::{Feed, Kind};
use super::jwt::jwt_hash;
use super::pass::Wake;
use super::time::unix_now;
use super::wakes;
use super::{Context, Error, pass};

/// The NatsSystemAccount controller: wakes on NatsOperators, its users and grants.
pub(crate) async fn controller(ctx: Arc<Context>, feed: Feed<NatsSystemAccount>) {
    let wakes = [
        Wake::All(Kind::Operator),
        Wake::Related(Kind::User, wakes::system_account_of_user),
        Wake::All(Kind::Grant),
    ];
    pass::drive(pass::indexed(&ctx, feed, &wakes), ctx, reconcile).await;
}

async fn reconcile(sys: Arc<NatsSystemAccount>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut status = sys.status.clone().unwrap_or_default();
    let end = phases(&ctx, &sys, &mut status).await;
    status::write(&ctx, &sys, status, end).await
}

/// The phases in order, each adding to `status` what it decided; the conditions of the end.
async fn phases(
    ctx: &Context,
    sys: &NatsSystemAccount,
    status: &mut NatsSystemAccountStatus,
) -> Result<Vec<Decided>, Stop> {
    let prev = sys.status.clone().unwrap_or_default();
    let keys = gather::keys(ctx, sys, &prev).await?;
    status.public_key = Some(keys.public_key.clone());
    let op = gather::operator(ctx, sys)?;
    let recorded = record::record(ctx, sys, &op, &keys, &prev, unix_now()).await;
    status.revocations = recorded.record;
    let holding = recorded.holding.as_ref();
    let signed = push::signed(&op, &keys)?;
    push::adoption(sys, &op, holding, &signed, &prev)?;
    status.jwt_hash = Some(jwt_hash(&signed.jwt));
    let pushed = push::push(ctx, sys, &op, &keys, &signed, holding, &prev).await;
    status.distribution = pushed.distribution;
    let ready = Decided::new(
        condition::READY,
        true,
        reason::SIGNED,
        format!("system account JWT signed by NatsOperator {}", op.name),
    );
    Ok([vec![ready, op.resolved], pushed.conds].concat())
}
