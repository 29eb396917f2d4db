//! NatsUser: admission (AccountNotAdmitted), PublicKeyInUse within its account, the user JWT
//! signed by the account signing key its role or the first plain one names, and the creds file
//! written to credentials.secretKeyRef (or, with publicKey, the JWT alone in status).
//!
//! A pass, phase by phase (a refusal ends it, written over the status of before; a deleted user
//! goes to [`deleting`] instead):
//!
//! 1. gather [`gather::account`]: its account, from the index (ReferenceNotFound); the finalizer
//!    added once it is found.
//! 2. refuse [`refuse::admission`]: its account admitted, and to this namespace; a user signed
//!    before whose grant is gone is withdrawn instead ([`withdraw::withdraw`]): revoked, kicked.
//! 3. gather [`gather::account_keys`]: the account's public key and signing keys (KeysPending).
//! 4. gather [`key::user_key`]: publicKey, else the creds Secret's seed, else a new one (the
//!    Secret read first only for a user signed before, [`key::read_first`]; a user's first pass
//!    creates it, and reads it and runs 4–7 again only where that create finds one there).
//! 5. refuse [`refuse::key_in_use`]: PublicKeyInUse among the account's users.
//! 6. sign [`sign::after_withdrawal`], [`sign::issue`]: the user JWT (fresh, after the
//!    revocation, once a grant admits a withdrawn user again), and the creds file (InvalidKeys).
//! 7. apply [`publish::publish`]: status.jwt, or the creds Secret replaced at its version.
//! 8. write status [`status::signed`], [`status::write`]: status.replacedKeys, Ready.
//!
//! What a user's first pass asks of the apiserver (a user with a creds Secret, its account
//! Ready): the work floor is three writes — the finalizer added (a PATCH), the creds Secret
//! created (a POST), the status applied (a PATCH). The user is read fresh before a pass (a GET,
//! [`super::pass::drive`]) only while a write of this controller's to it is not back in the
//! watch: a pass over a stale status would sign again what was just signed. Nothing else: the
//! account, its grants and the other users come from the index; the account's signing keys are
//! read once per account version, not per user ([`super::seeds::kept`]; they were two Secret GETs
//! a user); the creds Secret is read first only for a user signed before ([`key::read_first`]; a
//! GET answering 404 a new user); the NatsConnection list is only a deleted user's
//! ([`in_use`]). A settled pass again (a resync, a wake) costs the creds Secret's GET, and
//! writes nothing. Measured (`just bench`, 1,000 NatsUsers): 3.74 requests a user, 4.67 with
//! the GET before every pass.

mod deleting;
mod gather;
pub(crate) mod in_use;
mod key;
mod kick_connections;
mod publish;
mod refuse;
mod sign;
mod status;
mod stop;
mod withdraw;

use std::sync::Arc;

use controller_kit::blocked::Blocked;
use kube::runtime::controller::Action;
use nats_api::auth::{NatsUser, reason};

use self::gather::AccountView;
use self::status::Signed;
use self::stop::Stop;
use super::finalizer;
use super::index::{Feed, Kind};
use super::pass::Wake;
use super::time::unix_now;
use super::wakes;
use super::{Context, Error, pass};

/// The NatsUser controller: wakes on accounts, system accounts, other users (key uniqueness),
/// NatsOperators and grants.
pub(crate) async fn controller(ctx: Arc<Context>, feed: Feed<NatsUser>) {
    let wakes = [
        Wake::Related(Kind::Account, wakes::users_of_account),
        Wake::Related(Kind::SystemAccount, wakes::users_of_system_account),
        Wake::Related(Kind::Operator, wakes::users_of_operator),
        Wake::Related(Kind::User, wakes::users_refused_for_key),
        Wake::All(Kind::Grant),
        Wake::Related(Kind::Connection, wakes::users_held_for_creds),
    ];
    pass::drive(pass::indexed(&ctx, feed, &wakes), ctx, reconcile).await;
}

/// One pass: the finalizer holds a deleted user until its key is revoked everywhere (§5.3,
/// [`deleting`]); it is wanted once the user's account is found, and kept from then on. A live
/// user runs its phases.
pub(crate) async fn reconcile(u: Arc<NatsUser>, ctx: Arc<Context>) -> Result<Action, Error> {
    let view = gather::account(&ctx, &u);
    let wants = view.is_some() || finalizer::has(&*u);
    let view = view.as_ref();
    let ctx: &Context = &ctx;
    finalizer::reconcile(
        ctx,
        u,
        wants,
        |u| live(ctx, u, view),
        |u| async move { deleting::deleting(ctx, &u, view).await },
    )
    .await
}

/// A live user: its phases (or ReferenceNotFound), then its status.
async fn live(
    ctx: &Context,
    u: Arc<NatsUser>,
    view: Option<&AccountView>,
) -> Result<Action, Error> {
    let end = match view {
        None => Err(not_found(&u)),
        Some(view) => phases(ctx, &u, view).await,
    };
    status::write(ctx, &u, end).await
}

/// ReferenceNotFound: the account its accountRef names is not there.
fn not_found(u: &NatsUser) -> Stop {
    let (kind, ns, name) = super::refs::account_of(u);
    let m = format!(
        "accountRef {} {ns}/{name} not found",
        super::refs::kind_name(kind)
    );
    let blocked = Blocked::new(reason::REFERENCE_NOT_FOUND, m);
    Stop::Refused(vec![
        blocked.condition(nats_api::auth::condition::READY),
        blocked.condition(nats_api::auth::condition::REFERENCES_RESOLVED),
    ])
}

/// The phases in order, from the account found to the status of a signed user.
async fn phases(ctx: &Context, u: &NatsUser, view: &AccountView) -> Result<Signed, Stop> {
    let prev = u.status.clone().unwrap_or_default();
    let now = unix_now();
    if let Err(refused) = refuse::admission(ctx, u, view) {
        return Err(withdraw::withdraw(ctx, u, view, &prev, refused, now).await);
    }
    let resolved = status::resolved(view);
    let (account_pk, account_keys) = gather::account_keys(ctx, view, &resolved).await?;
    let (prev, resolved_ref) = (&prev, &resolved);
    let attempt = |read: bool| {
        let (account_pk, account_keys) = (&account_pk, &*account_keys);
        async move {
            let key = key::user_key(ctx, u, prev, resolved_ref, read).await?;
            refuse::key_in_use(ctx, u, view, &key.public_key, resolved_ref)?;
            let key = sign::after_withdrawal(key, prev, view, now)?;
            let issued = sign::issue(u, &key, account_pk, account_keys, now, resolved_ref)?;
            let published = publish::publish(ctx, u, view, &key, issued, resolved_ref).await?;
            Ok::<_, Stop>((key.public_key, published))
        }
    };
    let read = key::read_first(prev);
    let (public_key, published) = match attempt(read).await {
        // The create found a Secret there: judged from what it holds, as if read first.
        Err(Stop::SecretChanged) if !read => attempt(true).await?,
        other => other?,
    };
    Ok(status::signed(
        prev, view, public_key, published, resolved, now,
    ))
}
