//! The live connections of a deleted user, kicked once every server refuses its key: CONNZ
//! filtered by account and user key, then KICK on each server holding one.

use controller_kit::conditions::Decided;
use kube::Resource;
use nats_api::auth::{NatsUser, NatsUserStatus, condition, reason};

use crate::controller::Context;
use crate::controller::error::Error;
use crate::controller::nats;
use crate::controller::write_status::{merged, write_status};
use crate::kick;

/// Kicks the deleted user's live connections: CONNZ filtered by account and user key, then
/// KICK on each server holding one, with Ready False Kicking naming what remains written first.
/// Some(n) when n connections were found (the caller looks again), None when none remain or
/// CONNZ failed (logged; the revoked key is refused anyway).
pub(super) async fn kick_connections(
    ctx: &Context,
    u: &NatsUser,
    account_pk: &str,
    user_pk: &str,
) -> Result<Option<usize>, Error> {
    let Ok(Some(wire)) = nats::system_wire(ctx).await else {
        return Ok(None);
    };
    let options = nats_wire::monitor::ConnzOptions::user_of_account(account_pk, user_pk);
    let replies = match wire
        .ping_connz(
            &options,
            nats_wire::Collect::until(std::time::Duration::from_millis(1500)),
        )
        .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "CONNZ of a deleted user failed");
            return Ok(None);
        }
    };
    let targets = kick::targets(&replies, user_pk);
    let Some(message) = kick::kicking_message(user_pk, &targets) else {
        return Ok(None);
    };
    let cond = Decided::new(condition::READY, false, reason::KICKING, message);
    let generation = u.meta().generation;
    let prev = u.status.clone().unwrap_or_default();
    let status = NatsUserStatus {
        observed_generation: generation,
        conditions: merged(u, &[cond], &[]),
        ..prev
    };
    write_status(ctx, u, &status).await?;
    let mut kicked = 0;
    for (server, cid) in &targets {
        match wire.kick(server, *cid).await {
            Ok(_) => kicked += 1,
            Err(e) => tracing::warn!(error = %e, server, cid, "KICK failed"),
        }
    }
    if kicked > 0 {
        ctx.shared
            .events
            .publish(
                u,
                false,
                nats_api::auth::event::USER_KICKED,
                format!("kicked {kicked} connection(s) of revoked user {user_pk}"),
            )
            .await;
    }
    Ok(Some(targets.len()))
}
