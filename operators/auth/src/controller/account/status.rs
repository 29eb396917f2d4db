//! The end of a NatsAccount pass: the conditions of a signed account (Ready, ReferencesResolved,
//! RetiringKeysInUse), when to look again (at half the JWT's TTL, sooner while the servers are
//! behind or an importer has no key), the expiry gauge, and the status written at the
//! resourceVersion it was read at.

use std::time::Duration;

use controller_kit::conditions::Decided;
use controller_kit::metrics;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::auth::{AccountKind, NatsAccount, NatsAccountStatus, condition, reason};

use super::activations::Activations;
use super::gather::Admitted;
use super::sign::AccountJwt;
use super::stop::Stop;
use crate::controller::error::Error;
use crate::controller::pass::{retry_later, settled};
use crate::controller::seeds::Resolved;
use crate::controller::time::time_of;
use crate::controller::write_status::{merged, write_status_at};
use crate::controller::{Context, WAIT_RETRY, creds};

/// A signed account's conditions and when it is looked at again.
pub(super) struct Signed {
    pub conds: Vec<Decided>,
    pub wait: Duration,
    /// Signed without a refused import: looked at again within the refusal backoff too, since
    /// an activation Secret that would resolve it wakes nothing.
    pub refused: bool,
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Ready (Signed, or ActivationsUnsigned while an importer has no key) and ReferencesResolved;
/// both False, reason ImportsUnresolved, naming each import `refused` and left out of the JWT.
pub(super) fn ready(
    acct: &NatsAccount,
    admitted: &Admitted,
    activations: &Activations,
    signed: &AccountJwt,
    refused: &[String],
) -> Vec<Decided> {
    if !refused.is_empty() {
        let why = refused.join("; ");
        let n = refused.len();
        let ready = format!(
            "{why}; the account JWT is signed without {} import{}",
            if n == 1 { "this" } else { "these" },
            plural(n)
        );
        return vec![
            Decided::new(condition::READY, false, reason::IMPORTS_UNRESOLVED, ready),
            Decided::new(
                condition::REFERENCES_RESOLVED,
                false,
                reason::IMPORTS_UNRESOLVED,
                why,
            ),
        ];
    }
    let (op_ns, op_name) = (&admitted.namespace, &admitted.name);
    let expires = if signed.exp == 0 {
        "never expires".to_string()
    } else {
        format!("expires {}", time_of(signed.exp).0)
    };
    let (exports, imports) = (acct.spec.exports.len(), acct.spec.imports.len());
    let what = if exports > 0 || imports > 0 {
        format!(
            "; {exports} export{}, {imports} import{}, {} activation token{} minted",
            plural(exports),
            plural(imports),
            activations.minted,
            plural(activations.minted)
        )
    } else {
        String::new()
    };
    let unsigned = activations.unsigned;
    let ready = if unsigned > 0 {
        Decided::new(
            condition::READY,
            true,
            reason::ACTIVATIONS_UNSIGNED,
            format!(
                "account JWT signed by NatsOperator {op_ns}/{op_name}, {expires}; {unsigned} importer{} without a public key yet",
                plural(unsigned)
            ),
        )
    } else {
        let raised = crate::account::jwt_ttl_raised(acct.spec.jwt_ttl.as_ref())
            .map(|n| format!("; {n}"))
            .unwrap_or_default();
        Decided::new(
            condition::READY,
            true,
            reason::SIGNED,
            format!(
                "account JWT signed by NatsOperator {op_ns}/{op_name}, {expires}{what}{raised}"
            ),
        )
    };
    let resolved = Decided::new(
        condition::REFERENCES_RESOLVED,
        true,
        reason::REFERENCES_RESOLVED,
        format!("operatorRef {op_ns}/{op_name}{}", admitted.by),
    );
    vec![ready, resolved]
}

/// RetiringKeysInUse: a retiring signing key is removed only once no live user JWT (of the
/// account's users in the index) is signed by it.
pub(super) async fn retiring_in_use(
    ctx: &Context,
    acct: &NatsAccount,
    keys: &Resolved,
) -> Result<Option<Decided>, Error> {
    let retiring: Vec<String> = keys
        .signing
        .iter()
        .filter(|k| k.retiring)
        .map(|k| k.key.public_key())
        .collect();
    if retiring.is_empty() {
        return Ok(None);
    }
    let (ns, name) = (acct.namespace().unwrap_or_default(), acct.name_any());
    let users = ctx.index.users_of(AccountKind::NatsAccount, &ns, &name);
    let issuers = creds::issuers(ctx, &users).await?;
    let in_use = crate::gates::retiring_in_use(&retiring, issuers.iter().map(String::as_str));
    Ok((!in_use.is_empty()).then(|| {
        Decided::new(
            condition::RETIRING_KEYS_IN_USE,
            true,
            condition::RETIRING_KEYS_IN_USE,
            format!(
                "retiring signing key(s) {} still sign live users; they are being re-signed",
                in_use.join(", ")
            ),
        )
    }))
}

/// Again at half the TTL, sooner while the servers are behind, an importer has no key, or
/// revocations are unrecovered.
pub(super) fn again(ctx: &Context, signed: &AccountJwt, now: i64, soon: bool) -> Duration {
    let mut wait = ctx.settings.resync;
    if signed.exp != 0 {
        let half = signed.iat + (signed.exp - signed.iat) / 2 - now;
        wait = wait.min(Duration::from_secs(u64::try_from(half.max(1)).unwrap_or(1)));
    }
    if soon {
        wait = wait.min(WAIT_RETRY);
    }
    wait
}

/// The account JWT expiry gauge: when the signed JWT lapses, or no series for one that never does
/// (a series at 0 would read as long expired).
pub(super) fn record_expiry(ctx: &Context, acct: &NatsAccount, exp: i64) {
    let (ns, name) = (acct.namespace().unwrap_or_default(), acct.name_any());
    let labels = [("namespace", ns.as_str()), ("name", name.as_str())];
    if exp == 0 {
        ctx.shared
            .metrics
            .remove_gauge(metrics::ACCOUNT_JWT_EXPIRY, &labels);
    } else {
        ctx.shared.metrics.set_gauge(
            metrics::ACCOUNT_JWT_EXPIRY,
            "When the account JWT the controller signed expires (Unix seconds).",
            &labels,
            exp as f64,
        );
    }
}

/// Writes the status as the pass left it, only at the resourceVersion the account was read at
/// (or written at, by the finalizer's add); changed since (its status removed, say): looked at
/// again in 200 ms. Signed: settled, again after its wait; refused, or signed without a refused
/// import: again after the backoff.
pub(super) async fn write(
    ctx: &Context,
    acct: &NatsAccount,
    mut status: NatsAccountStatus,
    end: Result<Signed, Stop>,
) -> Result<Action, Error> {
    // Some: signed, looked at again after its wait (within the backoff while an import is
    // refused); None: after the backoff.
    let (conds, wait) = match end {
        Ok(s) if s.refused => {
            let wait = s.wait.min(retry_later(ctx, acct));
            (s.conds, Some((wait, false)))
        }
        Ok(s) => (s.conds, Some((s.wait, true))),
        Err(Stop::Refused(conds)) => (conds, None),
        Err(Stop::Forgotten(conds)) => {
            status.jwt = None;
            status.jwt_hash = None;
            status.distribution = None;
            (conds, None)
        }
        Err(Stop::Held { roster, conds }) => {
            if let Some(d) = status.distribution.as_mut() {
                d.roster = roster;
            }
            (conds, None)
        }
        Err(Stop::Failed(e)) => return Err(e),
    };
    let generation = acct.meta().generation;
    let remove = [
        condition::SIGNING_KEY_UNTRUSTED,
        condition::RETIRING_KEYS_IN_USE,
    ];
    let status = NatsAccountStatus {
        observed_generation: generation,
        conditions: merged(acct, &conds, &remove),
        ..status
    };
    if !write_status_at(ctx, acct, &status).await? {
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    match wait {
        Some((w, settle)) => {
            if settle {
                settled(ctx, acct);
            }
            Ok(Action::requeue(w))
        }
        None => Ok(Action::requeue(retry_later(ctx, acct))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plural_of_one_is_bare() {
        assert_eq!(plural(1), "");
        assert_eq!(plural(0), "s");
    }
}
