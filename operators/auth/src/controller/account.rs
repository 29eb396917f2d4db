//! NatsAccount: admission to its NatsOperator (ReferenceNotPermitted before any key is
//! recorded), keys, PublicKeyInUse, imports resolved from the exports they name (activations
//! read from the exporter's status), activation tokens for its own private exports, the account
//! JWT signed by the NatsOperator's signing key (re-signed at half its jwtTTL), pushed, counted.

use std::sync::Arc;
use std::time::Duration;

use controller_kit::metrics;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::auth::{
    AccountKind, ActivationToken, ExportType, GeneratedKind, ImportState, NatsAccount,
    NatsAccountStatus, NatsOperator, condition, reason,
};
use nats_claims::{Account, Import};

use super::index::{Feed, Kind};
use super::keys::{self, Subject};
use super::refs::operator_of;
use super::time::created;
use super::{
    Cond, Context, Error, add_finalizer, has_finalizer, jwt_hash, kube_err, merge_conditions,
    previous_conditions, remove_finalizer, retry_later, settled, sign_stable, unix_now,
    write_status, write_status_at,
};
use crate::account::{AccountInput, account_claims, needs_resign};
use crate::deletion_hold::{self, Held, Hold};
use crate::exports::{self, Exporter};
use crate::grants::{self, Referrer, Target};
use crate::uniqueness::{Holder, check_unique};
use crate::{deletions, distribution};

const AUTH: &str = nats_api::auth::GROUP;

/// The NatsAccount controller: wakes on NatsOperators, other accounts (imports, activations,
/// key uniqueness), system accounts and grants.
pub(crate) async fn controller(ctx: Arc<Context>, feed: Feed<NatsAccount>) {
    let wakes = [
        Kind::Operator,
        Kind::Account,
        Kind::SystemAccount,
        Kind::Grant,
        Kind::User,
    ];
    let c = super::pass::indexed(&ctx, feed, &wakes);
    super::drive(c, ctx, reconcile).await;
}

