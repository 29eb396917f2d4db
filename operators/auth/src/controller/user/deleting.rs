//! A deleted NatsUser: held first while a NatsConnection still names its creds Secret
//! ([`in_use`]: Ready False CredentialsInUse, nothing revoked or deleted). Then its key is
//! revoked in the account JWT (the account's pass adds it from the deletion time); once every server holds that JWT and no replaced key is pending, its live
//! connections are kicked, its creds Secret goes last, and the finalizer is released. Without a
//! system connection nothing is pushed or kicked: the revocation signed is enough.
//!
//! The account is read from the index. Its status carries the JWT and the distribution counting
//! it in one write, and neither fact comes undone, so a copy one event behind can only hold the
//! finalizer longer (see the index's module doc).

use controller_kit::conditions::Decided;
use controller_kit::finalizer::Cleanup;
use kube::{Resource, ResourceExt};
use nats_api::auth::{NatsUser, NatsUserStatus, condition, reason};

use super::gather::AccountView;
use super::in_use;
use super::kick_connections::kick_connections;
use crate::controller::Context;
use crate::controller::creds::delete_creds;
use crate::controller::error::Error;
use crate::controller::finalizer::{deletion_held, force_deleted};
use crate::controller::time::secs_of;
use crate::controller::write_status::{merged, write_status};
use crate::deletion_hold::{self, Held, Hold};
use crate::{distribution, user_keys};

/// The cleanup of a deleted user: held (Ready False Distributing, a DeletionHeld Event) until
/// its key is revoked on every server, waiting while connections are kicked; then done (its
/// creds Secret and metrics go, the finalizer is released).
pub(super) async fn deleting(
    ctx: &Context,
    u: &NatsUser,
    view: Option<&AccountView>,
) -> Result<Cleanup, Error> {
    // The user of the creds goes first: nothing is revoked or deleted while a NatsConnection
    // still names its Secret (`in_use`), whatever became of the account.
    if let Some(wait) = in_use::hold_while_in_use(ctx, u).await? {
        return Ok(wait);
    }
    let prev = u.status.clone().unwrap_or_default();
    let at = u
        .meta()
        .deletion_timestamp
        .as_ref()
        .map(secs_of)
        .unwrap_or(0);
    let claims = view
        .and_then(|v| v.jwt.as_deref())
        .and_then(|j| nats_claims::decode_unverified::<nats_claims::Account>(j).ok());
    if let (Some(pk), Some(view), Some(claims)) = (&prev.public_key, view, claims)
        && view.admitted
    {
        let revoked = claims.nats.revocations.get(pk).is_some_and(|t| *t >= at);
        let pending = user_keys::pending(&prev.replaced_keys, &claims.nats.revocations);
        let connected = ctx.settings.system_connection.is_some();
        let current = !connected
            || view
                .distribution
                .as_ref()
                .is_some_and(distribution::all_current);
        let force = deletion_hold::force_delete(u.annotations());
        if !revoked || !user_keys::finalizer_may_proceed(current, &pending) {
            let mut waiting_for = format!("every server to hold the account JWT revoking {pk}");
            if let Some(d) = &view.distribution {
                waiting_for.push_str(&format!(" ({})", distribution::describe(d)));
            }
            match deletion_hold::hold(Held::User, &waiting_for, force) {
                Hold::Wait(message) => return held(ctx, u, prev, message).await,
                Hold::Release(message) => force_deleted(ctx, u, message).await,
            }
        }
        // Ready reads False Kicking while connections remain; the finalizer waits for a CONNZ
        // that finds none (force-delete does not wait for it).
        if connected
            && !force
            && let Some(account_pk) = &view.public_key
            && let Some(n) = kick_connections(ctx, u, account_pk, pk).await?
        {
            return Ok(Cleanup::Wait {
                after: ctx.shared.deletion_wait(u),
                reason: format!("{n} connections of {pk} being kicked"),
            });
        }
    }
    if let Some(c) = &u.spec.credentials {
        delete_creds(ctx, u, &c.secret_key_ref.name).await?;
    }
    ctx.shared.metrics.forget(
        "NatsUser",
        &u.namespace().unwrap_or_default(),
        &u.name_any(),
    );
    ctx.shared.settled(u);
    Ok(Cleanup::Done)
}

/// Ready False Distributing saying what the deletion waits for, and a DeletionHeld Event.
async fn held(
    ctx: &Context,
    u: &NatsUser,
    prev: NatsUserStatus,
    message: String,
) -> Result<Cleanup, Error> {
    let cond = Decided::new(condition::READY, false, reason::DISTRIBUTING, message);
    let generation = u.meta().generation;
    let status = NatsUserStatus {
        observed_generation: generation,
        conditions: merged(u, std::slice::from_ref(&cond), &[]),
        ..prev
    };
    write_status(ctx, u, &status).await?;
    deletion_held(ctx, u, &cond).await;
    Ok(Cleanup::Wait {
        after: ctx.shared.deletion_wait(u),
        reason: cond.message,
    })
}
