//! A NatsUser its grant no longer admits (§7, [`crate::withdrawal`]): the withdrawal time is
//! recorded in status.withdrawnAt, from which the account's pass revokes the key; once every
//! server holds the revoking JWT the user's live connections are kicked. Ready reads False
//! AccountNotAdmitted throughout, its message saying how far the revocation has gone.

use std::time::Duration;

use nats_api::auth::{NatsUser, NatsUserStatus, condition, reason};

use super::gather::AccountView;
use super::kick_connections::kick_connections;
use super::stop::Stop;
use crate::controller::Context;
use crate::controller::time::{secs_of, time_of};
use crate::distribution;
use crate::withdrawal::{self, Stage};

/// The refusal `refused` (AccountNotAdmitted) of a user that was signed before turned into a
/// withdrawal: status.withdrawnAt recorded, the revocation followed, connections kicked.
/// A user never signed, or whose account is itself not admitted, keeps the plain refusal.
pub(super) async fn withdraw(
    ctx: &Context,
    u: &NatsUser,
    view: &AccountView,
    prev: &NatsUserStatus,
    refused: Stop,
    now: i64,
) -> Stop {
    let Stop::Refused(mut conds) = refused else {
        return refused;
    };
    let recorded = prev.withdrawn_at.as_ref().map(secs_of);
    let key = prev.public_key.as_deref();
    let (Some(at), Some(pk)) = (
        withdrawal::withdrawn_at(recorded, view.admitted, key, now),
        key,
    ) else {
        return Stop::Refused(conds);
    };
    let revoked_at = view
        .jwt
        .as_deref()
        .and_then(|j| nats_claims::decode_unverified::<nats_claims::Account>(j).ok())
        .and_then(|c| c.nats.revocations.get(pk).copied());
    let connected = ctx.settings.system_connection.is_some();
    let every = !connected
        || view
            .distribution
            .as_ref()
            .is_some_and(distribution::all_current);
    let (progress, again) = match withdrawal::stage(revoked_at, at, every) {
        Stage::Signing => (
            format!("key {pk} being revoked in the JWT of {}", view.desc),
            None,
        ),
        Stage::Distributing => {
            let behind = view
                .distribution
                .as_ref()
                .map(|d| format!(" ({})", distribution::describe(d)))
                .unwrap_or_default();
            (
                format!("key {pk} revoked; waiting for every server to hold the JWT{behind}"),
                None,
            )
        }
        Stage::Revoked => {
            let kicking = match &view.public_key {
                Some(account_pk) if connected => {
                    match kick_connections(ctx, u, account_pk, pk).await {
                        Ok(n) => n,
                        Err(e) => return Stop::Failed(e),
                    }
                }
                _ => None,
            };
            match kicking {
                Some(n) => (
                    format!("key {pk} revoked on every server; {n} connection(s) being kicked"),
                    Some(Duration::from_secs(1)),
                ),
                None => (format!("key {pk} revoked on every server"), None),
            }
        }
    };
    for c in conds
        .iter_mut()
        .filter(|c| c.type_ == condition::READY && c.reason == reason::ACCOUNT_NOT_ADMITTED)
    {
        c.message = format!("{}; {progress}", c.message);
    }
    Stop::Withdrawn {
        conds,
        at: time_of(at),
        again,
    }
}