async fn reconcile(acct: Arc<NatsAccount>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = acct.namespace().unwrap_or_default();
    let name = acct.name_any();
    let generation = acct.meta().generation;
    let prev = acct.status.clone().unwrap_or_default();
    let prev_conds = previous_conditions(&*acct);
    let (op_ns, op_name) = operator_of(&acct);
    let finish = async |status: NatsAccountStatus,
                        conds: Vec<Cond>,
                        wait: Option<Duration>|
           -> Result<Action, Error> {
        let status = NatsAccountStatus {
            observed_generation: generation,
            conditions: merge_conditions(
                &prev_conds,
                generation,
                &conds,
                &[
                    condition::SIGNING_KEY_UNTRUSTED,
                    condition::RETIRING_KEYS_IN_USE,
                ],
            ),
            ..status
        };
        if !write_status_at(&ctx, &*acct, &status).await? {
            // Changed since it was read (its status removed, or a finalizer this pass added).
            return Ok(Action::requeue(Duration::from_millis(200)));
        }
        match wait {
            Some(w) => {
                settled(&ctx, &*acct);
                Ok(Action::requeue(w))
            }
            None => Ok(Action::requeue(retry_later(&ctx, &*acct))),
        }
    };
    let both = |reason: &'static str, ready: String, refs: String| {
        vec![
            Cond::new(condition::READY, false, reason, ready),
            Cond::new(condition::REFERENCES_RESOLVED, false, reason, refs),
        ]
    };

    // The NatsOperator, and admission to it: checked before any key is recorded.
    let op = ctx.index.operator(&op_ns, &op_name);
    if acct.meta().deletion_timestamp.is_some() {
        return deleting(&ctx, &acct, op.as_deref()).await;
    }
    // The finalizer holds a deleted account until its NatsOperator records the deletion.
    if !has_finalizer(&*acct) {
        add_finalizer(&ctx, &*acct).await?;
    }
    let Some(op) = op else {
        let m = format!("operatorRef {op_ns}/{op_name} not found");
        return finish(
            prev.clone(),
            both(reason::REFERENCE_NOT_FOUND, m.clone(), m),
            None,
        )
        .await;
    };
    let op_status = op.status.clone().unwrap_or_default();
    let grants_op = if ns == op_ns {
        vec![]
    } else {
        ctx.index.grants_in(&op_ns)
    };
    if let Err(t) = grants::account_admission(&ns, &op_ns, &op_name, &grants_op) {
        let mut status = prev.clone();
        // Once the NatsOperator records the deletion, this account's JWT is gone for good.
        if let Some(pk) = &prev.public_key
            && deletions::may_clear_jwt(&op_status.deleted_accounts, pk)
        {
            status.jwt = None;
            status.jwt_hash = None;
            status.distribution = None;
        }
        return finish(
            status,
            both(
                t.reason(),
                t.to_string(),
                format!(
                    "operatorRef {op_ns}/{op_name} is not admitted by any NatsReferenceGrant in {op_ns}"
                ),
            ),
            None,
        )
        .await;
    }
    let admitted_by = grants_op
        .iter()
        .find(|g| {
            grants::account_admission(&ns, &op_ns, &op_name, std::slice::from_ref(*g)).is_ok()
        })
        .map(|g| format!(" admitted by NatsReferenceGrant {op_ns}/{}", g.name_any()))
        .unwrap_or_else(|| " resolved".into());

    // Own keys.
    let keys = match keys::resolve(
        &ctx,
        Subject {
            kind: GeneratedKind::Account,
            namespace: &ns,
            name: &name,
            keys: acct.spec.keys.as_ref(),
            offline: acct.spec.public_key.clone(),
            recorded: prev.public_key.as_deref(),
            may_generate: true,
        },
    )
    .await?
    {
        Ok(k) => k,
        Err(e) => {
            return finish(
                prev.clone(),
                vec![Cond::new(condition::READY, false, e.reason(), e.message())],
                None,
            )
            .await;
        }
    };
    let pk = keys.public_key.clone();
    let mut status = NatsAccountStatus {
        public_key: Some(pk.clone()),
        jwt: prev.jwt.clone(),
        jwt_hash: prev.jwt_hash.clone(),
        distribution: prev.distribution.clone(),
        revocations: prev.revocations.clone(),
        imports: prev.imports.clone(),
        activations: prev.activations.clone(),
        ..NatsAccountStatus::default()
    };

    // PublicKeyInUse: unique under the NatsOperator, the system account's key included.
    let accounts = ctx.index.accounts_of(&op_ns, &op_name);
    let me = Holder {
        name: format!("NatsAccount {ns}/{name}"),
        public_key: pk.clone(),
        created: created(&*acct),
    };
    let others: Vec<Holder> = accounts
        .iter()
        .filter_map(|a| {
            Some(Holder {
                name: format!(
                    "NatsAccount {}/{}",
                    a.namespace().unwrap_or_default(),
                    a.name_any()
                ),
                public_key: a.status.as_ref()?.public_key.clone()?,
                created: created(&**a),
            })
        })
        .collect();
    let sys_holder = op_status.system_account.as_ref().and_then(|s| {
        Some(Holder {
            name: format!(
                "NatsSystemAccount {}/{}",
                op.spec
                    .system_account_ref
                    .namespace
                    .clone()
                    .unwrap_or_else(|| op_ns.clone()),
                s.name.clone().unwrap_or_default()
            ),
            public_key: s.public_key.clone()?,
            created: 0,
        })
    });
    if let Err(e) = check_unique(&me, &others, sys_holder.as_ref()) {
        return finish(
            status,
            vec![Cond::new(
                condition::READY,
                false,
                reason::PUBLIC_KEY_IN_USE,
                e.to_string(),
            )],
            None,
        )
        .await;
    }

    // The NatsOperator's signing seed and JWT.
    let (Some(op_jwt), Some(op_pk)) = (op_status.jwt.clone(), op_status.public_key.clone()) else {
        return finish(
            status,
            vec![Cond::new(
                condition::READY,
                false,
                reason::KEYS_PENDING,
                format!("waiting for NatsOperator {op_ns}/{op_name} to sign its JWT"),
            )],
            None,
        )
        .await;
    };
    let op_keys = match keys::resolve(
        &ctx,
        Subject {
            kind: GeneratedKind::Operator,
            namespace: &op_ns,
            name: &op_name,
            keys: op.spec.keys.as_ref(),
            offline: op.spec.jwt.as_ref().map(|_| op_pk.clone()),
            recorded: Some(&op_pk),
            may_generate: false,
        },
    )
    .await?
    {
        Ok(k) => k,
        Err(e) => {
            return finish(
                status,
                vec![Cond::new(
                    condition::READY,
                    false,
                    reason::KEYS_PENDING,
                    format!("NatsOperator {op_ns}/{op_name}: {}", e.message()),
                )],
                None,
            )
            .await;
        }
    };
    let Some(op_signer) = op_keys.active() else {
        return finish(
            status,
            vec![Cond::new(
                condition::READY,
                false,
                reason::KEYS_PENDING,
                format!("NatsOperator {op_ns}/{op_name} has no signing key that is not retiring"),
            )],
            None,
        )
        .await;
    };

    // Imports, each resolved from the export it names.
    let mut imports: Vec<Import> = Vec::new();
    let mut states: Vec<ImportState> = Vec::new();
    let mut unresolved: Vec<String> = Vec::new();
    for imp in &acct.spec.imports {
        match resolve_import(&ctx, &acct, &pk, imp).await? {
            Ok(i) => {
                states.push(exports::import_state(imp, &i));
                imports.push(i);
            }
            Err(why) => unresolved.push(why),
        }
    }
    if !unresolved.is_empty() {
        let m = unresolved.join("; ");
        return finish(status, both(reason::IMPORTS_UNRESOLVED, m.clone(), m), None).await;
    }
    status.imports = states;

    // Activation tokens for this account's private exports, kept while still right.
    let Some(acct_signer) = keys.active() else {
        return finish(
            status,
            vec![Cond::new(
                condition::READY,
                false,
                reason::INVALID_KEYS,
                "no signing key that is not retiring and not scoped signs activations".into(),
            )],
            None,
        )
        .await;
    };
    let now = unix_now();
    let importer_key = |i: &nats_api::auth::Importer| -> Option<String> {
        if i.kind != Some(AccountKind::NatsAccount) {
            return None;
        }
        let i_ns = i.namespace.clone().unwrap_or_else(|| ns.clone());
        let importer = ctx.index.account(&i_ns, i.name.as_deref()?)?;
        importer.status.as_ref()?.public_key.clone()
    };
    let mut activations = match exports::activations(
        &pk,
        &ns,
        &acct_signer.key,
        &acct.spec.exports,
        importer_key,
        now,
    ) {
        Ok(a) => a,
        Err(e) => {
            let m = format!("signing activation tokens: {e}");
            return finish(
                status,
                vec![Cond::new(condition::READY, false, reason::INVALID_KEYS, m)],
                None,
            )
            .await;
        }
    };
    for a in &mut activations {
        if let Some(p) = prev.activations.iter().find(|p| same_activation(p, a)) {
            a.token = p.token.clone();
        }
    }
    let unsigned = activations.iter().filter(|a| a.token.is_none()).count();
    let minted = activations.len() - unsigned;
    status.activations = activations;

    // The account JWT: signed by the NatsOperator's signing key, kept while unchanged and not
    // past half its TTL, and never older than a JWT a server holds.
    let sign_at = now;
    let users = ctx.index.users_of(AccountKind::NatsAccount, &ns, &name);
    let mut record = super::revocation_record(
        &prev.revocations,
        prev.jwt.as_deref(),
        &users,
        &keys.signing_public_keys(),
        now,
    );

    // What the servers hold (§5.3): revocations taken back from their JWTs, never signing older
    // than one of them, and no signing while a roster server is silent for an account recorded
    // distributed (it may hold a newer JWT).
    let holding = match super::nats::holding(&ctx, &pk, prev.distribution.as_ref()).await {
        Ok(h) => h,
        // Servers were heard before, none can be asked now, and the record is lost: any of them
        // may hold the only copy of a revocation.
        Err(e) if prev.jwt.is_none() && !ctx.roster().is_empty() => {
            let m = format!(
                "the servers could not be asked which JWT they hold ({e}); with the status record lost, not signed until they answer"
            );
            return finish(
                status,
                vec![Cond::new(
                    condition::READY,
                    false,
                    reason::RECOVERING_REVOCATIONS,
                    m,
                )],
                None,
            )
            .await;
        }
        Err(_) => None,
    };
    let mut unrecovered: Option<Cond> = None;
    if let Some(h) = &holding {
        let answered = h.answered_phrase();
        let rec = distribution::record(
            crate::distribution::issued_at(prev.jwt.as_deref()),
            &h.jwts
                .iter()
                .filter_map(|j| crate::distribution::issued_at(Some(j)))
                .collect::<Vec<_>>(),
            prev.distribution.as_ref(),
        );
        match distribution::recovery(h.roster.len(), h.answered, rec) {
            distribution::Recovery::Sign => {
                unrecovered = Some(Cond::new(
                    condition::REVOCATIONS_UNRECOVERED,
                    false,
                    reason::ALL_SERVERS_CURRENT,
                    answered,
                ));
            }
            distribution::Recovery::SignFromRecord { .. } => {
                unrecovered = Some(Cond::new(
                    condition::REVOCATIONS_UNRECOVERED,
                    false,
                    reason::ALL_SERVERS_CURRENT,
                    format!(
                        "{answered}; signed from the status record, which holds every revocation"
                    ),
                ));
            }
            distribution::Recovery::SignUnrecovered { .. } => {
                unrecovered = Some(Cond::new(
                    condition::REVOCATIONS_UNRECOVERED,
                    true,
                    reason::RECOVERING_REVOCATIONS,
                    format!("{answered}; signed without their revocations, asking again"),
                ));
            }
            distribution::Recovery::Hold { .. } => {
                let m = format!(
                    "{answered}: a silent server may hold a newer JWT; not signed until every server answers"
                );
                // Kept as recorded, the roster's silence included, so the next pass (maybe
                // of a new process) still counts the silent server.
                if let Some(d) = status.distribution.as_mut() {
                    d.roster = h.roster.to_status(super::time_of);
                }
                return finish(
                    status,
                    vec![Cond::new(
                        condition::READY,
                        false,
                        reason::RECOVERING_REVOCATIONS,
                        m,
                    )],
                    None,
                )
                .await;
            }
        }
        for held in h
            .jwts
            .iter()
            .filter(|j| Some(j.as_str()) != prev.jwt.as_deref())
        {
            if let Ok(c) = nats_claims::decode::<Account>(held) {
                record = crate::revocations::merge_from_jwt(&record, &c);
                ctx.raise_iat_floor(&pk, c.issued_at + 1);
            }
        }
        record = crate::revocations::prune(&record, &keys.signing_public_keys(), |_| None, now);
    }
    // Adoption: a JWT made elsewhere for this key, never signed here, whose fields re-signing
    // from spec would drop, is refused unless spec.adoption.droppedClaims is Accept.
    let adopted_elsewhere = prev.jwt.is_none()
        && (acct.spec.public_key.is_some()
            || acct
                .spec
                .keys
                .as_ref()
                .is_some_and(|k| k.identity.is_some()));
    let held_newest = holding.as_ref().and_then(|h| {
        h.jwts
            .iter()
            .filter_map(|j| {
                nats_claims::decode::<Account>(j)
                    .ok()
                    .map(|c| (c.issued_at, j))
            })
            .max_by_key(|(iat, _)| *iat)
            .map(|(_, j)| j.clone())
    });
    let revocations = crate::revocations::as_list(&record);
    status.revocations = record;
    let floor = ctx.iat_floor(&pk);
    let sign_at = sign_at.max(floor);
    let acct_keys = keys.account_keys();
    let prev_jwt = prev.jwt.clone().filter(|j| {
        nats_claims::decode_unverified::<Account>(j)
            .map(|c| c.issued_at >= floor && !needs_resign(c.issued_at, c.expires, now))
            .unwrap_or(false)
    });
    let signed = sign_stable::<Account, _>(prev_jwt.as_deref(), sign_at, |iat| {
        let claims = account_claims(
            &acct.spec,
            AccountInput {
                name: &name,
                public_key: &pk,
                signing_keys: &acct_keys,
                imports: imports.clone(),
                revocations: &revocations,
                issued_at: iat,
            },
        )
        .map_err(|e| e.to_string())?;
        claims
            .encode_issued_at(&op_signer.key, iat)
            .map_err(|e| e.to_string())
    });
    let jwt = match signed {
        Ok(j) => j,
        Err(e) => return finish(status, both(reason::INVALID_KEYS, e.clone(), e), None).await,
    };
    if adopted_elsewhere && let Some(held) = &held_newest {
        let dropped = crate::gates::dropped_by_resign(held, &jwt).unwrap_or_default();
        let policy = acct
            .spec
            .adoption
            .as_ref()
            .map(|a| a.dropped_claims)
            .unwrap_or_default();
        if let Err(m) = crate::gates::adoption(&dropped, policy) {
            return finish(
                status,
                vec![Cond::new(
                    condition::READY,
                    false,
                    reason::ADOPTION_DROPS_CLAIMS,
                    m,
                )],
                None,
            )
            .await;
        }
    }
    let claims = nats_claims::decode_unverified::<Account>(&jwt).ok();
    let (iat, exp) = claims
        .as_ref()
        .map(|c| (c.issued_at, c.expires))
        .unwrap_or((now, 0));
    status.jwt_hash = Some(jwt_hash(&jwt));
    status.jwt = Some(jwt.clone());
    record_expiry(&ctx, &acct, exp);

    let expires = if exp == 0 {
        "never expires".to_string()
    } else {
        format!("expires {}", super::time_of(exp).0)
    };
    let what = if !acct.spec.exports.is_empty() || !acct.spec.imports.is_empty() {
        format!(
            "; {} export{}, {} import{}, {minted} activation token{} minted",
            acct.spec.exports.len(),
            plural(acct.spec.exports.len()),
            acct.spec.imports.len(),
            plural(acct.spec.imports.len()),
            plural(minted)
        )
    } else {
        String::new()
    };
    let mut conds = vec![
        Cond::new(
            condition::READY,
            true,
            reason::SIGNED,
            format!("account JWT signed by NatsOperator {op_ns}/{op_name}, {expires}{what}"),
        ),
        Cond::new(
            condition::REFERENCES_RESOLVED,
            true,
            reason::REFERENCES_RESOLVED,
            format!("operatorRef {op_ns}/{op_name}{admitted_by}"),
        ),
    ];
    if unsigned > 0 {
        conds[0] = Cond::new(
            condition::READY,
            true,
            reason::ACTIVATIONS_UNSIGNED,
            format!(
                "account JWT signed by NatsOperator {op_ns}/{op_name}, {expires}; {unsigned} importer{} without a public key yet",
                plural(unsigned)
            ),
        );
    }
    let (d, cond) = if crate::gates::push_waits_for_lookup(
        adopted_elsewhere,
        holding.is_some(),
        ctx.settings.system_connection.is_some(),
    ) {
        (
            prev.distribution.clone(),
            Cond::new(
                condition::DISTRIBUTED,
                false,
                reason::UNREACHABLE,
                "the servers could not be asked which JWT they hold for this adopted account; nothing is pushed before they are".into(),
            ),
        )
    } else {
        super::nats::distribute(
            &ctx,
            &*acct,
            &op_jwt,
            &pk,
            &jwt,
            prev.distribution
                .as_ref()
                .filter(|_| prev.jwt.as_deref() == Some(jwt.as_str())),
        )
        .await
    };
    let current = d.as_ref().is_some_and(distribution::all_current);
    status.distribution = d;
    if cond.reason == reason::UNTRUSTED_SIGNER {
        conds.push(Cond::new(
            condition::SIGNING_KEY_UNTRUSTED,
            true,
            reason::UNTRUSTED_SIGNER,
            cond.message.clone(),
        ));
    }
    conds.push(cond);
    // A retiring signing key is removed only once nothing live is signed by it.
    let retiring: Vec<String> = keys
        .signing
        .iter()
        .filter(|k| k.retiring)
        .map(|k| k.key.public_key())
        .collect();
    if !retiring.is_empty() {
        let issuers = super::creds::issuers(&ctx, &users).await?;
        let in_use = crate::gates::retiring_in_use(&retiring, issuers.iter().map(String::as_str));
        if !in_use.is_empty() {
            conds.push(Cond::new(
                condition::RETIRING_KEYS_IN_USE,
                true,
                condition::RETIRING_KEYS_IN_USE,
                format!(
                    "retiring signing key(s) {} still sign live users; they are being re-signed",
                    in_use.join(", ")
                ),
            ));
        }
    }
    let unrecovered_now = unrecovered.as_ref().is_some_and(|c| c.status);
    conds.extend(unrecovered);

    // Again at half the TTL, sooner while the servers are behind or an importer has no key.
    let mut wait = ctx.settings.resync;
    if exp != 0 {
        let half = iat + (exp - iat) / 2 - now;
        wait = wait.min(Duration::from_secs(u64::try_from(half.max(1)).unwrap_or(1)));
    }
    if !current || unsigned > 0 || unrecovered_now {
        wait = wait.min(super::WAIT_RETRY);
    }
    finish(status, conds, Some(wait)).await
}

