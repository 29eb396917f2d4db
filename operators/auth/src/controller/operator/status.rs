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
use crate::controller::keys::Resolved;
use crate::controller::pass::{retry_later, settled};
use crate::controller::status::{merged, write_status};
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
    let signing = keys.signing_public_keys().len();
    let (sys_ns, sys_name) = (&system.namespace, &system.name);
    let mut conds = vec![
        Decided::new(
            condition::READY,
            true,
            reason::SIGNED,
            format!(
                "NATS operator JWT signed with {signing} signing key{}; system account {sys_name} signed",
                if signing == 1 { "" } else { "s" }
            ),
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
