//! The user JWT: signed by the account signing key its role names (scoped), else the first plain
//! one, kept as it was while nothing changed; with a seed, the creds file to write.

use controller_kit::conditions::Decided;
use kube::ResourceExt;
use nats_api::auth::{NatsUser, reason};
use nats_claims::User;

use super::gather::AccountView;
use super::key::UserKey;
use super::stop::{Stop, not_ready};
use crate::controller::jwt::sign_stable;
use crate::controller::seeds::Resolved;
use crate::controller::time::secs_of;
use crate::user::{self as core, Issued};
use crate::withdrawal::{self, Reissue};
use nats_api::auth::NatsUserStatus;

/// Signs the user JWT with the key its role names (InvalidKeys where none fits).
pub(super) fn issue(
    u: &NatsUser,
    key: &UserKey,
    account_pk: &str,
    account_keys: &Resolved,
    now: i64,
    resolved: &Decided,
) -> Result<Issued, Stop> {
    let listed: Vec<_> = account_keys
        .signing
        .iter()
        .map(|s| (s.as_account_key(), s.retiring))
        .collect();
    let signer = core::signing_key_for(&u.spec, &listed)
        .map(|k| k.public_key.clone())
        .map_err(|e| not_ready(reason::INVALID_KEYS, e.to_string(), resolved))?;
    let Some(signer) = account_keys
        .signing
        .iter()
        .find(|s| s.key.public_key() == signer)
    else {
        return Err(Stop::Refused(vec![resolved.clone()]));
    };
    let claims = core::user_claims(&u.name_any(), &u.spec, &key.public_key, account_pk);
    sign_stable::<User, _>(key.prev_jwt.as_deref(), now, |iat| {
        claims.encode_issued_at(&signer.key, iat)
    })
    .and_then(|jwt| {
        let iat = nats_claims::decode_unverified::<User>(&jwt)
            .map(|c| c.issued_at)
            .unwrap_or(now);
        core::issue(&claims, &signer.key, key.seed.as_ref(), iat)
    })
    .map_err(|e| not_ready(reason::INVALID_KEYS, e.to_string(), resolved))
}

/// A user admitted again after a withdrawal (§7), or whose JWT of before the account JWT
/// revokes, is issued a fresh JWT, never the revoked one: `prev_jwt` dropped, or the pass put
/// off while a JWT issued now would still be revoked.
pub(super) fn after_withdrawal(
    mut key: UserKey,
    prev: &NatsUserStatus,
    view: &AccountView,
    now: i64,
) -> Result<UserKey, Stop> {
    let revoked_at = view
        .jwt
        .as_deref()
        .and_then(|j| nats_claims::decode_unverified::<nats_claims::Account>(j).ok())
        .and_then(|c| c.nats.revocations.get(&key.public_key).copied());
    let prev_iat = key
        .prev_jwt
        .as_deref()
        .and_then(|j| nats_claims::decode_unverified::<User>(j).ok())
        .map(|c| c.issued_at);
    let withdrawn_at = prev.withdrawn_at.as_ref().map(secs_of);
    match withdrawal::reissue(withdrawn_at, revoked_at, prev_iat, now) {
        Reissue::Stable => Ok(key),
        Reissue::Fresh => {
            key.prev_jwt = None;
            Ok(key)
        }
        Reissue::After(d) => Err(Stop::Again(d)),
    }
}
