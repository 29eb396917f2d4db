//! The end of a NatsOperator pass: the conditions of a signed operator (Ready, ReferencesResolved,
//! RetiringKeysInUse, RevocationsUnrecovered) and when to look again, and the status written.

use std::sync::Arc;
use std::time::Duration;

use controller_kit::conditions::Decided;
use kube::Resource;
use kube::runtime::controller::Action;
use nats_api::auth::{NatsAccount, NatsOperator, NatsOperatorStatus, condition, reason};
use nats_claims::Account;

use super::gather::SystemAccount;
use super::stop::Stop;
use crate::controller::error::Error;
use crate::controller::pass::{retry_later, settled};
use crate::controller::seeds::Resolved;
use crate::controller::write_status::{merged, write_status};
use crate::controller::{Context, WAIT_RETRY};

/// A signed operator's conditions and when it is looked at again.
pub(super) struct Signed {
    pub conds: Vec<Decided>,
    pub wait: Duration,
}

/// Ready Signed, ReferencesResolved, RetiringKeysInUse while a retiring operator signing key
/// still signs an account JWT (it is removed only once none is), and what the servers said of
/// the system account's revocations. Sooner again while deletions or re-signing are under way.
pub(super) fn signed(
    ctx: &Context,
    op: &NatsOperator,
    keys: &Resolved,
    system: &SystemAccount,
    accounts: &[Arc<NatsAccount>],
    status: &NatsOperatorStatus,
    recovery: Option<Decided>,
) -> Signed {
    let mut wait = ctx.settings.resync;
    if !status.deleted_accounts.is_empty() {
        wait = wait.min(WAIT_RETRY * 6);
    }
    let (sys_ns, sys_name) = (&system.namespace, &system.name);
    let mut conds = vec![
        ready(
            keys.identity.is_none(),
            keys.signing.len(),
            signer_name(op, keys).as_deref(),
            sys_name,
        ),
        Decided::new(
            condition::REFERENCES_RESOLVED,
            true,
            reason::REFERENCES_RESOLVED,
            format!("systemAccountRef {sys_ns}/{sys_name} resolved"),
        ),
    ];
    let in_use = retiring_in_use(keys, accounts, status);
    if !in_use.is_empty() {
        wait = wait.min(WAIT_RETRY);
        conds.push(Decided::new(
            condition::RETIRING_KEYS_IN_USE,
            true,
            condition::RETIRING_KEYS_IN_USE,
            format!(
                "retiring signing key(s) {} still sign account JWTs; they are being re-signed",
                in_use.join(", ")
            ),
        ));
    }
    if let Some(c) = recovery {
        if c.status {
            wait = wait.min(WAIT_RETRY);
        }
        conds.push(c);
    }
    Signed { conds, wait }
}

/// Ready of a NatsOperator whose JWTs are signed: Mirrored when its identity is kept offline
/// (spec.jwt published as given, only the system account signed here, by the signing key
/// `signer`), else Signed with `signing` signing keys.
pub(crate) fn ready(offline: bool, signing: usize, signer: Option<&str>, system: &str) -> Decided {
    if offline {
        return Decided::new(
            condition::READY,
            true,
            reason::MIRRORED,
            format!(
                "offline identity; NATS operator JWT published as given; system account {system} signed with signing key {}",
                signer.unwrap_or("?")
            ),
        );
    }
    Decided::new(
        condition::READY,
        true,
        reason::SIGNED,
        format!(
            "NATS operator JWT signed with {signing} signing key{}; system account {system} signed",
            if signing == 1 { "" } else { "s" }
        ),
    )
}

/// The spec name of the signing key that signs (the first not retiring and not scoped).
fn signer_name(op: &NatsOperator, keys: &Resolved) -> Option<String> {
    let active = keys
        .signing
        .iter()
        .position(|s| !s.retiring && s.scope.is_none())?;
    op.spec
        .keys
        .as_ref()?
        .signing
        .get(active)
        .map(|k| k.name.clone())
}

/// The retiring operator signing keys that still sign an account JWT or the system account's.
fn retiring_in_use(
    keys: &Resolved,
    accounts: &[Arc<NatsAccount>],
    status: &NatsOperatorStatus,
) -> Vec<String> {
    let retiring: Vec<String> = keys
        .signing
        .iter()
        .filter(|k| k.retiring)
        .map(|k| k.key.public_key())
        .collect();
    let issuers: Vec<String> = accounts
        .iter()
        .filter_map(|a| a.status.as_ref()?.jwt.clone())
        .chain(status.system_account.as_ref().and_then(|s| s.jwt.clone()))
        .filter_map(|j| nats_claims::decode_unverified::<Account>(&j).ok())
        .map(|c| c.issuer)
        .collect();
    crate::gates::retiring_in_use(&retiring, issuers.iter().map(String::as_str))
}

/// Writes the status as the pass left it: signed (RetiringKeysInUse removed unless set, settled,
/// again after the wait) or refused (again after the backoff).
pub(super) async fn write(
    ctx: &Context,
    op: &NatsOperator,
    status: NatsOperatorStatus,
    end: Result<Signed, Stop>,
) -> Result<Action, Error> {
    let generation = op.meta().generation;
    let (conds, remove, wait) = match end {
        Ok(s) => (s.conds, vec![condition::RETIRING_KEYS_IN_USE], Some(s.wait)),
        Err(Stop::Refused(conds)) => (conds, vec![], None),
        Err(Stop::Failed(e)) => return Err(e),
    };
    let status = NatsOperatorStatus {
        observed_generation: generation,
        conditions: merged(op, &conds, &remove),
        ..status
    };
    write_status(ctx, op, &status).await?;
    match wait {
        Some(wait) => {
            settled(ctx, op);
            Ok(Action::requeue(wait))
        }
        None => Ok(Action::requeue(retry_later(ctx, op))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::kept_offline(
        true,
        1,
        Some("nsc"),
        "Mirrored",
        "offline identity; NATS operator JWT published as given; system account system signed with signing key nsc"
    )]
    #[case::signed_here(
        false,
        2,
        Some("a"),
        "Signed",
        "NATS operator JWT signed with 2 signing keys; system account system signed"
    )]
    #[case::one_key(
        false,
        1,
        None,
        "Signed",
        "NATS operator JWT signed with 1 signing key; system account system signed"
    )]
    fn ready_says_whether_the_operator_jwt_was_signed_here(
        #[case] offline: bool,
        #[case] signing: usize,
        #[case] signer: Option<&str>,
        #[case] reason: &str,
        #[case] message: &str,
    ) {
        let d = ready(offline, signing, signer, "system");
        assert!(d.status);
        assert_eq!((d.reason, d.message.as_str()), (reason, message));
    }
}
