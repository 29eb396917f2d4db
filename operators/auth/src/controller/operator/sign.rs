//! What a NatsOperator signs: the NATS operator JWT (checked when kept offline, else signed by
//! the identity), and the system account JWT into its status (no expiry, the prefixed stepdown
//! imports of every account under this NatsOperator that exports jetstream-stepdown, the system
//! account's revocations, never older than a JWT a server holds).

use std::sync::Arc;

use kube::ResourceExt;
use nats_api::auth::{NatsAccount, NatsOperator, NatsOperatorStatus, SystemAccountState, reason};
use nats_claims::{Account, Operator};

use super::gather::SystemAccount;
use super::observe::Held;
use super::stop::{Stop, not_ready};
use crate::account::{AccountInput, system_account_claims};
use crate::controller::Context;
use crate::controller::jwt::sign_stable;
use crate::controller::seeds::{Resolved, SigningSeed};
use crate::controller::time::secs_of;
use crate::{exports, operator as core};

/// The NATS operator JWT: spec.jwt checked against the keys (InvalidJwt), else signed by the
/// identity, kept as it was while nothing changed (InvalidKeys without an identity seed).
pub(super) fn operator_jwt(
    op: &NatsOperator,
    keys: &Resolved,
    system: &SystemAccount,
    prev: &NatsOperatorStatus,
    now: i64,
) -> Result<String, Stop> {
    let signing = keys.signing_public_keys();
    let sys_pk = &system.keys.public_key;
    match (&op.spec.jwt, &keys.identity) {
        (Some(jwt), _) => core::check_offline_operator(jwt, &signing, sys_pk)
            .map(|_| jwt.clone())
            .map_err(|e| not_ready(reason::INVALID_JWT, e.to_string())),
        (None, Some(identity)) => {
            let claims = core::operator_claims(&op.name_any(), &keys.public_key, &signing, sys_pk);
            sign_stable::<Operator, _>(prev.jwt.as_deref(), now, |iat| {
                core::sign_operator(&claims, identity, iat)
            })
            .map_err(|e| not_ready(reason::INVALID_KEYS, e.to_string()))
        }
        (None, None) => Err(not_ready(reason::INVALID_KEYS, "no identity seed".into())),
    }
}

/// The signing key that signs accounts: the first not retiring (InvalidKeys when every one is).
pub(super) fn active_signer(keys: &Resolved) -> Result<&SigningSeed, Stop> {
    keys.active().ok_or_else(|| {
        not_ready(
            reason::INVALID_KEYS,
            "every signing key is retiring: none signs accounts".into(),
        )
    })
}

/// The account keys of the accounts under this NatsOperator that export jetstream-stepdown.
fn stepdown(accounts: &[Arc<NatsAccount>]) -> Vec<String> {
    let mut stepdown: Vec<String> = accounts
        .iter()
        .filter(|a| exports::exports_stepdown(&a.spec.exports))
        .filter_map(|a| a.status.as_ref().and_then(|s| s.public_key.clone()))
        .collect();
    stepdown.sort();
    stepdown.dedup();
    stepdown
}

/// The system account JWT: kept while a silent server may hold revocations the record lacks and
/// it was distributed, else signed (kept as it was while unchanged and not older than a JWT a
/// server holds) from the system account's revocations and the stepdown exporters.
pub(super) fn system_account_jwt(
    ctx: &Context,
    system: &SystemAccount,
    signer: &SigningSeed,
    accounts: &[Arc<NatsAccount>],
    held: &Held,
    prev: &NatsOperatorStatus,
    now: i64,
) -> Result<SystemAccountState, Stop> {
    let sys_status = system.object.status.clone().unwrap_or_default();
    let sys_keys = &system.keys;
    let stepdown = stepdown(accounts);
    let revocations: Vec<(String, i64)> = sys_status
        .revocations
        .iter()
        .map(|r| (r.public_key.clone(), secs_of(&r.at)))
        .collect();
    let sys_signing = sys_keys.account_keys();
    let prev_sys_jwt = prev.system_account.as_ref().and_then(|s| s.jwt.clone());
    let floor = ctx.iat_floor(&sys_keys.public_key);
    let keep_prev = prev_sys_jwt.filter(|j| {
        held.hold
            || nats_claims::decode_unverified::<Account>(j).is_ok_and(|c| c.issued_at >= floor)
    });
    let jwt = if let (true, Some(j)) = (held.hold && sys_status.distribution.is_some(), &keep_prev)
    {
        Ok(j.clone())
    } else {
        sign_stable::<Account, _>(keep_prev.as_deref(), now.max(floor), |iat| {
            let claims = system_account_claims(
                AccountInput {
                    name: &system.name,
                    public_key: &sys_keys.public_key,
                    signing_keys: &sys_signing,
                    imports: vec![],
                    revocations: &revocations,
                    issued_at: iat,
                },
                &stepdown,
            )
            .map_err(|e| e.to_string())?;
            claims
                .encode_issued_at(&signer.key, iat)
                .map_err(|e| e.to_string())
        })
    };
    let jwt = jwt.map_err(|e| not_ready(reason::INVALID_KEYS, e))?;
    Ok(SystemAccountState {
        name: Some(system.name.clone()),
        public_key: Some(sys_keys.public_key.clone()),
        jwt: Some(jwt),
        revocations: sys_status.revocations,
    })
}
