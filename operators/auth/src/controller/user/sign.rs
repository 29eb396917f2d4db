//! The user JWT: signed by the account signing key its role names (scoped), else the first plain
//! one, kept as it was while nothing changed; with a seed, the creds file to write.

use controller_kit::conditions::Decided;
use kube::ResourceExt;
use nats_api::auth::{NatsUser, reason};
use nats_claims::User;

use super::key::UserKey;
use super::stop::{Stop, not_ready};
use crate::controller::jwt::sign_stable;
use crate::controller::keys::Resolved;
use crate::user::{self as core, Issued};

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