/// A deleted account that was signed stays until its NatsOperator's status.deletedAccounts
/// records it (that NatsOperator sends CLAIMS.DELETE, and again to servers that rejoin).
async fn deleting(
    ctx: &Context,
    acct: &NatsAccount,
    op: Option<&NatsOperator>,
) -> Result<Action, Error> {
    if !has_finalizer(acct) {
        return Ok(Action::await_change());
    }
    let prev = acct.status.clone().unwrap_or_default();
    let signed = prev.jwt.as_deref().is_some_and(|j| !j.is_empty());
    if let (Some(pk), Some(op), true) = (&prev.public_key, op, signed) {
        let recorded = op
            .status
            .as_ref()
            .is_some_and(|s| deletions::may_clear_jwt(&s.deleted_accounts, pk));
        if !recorded {
            let waiting_for = format!(
                "NatsOperator {} to record the deletion of {pk}",
                op.name_any()
            );
            let force = deletion_hold::force_delete(acct.annotations());
            match deletion_hold::hold(Held::Account, &waiting_for, force) {
                Hold::Wait(message) => {
                    let generation = acct.meta().generation;
                    let cond = Cond::new(condition::READY, false, reason::DISTRIBUTING, message);
                    let status = NatsAccountStatus {
                        observed_generation: generation,
                        conditions: merge_conditions(
                            &previous_conditions(acct),
                            generation,
                            std::slice::from_ref(&cond),
                            &[],
                        ),
                        ..prev.clone()
                    };
                    write_status(ctx, acct, &status).await?;
                    super::deletion_held(ctx, acct, &cond).await;
                    return Ok(Action::requeue(Duration::from_secs(1)));
                }
                Hold::Release(message) => super::force_deleted(ctx, acct, message).await,
            }
        }
    }
    remove_finalizer(ctx, acct).await?;
    let (ns, name) = (acct.namespace().unwrap_or_default(), acct.name_any());
    ctx.metrics.forget("NatsAccount", &ns, &name);
    ctx.metrics.remove_gauge(
        metrics::ACCOUNT_JWT_EXPIRY,
        &[("namespace", &ns), ("name", &name)],
    );
    Ok(Action::await_change())
}

