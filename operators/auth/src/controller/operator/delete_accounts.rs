//! The accounts a NatsOperator deletes from the servers (§5.2/§7): every account under it signed
//! once and then deleted, or no longer admitted by a grant, recorded in status.deletedAccounts
//! until its JWT expires, and CLAIMS.DELETE sent for each to every server that has not confirmed
//! it (the rejoin watch goes on between passes; an empty list stops it).

use std::sync::Arc;

use kube::{Resource, ResourceExt};
use nats_api::auth::{AccountKind, DeletedAccount, NatsAccount, NatsOperator, NatsOperatorStatus};
use nats_claims::{Account, NKey};

use crate::controller::{Context, claims_delete};
use crate::{deletions, grants};

/// status.deletedAccounts after this pass, with CLAIMS.DELETE sent for every entry.
pub(super) async fn deleted_accounts(
    ctx: &Context,
    op: &NatsOperator,
    roster: &str,
    accounts: &[Arc<NatsAccount>],
    prev: &NatsOperatorStatus,
    signer: &NKey,
    now: i64,
) -> Vec<DeletedAccount> {
    let (ns, name) = (op.namespace().unwrap_or_default(), op.name_any());
    let grants = ctx.index.grants_in(&ns);
    let mut deleted: Vec<DeletedAccount> = deletions::prune(&prev.deleted_accounts, now);
    for a in accounts {
        let a_ns = a.namespace().unwrap_or_default();
        let admitted = grants::account_admission(&a_ns, &ns, &name, &grants).is_ok();
        let st = a.status.clone().unwrap_or_default();
        if admitted && a.meta().deletion_timestamp.is_none() {
            continue;
        }
        // A deleted account whose users' creds a NatsConnection still uses is deleted on the
        // servers once those are gone (the user of the creds goes first; its pass says so).
        if admitted && users_in_use(ctx, a) {
            continue;
        }
        if let (Some(pk), Some(jwt)) = (&st.public_key, st.jwt.as_deref().filter(|j| !j.is_empty()))
        {
            let expires = nats_claims::decode_unverified::<Account>(jwt)
                .map(|c| c.expires)
                .unwrap_or(0);
            deletions::record(&mut deleted, pk, expires);
        }
    }
    let operator_key = format!("{ns}/{name}");
    match claims_delete::send_deletes(ctx, (&operator_key, roster), &deleted, signer).await {
        Ok(sent) if !sent.is_empty() => {
            tracing::info!(accounts = ?sent, "CLAIMS.DELETE sent");
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "CLAIMS.DELETE not sent; retrying"),
    }
    deleted
}

/// Whether a user of the deleted account `a` still has its creds used by a NatsConnection.
fn users_in_use(ctx: &Context, a: &NatsAccount) -> bool {
    let users = ctx.index.users_of(
        AccountKind::NatsAccount,
        &a.namespace().unwrap_or_default(),
        &a.name_any(),
    );
    !crate::controller::user::in_use::account_users_in_use(ctx, &users).is_empty()
}
