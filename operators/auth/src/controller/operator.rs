//! NatsOperator: its keys, the NATS operator JWT (signing keys, system account, strict signing),
//! the system account JWT it signs into its status (no expiry, the stepdown imports), and
//! status.deletedAccounts for accounts whose grant was withdrawn.

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::auth::{
    DeletedAccount, GeneratedKind, NatsOperator, NatsOperatorStatus, SystemAccountState, condition,
    reason,
};
use nats_claims::{Account, Operator};

use super::index::{Feed, Kind};
use super::keys::{self, Subject};
use super::{
    Cond, Context, Error, merge_conditions, previous_conditions, retry_later, settled, sign_stable,
    unix_now, write_status,
};
use crate::account::{AccountInput, system_account_claims};
use crate::{deletions, exports, grants, operator as core};

/// The NatsOperator controller: wakes on its system accounts, accounts and grants.
pub(crate) async fn controller(ctx: Arc<Context>, feed: Feed<NatsOperator>) {
    let wakes = [Kind::SystemAccount, Kind::Account, Kind::Grant];
    let c = super::pass::indexed(&ctx, feed, &wakes);
    super::drive(c, ctx, reconcile).await;
}

async fn reconcile(op: Arc<NatsOperator>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = op.namespace().unwrap_or_default();
    let name = op.name_any();
    let generation = op.meta().generation;
    let prev = op.status.clone().unwrap_or_default();
    let prev_conds = previous_conditions(&*op);
    let refuse = async |status: NatsOperatorStatus, conds: Vec<Cond>| -> Result<Action, Error> {
        let status = NatsOperatorStatus {
            observed_generation: generation,
            conditions: merge_conditions(&prev_conds, generation, &conds, &[]),
            ..status
        };
        write_status(&ctx, &*op, &status).await?;
        Ok(Action::requeue(retry_later(&ctx, &*op)))
    };
    let not_ready = |reason: &'static str, message: String| {
        vec![Cond::new(condition::READY, false, reason, message)]
    };

    // The offline identity is the subject of spec.jwt.
    let offline = match &op.spec.jwt {
        None => None,
        Some(jwt) => match nats_claims::decode::<Operator>(jwt) {
            Ok(c) => Some(c.subject),
            Err(e) => {
                return refuse(
                    prev.clone(),
                    not_ready(reason::INVALID_JWT, format!("spec.jwt: {e}")),
                )
                .await;
            }
        },
    };
    let keys = match keys::resolve(
        &ctx,
        Subject {
            kind: GeneratedKind::Operator,
            namespace: &ns,
            name: &name,
            keys: op.spec.keys.as_ref(),
            offline,
            recorded: prev.public_key.as_deref(),
            may_generate: true,
        },
    )
    .await?
    {
        Ok(k) => k,
        Err(e) => {
            return refuse(prev.clone(), not_ready(e.reason(), e.message())).await;
        }
    };
    let mut status = NatsOperatorStatus {
        public_key: Some(keys.public_key.clone()),
        signing_keys: keys.signing_public_keys(),
        seed_secrets: Some(keys.seed_secrets.clone()),
        jwt: prev.jwt.clone(),
        system_account: prev.system_account.clone(),
        deleted_accounts: prev.deleted_accounts.clone(),
        ..NatsOperatorStatus::default()
    };

    // The system account spec.systemAccountRef selects.
    let sys_ns = op
        .spec
        .system_account_ref
        .namespace
        .clone()
        .unwrap_or_else(|| ns.clone());
    let sys_name = op.spec.system_account_ref.name.clone();
    let sys = ctx.index.system_account(&sys_ns, &sys_name);
    let Some(sys) = sys else {
        let message = format!("systemAccountRef {sys_ns}/{sys_name} not found");
        return refuse(
            status,
            vec![
                Cond::new(
                    condition::READY,
                    false,
                    reason::REFERENCE_NOT_FOUND,
                    message.clone(),
                ),
                Cond::new(
                    condition::REFERENCES_RESOLVED,
                    false,
                    reason::REFERENCE_NOT_FOUND,
                    message,
                ),
            ],
        )
        .await;
    };
    // Across namespaces only through a NatsReferenceGrant in the system account's (§7).
    let from = controller_kit::grants::From {
        group: nats_api::auth::GROUP,
        kind: "NatsOperator",
        namespace: &ns,
    };
    let to = controller_kit::grants::To {
        group: nats_api::auth::GROUP,
        kind: "NatsSystemAccount",
        namespace: &sys_ns,
        name: &sys_name,
    };
    if !ctx.index.admits(from, to) {
        let message = format!(
            "systemAccountRef {sys_ns}/{sys_name} is not admitted by any NatsReferenceGrant in {sys_ns}"
        );
        return refuse(
            status,
            vec![
                Cond::new(
                    condition::READY,
                    false,
                    reason::REFERENCE_NOT_PERMITTED,
                    message.clone(),
                ),
                Cond::new(
                    condition::REFERENCES_RESOLVED,
                    false,
                    reason::REFERENCE_NOT_PERMITTED,
                    message,
                ),
            ],
        )
        .await;
    }
    let sys_status = sys.status.clone().unwrap_or_default();
    let sys_keys = match keys::resolve(
        &ctx,
        Subject {
            kind: GeneratedKind::SystemAccount,
            namespace: &sys_ns,
            name: &sys_name,
            keys: sys.spec.keys.as_ref(),
            offline: sys.spec.public_key.clone(),
            recorded: sys_status.public_key.as_deref(),
            may_generate: true,
        },
    )
    .await?
    {
        Ok(k) => k,
        Err(e) => {
            return refuse(
                status,
                not_ready(
                    e.reason(),
                    format!("system account {sys_ns}/{sys_name}: {}", e.message()),
                ),
            )
            .await;
        }
    };
    let now = unix_now();

    // The NATS operator JWT: checked when kept offline, else signed by the identity.
    let signing = keys.signing_public_keys();
    let operator_jwt = match (&op.spec.jwt, &keys.identity) {
        (Some(jwt), _) => match core::check_offline_operator(jwt, &signing, &sys_keys.public_key) {
            Ok(_) => jwt.clone(),
            Err(e) => {
                return refuse(status, not_ready(reason::INVALID_JWT, e.to_string())).await;
            }
        },
        (None, Some(identity)) => {
            let claims =
                core::operator_claims(&name, &keys.public_key, &signing, &sys_keys.public_key);
            match sign_stable::<Operator, _>(prev.jwt.as_deref(), now, |iat| {
                core::sign_operator(&claims, identity, iat)
            }) {
                Ok(j) => j,
                Err(e) => {
                    return refuse(status, not_ready(reason::INVALID_KEYS, e.to_string())).await;
                }
            }
        }
        (None, None) => {
            return refuse(
                status,
                not_ready(reason::INVALID_KEYS, "no identity seed".into()),
            )
            .await;
        }
    };
    status.jwt = Some(operator_jwt);

    let Some(active) = keys.active() else {
        return refuse(
            status,
            not_ready(
                reason::INVALID_KEYS,
                "every signing key is retiring: none signs accounts".into(),
            ),
        )
        .await;
    };

    // The system account JWT: no expiry, the prefixed stepdown imports of every account under
    // this NatsOperator that exports jetstream-stepdown.
    let accounts = ctx.index.accounts_of(&ns, &name);
    let mut stepdown: Vec<String> = accounts
        .iter()
        .filter(|a| exports::exports_stepdown(&a.spec.exports))
        .filter_map(|a| a.status.as_ref().and_then(|s| s.public_key.clone()))
        .collect();
    stepdown.sort();
    stepdown.dedup();
    let revocations: Vec<(String, i64)> = sys_status
        .revocations
        .iter()
        .map(|r| (r.public_key.clone(), super::secs_of(&r.at)))
        .collect();
    let sys_signing = sys_keys.account_keys();
    let prev_sys_jwt = prev.system_account.as_ref().and_then(|s| s.jwt.clone());
    // What the servers hold for the system account: signed again past a newer one; while a
    // roster server is silent its revocations may be unrecovered (the JWT is then not pushed,
    // and not re-signed where it was distributed).
    let sys_pk = sys_keys.public_key.clone();
    let mut recovery_cond = None;
    let mut hold_sys = false;
    if let Some(h) = super::nats::holding(&ctx, &sys_pk, sys_status.distribution.as_ref())
        .await
        .ok()
        .flatten()
    {
        for j in h
            .jwts
            .iter()
            .filter(|j| Some(j.as_str()) != prev_sys_jwt.as_deref())
        {
            if let Ok(c) = nats_claims::decode::<Account>(j) {
                ctx.raise_iat_floor(&sys_pk, c.issued_at + 1);
            }
        }
        let answered = h.answered_phrase();
        recovery_cond = Some(
            match crate::distribution::recovery(
                h.roster.len(),
                h.answered,
                crate::distribution::record(
                    crate::distribution::issued_at(prev_sys_jwt.as_deref()),
                    &h.jwts
                        .iter()
                        .filter_map(|j| crate::distribution::issued_at(Some(j)))
                        .collect::<Vec<_>>(),
                    sys_status.distribution.as_ref(),
                ),
            ) {
                crate::distribution::Recovery::Sign
                | crate::distribution::Recovery::SignFromRecord { .. } => Cond::new(
                    condition::REVOCATIONS_UNRECOVERED,
                    false,
                    reason::ALL_SERVERS_CURRENT,
                    answered,
                ),
                crate::distribution::Recovery::SignUnrecovered { .. }
                | crate::distribution::Recovery::Hold { .. } => {
                    hold_sys = true;
                    Cond::new(
                        condition::REVOCATIONS_UNRECOVERED,
                        true,
                        reason::RECOVERING_REVOCATIONS,
                        format!("{answered}, for the system account"),
                    )
                }
            },
        );
    }
    let floor = ctx.iat_floor(&sys_pk);
    let keep_prev = prev_sys_jwt.clone().filter(|j| {
        hold_sys || nats_claims::decode_unverified::<Account>(j).is_ok_and(|c| c.issued_at >= floor)
    });
    let sys_jwt =
        if let (true, Some(j)) = (hold_sys && sys_status.distribution.is_some(), &keep_prev) {
            Ok(j.clone())
        } else {
            sign_stable::<Account, _>(keep_prev.as_deref(), now.max(floor), |iat| {
                let claims = system_account_claims(
                    AccountInput {
                        name: &sys_name,
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
                    .encode_issued_at(&active.key, iat)
                    .map_err(|e| e.to_string())
            })
        };
    let sys_jwt = match sys_jwt {
        Ok(j) => j,
        Err(e) => return refuse(status, not_ready(reason::INVALID_KEYS, e)).await,
    };
    status.system_account = Some(SystemAccountState {
        name: Some(sys_name.clone()),
        public_key: Some(sys_keys.public_key.clone()),
        jwt: Some(sys_jwt),
        revocations: sys_status.revocations.clone(),
    });

    // Accounts signed once and then deleted, or no longer admitted, are deleted from the servers:
    // recorded here.
    let grants = ctx.index.grants_in(&ns);
    let mut deleted: Vec<DeletedAccount> = deletions::prune(&prev.deleted_accounts, now);
    for a in &accounts {
        let a_ns = a.namespace().unwrap_or_default();
        let admitted = grants::account_admission(&a_ns, &ns, &name, &grants).is_ok();
        let st = a.status.clone().unwrap_or_default();
        if admitted && a.meta().deletion_timestamp.is_none() {
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
    // Deleted from the servers: sent to every server that has not confirmed them (the rejoin
    // watch goes on between passes; an empty list stops it).
    let mut wait = ctx.settings.resync;
    let operator_key = format!("{ns}/{name}");
    match super::claims_delete::send_deletes(&ctx, &operator_key, &deleted, &active.key).await {
        Ok(sent) if !sent.is_empty() => {
            tracing::info!(accounts = ?sent, "CLAIMS.DELETE sent");
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "CLAIMS.DELETE not sent; retrying"),
    }
    if !deleted.is_empty() {
        wait = wait.min(super::WAIT_RETRY * 6);
    }
    status.deleted_accounts = deleted;

    let conds = vec![
        Cond::new(
            condition::READY,
            true,
            reason::SIGNED,
            format!(
                "NATS operator JWT signed with {} signing key{}; system account {sys_name} signed",
                signing.len(),
                if signing.len() == 1 { "" } else { "s" }
            ),
        ),
        Cond::new(
            condition::REFERENCES_RESOLVED,
            true,
            reason::REFERENCES_RESOLVED,
            format!("systemAccountRef {sys_ns}/{sys_name} resolved"),
        ),
    ];
    let mut conds = conds;
    // A retiring operator signing key is removed only once no account JWT is signed by it.
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
    let in_use = crate::gates::retiring_in_use(&retiring, issuers.iter().map(String::as_str));
    if !in_use.is_empty() {
        wait = wait.min(super::WAIT_RETRY);
        conds.push(Cond::new(
            condition::RETIRING_KEYS_IN_USE,
            true,
            condition::RETIRING_KEYS_IN_USE,
            format!(
                "retiring signing key(s) {} still sign account JWTs; they are being re-signed",
                in_use.join(", ")
            ),
        ));
    }
    if let Some(c) = recovery_cond {
        if c.status {
            wait = wait.min(super::WAIT_RETRY);
        }
        conds.push(c);
    }
    let status = NatsOperatorStatus {
        observed_generation: generation,
        conditions: merge_conditions(
            &prev_conds,
            generation,
            &conds,
            &[condition::RETIRING_KEYS_IN_USE],
        ),
        ..status
    };
    write_status(&ctx, &*op, &status).await?;
    settled(&ctx, &*op);
    Ok(Action::requeue(wait))
}
