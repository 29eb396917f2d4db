//! An account's revocation record (§5.3) as a pass rebuilds it, for a NatsAccount and a
//! NatsSystemAccount alike, from the record before, the JWT it replaces and the account's users.

use std::sync::Arc;

use nats_api::auth::{NatsUser, Revocation};

use super::finalizer;
use super::time::secs_of;
use crate::revocations;

/// The previous record merged with the JWT it replaces, plus the key of every user of the
/// account being deleted (from its deletion time), of every user whose grant was withdrawn (from
/// status.withdrawnAt) and every key a user replaced, each with the account's signing keys as
/// issuers; pruned of entries none of whose signing keys is left.
///
/// `users` come from the index, which may lag a watch event: a user missing from it adds
/// nothing, and nothing is ever dropped for a user that is missing (an entry goes only with its
/// signing keys), so a lagging read delays a revocation by one pass and never removes one.
/// `revocable` says whether a deleted user may be revoked now (its creds not in use:
/// [`super::user::in_use`]).
pub(crate) fn revocation_record(
    prev: &[Revocation],
    prev_jwt: Option<&str>,
    users: &[Arc<NatsUser>],
    signing_keys: &[String],
    now: i64,
    revocable: impl Fn(&NatsUser) -> bool,
) -> Vec<Revocation> {
    let mut record = match prev_jwt
        .filter(|j| !j.is_empty())
        .and_then(|j| nats_claims::decode_unverified::<nats_claims::Account>(j).ok())
    {
        Some(c) => revocations::merge_from_jwt(prev, &c),
        None => prev.to_vec(),
    };
    for u in users {
        let Some(st) = &u.status else { continue };
        // A deleted user whose creds a NatsConnection still uses is revoked once that is gone.
        if let (Some(at), Some(pk)) = (&u.metadata.deletion_timestamp, &st.public_key)
            && finalizer::has(&**u)
            && revocable(u)
        {
            revocations::revoke(&mut record, pk, secs_of(at), signing_keys);
        }
        // A user its grant no longer admits (§7): revoked from the withdrawal time.
        if let (Some(at), Some(pk)) = (&st.withdrawn_at, &st.public_key) {
            revocations::revoke(&mut record, pk, secs_of(at), signing_keys);
        }
        for r in &st.replaced_keys {
            revocations::revoke(&mut record, &r.public_key, secs_of(&r.at), signing_keys);
        }
    }
    revocations::prune(&record, signing_keys, |_| None, now)
}
