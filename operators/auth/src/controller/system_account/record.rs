//! The system account's revocation record (§5.3), which its NatsOperator signs the system
//! account JWT from: the record before, the JWT in force, the users of this system account (from
//! the index), and the revocations of the JWTs the servers hold (those lost with the status come
//! back from them).

use kube::ResourceExt;
use nats_api::auth::{AccountKind, NatsSystemAccount, NatsSystemAccountStatus, Revocation};

use super::gather::Operator;
use crate::controller::Context;
use crate::controller::nats::{self, Holding};
use crate::controller::revocation::revocation_record;
use crate::controller::seeds::Resolved;

/// The record, and what the servers hold (`None` where they could not be asked).
pub(super) struct Recorded {
    pub record: Vec<Revocation>,
    pub holding: Option<Holding>,
}

/// The revocation record of this pass.
pub(super) async fn record(
    ctx: &Context,
    sys: &NatsSystemAccount,
    op: &Operator,
    keys: &Resolved,
    prev: &NatsSystemAccountStatus,
    now: i64,
) -> Recorded {
    let (ns, name) = (sys.namespace().unwrap_or_default(), sys.name_any());
    let users = ctx
        .index
        .users_of(AccountKind::NatsSystemAccount, &ns, &name);
    let in_force = op
        .object
        .status
        .as_ref()
        .and_then(|s| s.system_account.as_ref())
        .and_then(|s| s.jwt.as_deref());
    let signing = keys.signing_public_keys();
    // A system account's users go the Controllers' way: revoked once their own pass marks them.
    let revocable = crate::controller::user::in_use::revocable;
    let mut record = revocation_record(
        &prev.revocations,
        in_force,
        &users,
        &signing,
        now,
        revocable,
    );
    let holding = nats::holding(
        ctx,
        &nats::roster_key(&op.object),
        &keys.public_key,
        prev.distribution.as_ref(),
    )
    .await
    .ok()
    .flatten();
    if let Some(h) = &holding {
        for j in &h.jwts {
            if let Ok(c) = nats_claims::decode::<nats_claims::Account>(j) {
                record = crate::revocations::merge_from_jwt(&record, &c);
            }
        }
        record = crate::revocations::prune(&record, &signing, |_| None, now);
    }
    Recorded { record, holding }
}
