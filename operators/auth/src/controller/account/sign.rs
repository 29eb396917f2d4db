//! The account JWT: signed by the NatsOperator's signing key from the spec, the resolved imports
//! and the revocation record; kept while unchanged and not past half its TTL, never older than
//! a JWT a server holds; an adopted JWT re-signing would drop claims of is refused (adoption).

use kube::ResourceExt;
use nats_api::auth::{NatsAccount, NatsAccountStatus, reason};
use nats_claims::{Account, Import, NKey};

use super::recovery::Recovered;
use super::stop::{Stop, not_ready, unresolved_conds};
use crate::account::{AccountInput, account_claims, needs_resign};
use crate::controller::Context;
use crate::controller::jwt::{newest, sign_stable};
use crate::controller::seeds::Resolved;

/// The account JWT of this pass and its validity.
pub(super) struct AccountJwt {
    pub jwt: String,
    pub iat: i64,
    /// 0: never expires.
    pub exp: i64,
}

/// Adoption: a JWT may exist elsewhere for this key, never signed here (keys brought along).
pub(super) fn adopted_elsewhere(acct: &NatsAccount, prev: &NatsAccountStatus) -> bool {
    prev.jwt.is_none()
        && (acct.spec.public_key.is_some()
            || acct
                .spec
                .keys
                .as_ref()
                .is_some_and(|k| k.identity.is_some()))
}

/// Signs the account JWT (InvalidKeys where the spec does not sign; AdoptionDropsClaims where an
/// adopted JWT the servers hold has fields re-signing from spec would drop and
/// spec.adoption.droppedClaims is not Accept).
pub(super) fn sign(
    ctx: &Context,
    acct: &NatsAccount,
    signer: &NKey,
    keys: &Resolved,
    imports: &[Import],
    recovered: &Recovered,
    now: i64,
) -> Result<AccountJwt, Stop> {
    let prev = acct.status.clone().unwrap_or_default();
    let name = acct.name_any();
    let revocations = crate::revocations::as_list(&recovered.record);
    let floor = ctx.iat_floor(&keys.public_key);
    let acct_keys = keys.account_keys();
    let prev_jwt = prev.jwt.clone().filter(|j| {
        nats_claims::decode_unverified::<Account>(j)
            .map(|c| c.issued_at >= floor && !needs_resign(c.issued_at, c.expires, now))
            .unwrap_or(false)
    });
    let signed = sign_stable::<Account, _>(prev_jwt.as_deref(), now.max(floor), |iat| {
        let claims = account_claims(
            &acct.spec,
            AccountInput {
                name: &name,
                public_key: &keys.public_key,
                signing_keys: &acct_keys,
                imports: imports.to_vec(),
                revocations: &revocations,
                issued_at: iat,
            },
        )
        .map_err(|e| e.to_string())?;
        claims
            .encode_issued_at(signer, iat)
            .map_err(|e| e.to_string())
    });
    let jwt =
        signed.map_err(|e| Stop::Refused(unresolved_conds(reason::INVALID_KEYS, e.clone(), e)))?;
    let held_newest = recovered.holding.as_ref().and_then(|h| newest(&h.jwts));
    if adopted_elsewhere(acct, &prev)
        && let Some(held) = &held_newest
    {
        let dropped = crate::gates::dropped_by_resign(held, &jwt).unwrap_or_default();
        let policy = acct
            .spec
            .adoption
            .as_ref()
            .map(|a| a.dropped_claims)
            .unwrap_or_default();
        crate::gates::adoption(&dropped, policy)
            .map_err(|m| not_ready(reason::ADOPTION_DROPS_CLAIMS, m))?;
    }
    let (iat, exp) = nats_claims::decode_unverified::<Account>(&jwt)
        .map(|c| (c.issued_at, c.expires))
        .unwrap_or((now, 0));
    Ok(AccountJwt { jwt, iat, exp })
}