/// The account JWT expiry gauge: when the signed JWT lapses, or no series for one that never does
/// (a series at 0 would read as long expired).
fn record_expiry(ctx: &Context, acct: &NatsAccount, exp: i64) {
    let (ns, name) = (acct.namespace().unwrap_or_default(), acct.name_any());
    let labels = [("namespace", ns.as_str()), ("name", name.as_str())];
    if exp == 0 {
        ctx.metrics
            .remove_gauge(metrics::ACCOUNT_JWT_EXPIRY, &labels);
    } else {
        ctx.metrics.set_gauge(
            metrics::ACCOUNT_JWT_EXPIRY,
            "When the account JWT the controller signed expires (Unix seconds).",
            &labels,
            exp as f64,
        );
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The same importer of the same export under the same key: its token stays.
fn same_activation(prev: &ActivationToken, now: &ActivationToken) -> bool {
    prev.export == now.export
        && prev.importer == now.importer
        && prev.public_key == now.public_key
        && prev.token.is_some()
        && now.public_key.is_some()
}

/// One import resolved, or why not (reason ImportsUnresolved / ReferenceNotPermitted).
async fn resolve_import(
    ctx: &Context,
    acct: &NatsAccount,
    pk: &str,
    imp: &nats_api::auth::Import,
) -> Result<Result<Import, String>, Error> {
    let ns = acct.namespace().unwrap_or_default();
    let name = acct.name_any();
    // An import by public key: subject and type from the spec, activation from a Secret.
    if let Some(exporter) = &imp.public_key {
        let subject = imp.subject.clone().unwrap_or_default();
        let mut i = match imp.type_ {
            Some(ExportType::Service) => Import::service(exporter.clone(), subject),
            _ => Import::stream(exporter.clone(), subject),
        }
        .named(imp.export.clone());
        if let Some(local) = &imp.local_subject {
            i = i.local_subject(local.clone());
        }
        i.share = imp.share.unwrap_or(false);
        i.allow_trace = imp.allow_trace.unwrap_or(false);
        if let Some(act) = &imp.activation {
            let secret_name = &act.secret_key_ref.name;
            let secret = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
                .get_opt(secret_name)
                .await
                .map_err(kube_err(format!("Secret {ns}/{secret_name}")))?;
            let token = secret
                .and_then(|s| s.data)
                .and_then(|d| d.get(act.key()).map(|b| b.0.clone()))
                .map(|b| String::from_utf8_lossy(&b).trim().to_string());
            match token {
                Some(t) if !t.is_empty() => i = i.token(t),
                _ => {
                    return Ok(Err(format!(
                        "import {}: activation Secret {secret_name} key {} not found",
                        imp.export,
                        act.key()
                    )));
                }
            }
        }
        return Ok(Ok(i));
    }
    let Some(r) = &imp.account_ref else {
        return Ok(Err(format!("import {} names no account", imp.export)));
    };
    let ex_ns = r.namespace.clone().unwrap_or_else(|| ns.clone());
    let kind = match r.kind {
        AccountKind::NatsAccount => "NatsAccount",
        AccountKind::NatsSystemAccount => "NatsSystemAccount",
    };
    if ex_ns != ns {
        let from = Referrer {
            group: AUTH,
            kind: "NatsAccount",
            namespace: &ns,
        };
        let to = Target {
            group: AUTH,
            kind,
            namespace: &ex_ns,
            name: &r.name,
        };
        if !ctx.index.admits(from, to) {
            return Ok(Err(format!(
                "import {}: no NatsReferenceGrant in {ex_ns} admits NatsAccount from {ns} to {kind} {}",
                imp.export, r.name
            )));
        }
    }
    let exporter = match r.kind {
        AccountKind::NatsAccount => ctx.index.account(&ex_ns, &r.name),
        AccountKind::NatsSystemAccount => None,
    };
    let Some(exporter) = exporter else {
        return Ok(Err(format!(
            "import {}: {kind} {ex_ns}/{} not found or exports nothing",
            imp.export, r.name
        )));
    };
    let ex_status = exporter.status.clone().unwrap_or_default();
    let Some(ex_pk) = ex_status.public_key.clone() else {
        return Ok(Err(format!(
            "import {}: {kind} {ex_ns}/{} has no public key yet",
            imp.export, r.name
        )));
    };
    let exporter_name = format!("{ex_ns}/{}", r.name);
    let token = ex_status
        .activations
        .iter()
        .find(|a| a.export == imp.export && a.public_key.as_deref() == Some(pk))
        .and_then(|a| a.token.clone());
    let resolved = exports::resolve_import(
        imp,
        &Exporter {
            name: &exporter_name,
            public_key: &ex_pk,
            exports: &exporter.spec.exports,
        },
        |e| exports::lists_importer(e, &ex_ns, &ns, &name, Some(pk)),
        token.as_deref(),
    );
    match resolved {
        Err(e) => Ok(Err(format!("import {}: {e}", imp.export))),
        Ok(i) => {
            let private = exporter.spec.exports.iter().any(|e| {
                e.name.as_deref() == Some(imp.export.as_str())
                    && e.access == Some(nats_api::auth::ExportAccess::Private)
            });
            if private && i.token.is_empty() {
                return Ok(Err(format!(
                    "import {}: waiting for {exporter_name} to sign this account's activation token",
                    imp.export
                )));
            }
            Ok(Ok(i))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(export: &str, key: Option<&str>, token: Option<&str>) -> ActivationToken {
        ActivationToken {
            export: export.into(),
            importer: "NatsAccount/team-core/core".into(),
            public_key: key.map(str::to_string),
            token: token.map(str::to_string),
        }
    }

    #[test]
    fn an_activation_token_is_kept_only_for_the_same_export_and_importer_key() {
        let prev = tok("execute", Some("AK"), Some("t"));
        assert!(same_activation(
            &prev,
            &tok("execute", Some("AK"), Some("new"))
        ));
        assert!(!same_activation(
            &prev,
            &tok("execute", Some("AOTHER"), Some("new"))
        ));
        assert!(!same_activation(
            &prev,
            &tok("other", Some("AK"), Some("new"))
        ));
        assert!(!same_activation(
            &tok("execute", Some("AK"), None),
            &tok("execute", Some("AK"), Some("n"))
        ));
    }

    #[test]
    fn plural_of_one_is_bare() {
        assert_eq!(plural(1), "");
        assert_eq!(plural(0), "s");
    }
}
