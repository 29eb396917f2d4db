//! NatsUser: admission (AccountNotAdmitted), PublicKeyInUse within its account, the user JWT
//! signed by the account signing key its role or the first plain one names, and the creds file
//! written to credentials.secretKeyRef (or, with publicKey, the JWT alone in status).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::auth::{
    AccountKind, DEFAULT_CREDS_KEY, GeneratedKind, NatsUser, NatsUserStatus, condition, reason,
};
use nats_claims::{Creds, KeyKind, NKey, User};

use super::creds::{Written, creds_secret_of, delete_creds, write_creds};
use super::index::{Feed, Kind};
use super::keys::{self, Subject};
use super::refs::{account_of, kind_name};
use super::time::created;
use super::{
    Cond, Context, Error, add_finalizer, has_finalizer, merge_conditions, previous_conditions,
    remove_finalizer, retry_later, secs_of, settled, sign_stable, unix_now, write_status,
};
use crate::deletion_hold::{self, Held, Hold};
use crate::grants;
use crate::uniqueness::{Holder, check_unique};
use crate::user::{self as core, Issued};
use crate::{distribution, kick, user_keys};

/// The NatsUser controller: wakes on accounts, system accounts, other users (key uniqueness),
/// NatsOperators and grants.
pub(crate) async fn controller(ctx: Arc<Context>, feed: Feed<NatsUser>) {
    let wakes = [
        Kind::Account,
        Kind::SystemAccount,
        Kind::Operator,
        Kind::User,
        Kind::Grant,
    ];
    let c = super::pass::indexed(&ctx, feed, &wakes);
    super::drive(c, ctx, reconcile).await;
}

/// What a user needs of its account.
struct AccountView {
    public_key: Option<String>,
    /// The account JWT in force (the system account's from its NatsOperator's status).
    jwt: Option<String>,
    distribution: Option<nats_api::auth::Distribution>,
    keys: Option<nats_api::auth::Keys>,
    offline: bool,
    admitted: bool,
    generated: GeneratedKind,
}

async fn reconcile(u: Arc<NatsUser>, ctx: Arc<Context>) -> Result<Action, Error> {
    let generation = u.meta().generation;
    let prev = u.status.clone().unwrap_or_default();
    let prev_conds = previous_conditions(&*u);
    let no_connection = ctx.settings.system_connection.is_none();
    let finish = async |status: NatsUserStatus, mut conds: Vec<Cond>, ready: bool| {
        // Without a system connection every user says so (§5.2).
        if no_connection {
            conds.push(Cond::new(
                condition::DISTRIBUTED,
                false,
                reason::NO_SYSTEM_CONNECTION,
                "no --system-connection: nothing is pushed and no deleted user is kicked".into(),
            ));
        }
        let status = NatsUserStatus {
            observed_generation: generation,
            conditions: merge_conditions(
                &prev_conds,
                generation,
                &conds,
                &[condition::DISTRIBUTED],
            ),
            ..status
        };
        write_status(&ctx, &*u, &status).await?;
        if ready {
            settled(&ctx, &*u);
            Ok::<_, Error>(Action::requeue(ctx.settings.resync))
        } else {
            Ok(Action::requeue(retry_later(&ctx, &*u)))
        }
    };
    let (kind, acc_ns, acc_name) = account_of(&u);
    let kind_s = kind_name(kind);
    let account_desc = format!("{kind_s} {acc_ns}/{acc_name}");

    let view = match kind {
        AccountKind::NatsAccount => ctx.index.account(&acc_ns, &acc_name).map(|a| AccountView {
            public_key: a.status.as_ref().and_then(|s| s.public_key.clone()),
            jwt: a.status.as_ref().and_then(|s| s.jwt.clone()),
            distribution: a.status.as_ref().and_then(|s| s.distribution.clone()),
            keys: a.spec.keys.clone(),
            offline: a.spec.public_key.is_some(),
            admitted: ctx.index.account_admitted(&a),
            generated: GeneratedKind::Account,
        }),
        AccountKind::NatsSystemAccount => {
            match ctx.index.system_account(&acc_ns, &acc_name) {
                None => None,
                Some(a) => {
                    let op_ns = a
                        .spec
                        .operator_ref
                        .namespace
                        .clone()
                        .unwrap_or(acc_ns.clone());
                    let jwt = ctx
                        .index
                        .operator(&op_ns, &a.spec.operator_ref.name)
                        .and_then(|o| o.status.clone()?.system_account?.jwt);
                    Some((a, jwt))
                }
            }
            .map(|(a, jwt)| AccountView {
                public_key: a.status.as_ref().and_then(|s| s.public_key.clone()),
                // The count is of the JWT in force only where its hash says so.
                distribution: a
                    .status
                    .as_ref()
                    .filter(|s| {
                        s.jwt_hash.is_some() && s.jwt_hash == jwt.as_deref().map(super::jwt_hash)
                    })
                    .and_then(|s| s.distribution.clone()),
                jwt,
                keys: a.spec.keys.clone(),
                offline: a.spec.public_key.is_some(),
                admitted: true,
                generated: GeneratedKind::SystemAccount,
            })
        }
    };
    if u.meta().deletion_timestamp.is_some() {
        return deleting(&ctx, &u, view.as_ref()).await;
    }
    let Some(view) = view else {
        let m = format!("accountRef {account_desc} not found");
        return finish(
            prev,
            vec![
                Cond::new(
                    condition::READY,
                    false,
                    reason::REFERENCE_NOT_FOUND,
                    m.clone(),
                ),
                Cond::new(
                    condition::REFERENCES_RESOLVED,
                    false,
                    reason::REFERENCE_NOT_FOUND,
                    m,
                ),
            ],
            false,
        )
        .await;
    };
    signed(&ctx, &u, view, prev, &account_desc, finish).await
}

async fn signed(
    ctx: &Context,
    u: &NatsUser,
    view: AccountView,
    prev: NatsUserStatus,
    account_desc: &str,
    finish: impl AsyncFnOnce(NatsUserStatus, Vec<Cond>, bool) -> Result<Action, Error>,
) -> Result<Action, Error> {
    let ns = u.namespace().unwrap_or_default();
    let name = u.name_any();
    let (kind, acc_ns, acc_name) = account_of(u);
    let kind_s = kind_name(kind);
    // The finalizer holds a deleted user until its key is revoked everywhere (§5.3).
    if !has_finalizer(u) {
        add_finalizer(ctx, u).await?;
    }

    // Admission: the account's own to its NatsOperator, and this namespace's to the account.
    let grants = if acc_ns == ns {
        vec![]
    } else {
        ctx.index.grants_in(&acc_ns)
    };
    if let Err(t) = grants::user_admission(&ns, kind_s, &acc_ns, &acc_name, view.admitted, &grants)
    {
        let message = if view.admitted {
            t.to_string()
        } else {
            format!("{account_desc} is not admitted to its NatsOperator; no user JWT signed")
        };
        return finish(
            prev,
            vec![Cond::new(condition::READY, false, t.reason(), message)],
            false,
        )
        .await;
    }
    let resolved = Cond::new(
        condition::REFERENCES_RESOLVED,
        true,
        reason::REFERENCES_RESOLVED,
        format!("accountRef {account_desc} resolved"),
    );
    let Some(account_pk) = view.public_key.clone() else {
        return finish(
            prev,
            vec![
                Cond::new(
                    condition::READY,
                    false,
                    reason::KEYS_PENDING,
                    format!("waiting for {account_desc} to record its public key"),
                ),
                resolved,
            ],
            false,
        )
        .await;
    };
    let acct_keys = match keys::resolve(
        ctx,
        Subject {
            kind: view.generated,
            namespace: &acc_ns,
            name: &acc_name,
            keys: view.keys.as_ref(),
            offline: view.offline.then(|| account_pk.clone()),
            recorded: Some(&account_pk),
            may_generate: false,
        },
    )
    .await?
    {
        Ok(k) => k,
        Err(e) => {
            return finish(
                prev,
                vec![
                    Cond::new(
                        condition::READY,
                        false,
                        reason::KEYS_PENDING,
                        format!("{account_desc}: {}", e.message()),
                    ),
                    resolved,
                ],
                false,
            )
            .await;
        }
    };

    // The user's key: its own publicKey, else the seed in its creds Secret, else a new one.
    let creds_ref = u.spec.credentials.as_ref().map(|c| {
        (
            c.secret_key_ref.name.clone(),
            c.secret_key_ref
                .key
                .clone()
                .unwrap_or_else(|| DEFAULT_CREDS_KEY.to_string()),
        )
    });
    let mut prev_jwt = prev.jwt.clone();
    // The creds Secret as found, only where this user may write it.
    let mut creds_found: Option<Secret> = None;
    let (user_pk, seed) = match (&u.spec.public_key, &creds_ref) {
        (Some(pk), _) => (pk.clone(), None),
        (None, Some((secret, key))) => {
            let found = match creds_secret_of(ctx, u, secret).await? {
                Ok(found) => found,
                Err(conflict) => {
                    return finish(
                        prev,
                        vec![
                            Cond::new(
                                condition::READY,
                                false,
                                reason::SECRET_CONFLICT,
                                conflict.to_string(),
                            ),
                            resolved,
                        ],
                        false,
                    )
                    .await;
                }
            };
            creds_found = found;
            let existing = creds_found
                .as_ref()
                .and_then(|s| s.data.clone())
                .and_then(|d| d.get(key).map(|b| b.0.clone()))
                .and_then(|b| Creds::parse(&String::from_utf8_lossy(&b)).ok());
            match existing
                .as_ref()
                .and_then(|c| c.key().ok().map(|k| (c.jwt.clone(), k)))
            {
                Some((jwt, k)) => {
                    prev_jwt = Some(jwt);
                    (k.public_key(), Some(k))
                }
                None => {
                    let k = NKey::generate(KeyKind::User);
                    (k.public_key(), Some(k))
                }
            }
        }
        (None, None) => {
            return finish(
                prev,
                vec![Cond::new(
                    condition::READY,
                    false,
                    reason::INVALID_KEYS,
                    "neither publicKey nor credentials is set".into(),
                )],
                false,
            )
            .await;
        }
    };

    // PublicKeyInUse: unique among the users of the account; the older keeps it.
    let users = ctx.index.users_of(kind, &acc_ns, &acc_name);
    let others: Vec<Holder> = users
        .iter()
        .filter_map(|o| {
            Some(Holder {
                name: format!(
                    "NatsUser {}/{}",
                    o.namespace().unwrap_or_default(),
                    o.name_any()
                ),
                public_key: o.status.as_ref()?.public_key.clone()?,
                created: created(&**o),
            })
        })
        .collect();
    let me = Holder {
        name: format!("NatsUser {ns}/{name}"),
        public_key: user_pk.clone(),
        created: created(u),
    };
    if let Err(e) = check_unique(&me, &others, None) {
        return finish(
            NatsUserStatus {
                public_key: prev.public_key.clone(),
                ..NatsUserStatus::default()
            },
            vec![
                Cond::new(
                    condition::READY,
                    false,
                    reason::PUBLIC_KEY_IN_USE,
                    e.to_string(),
                ),
                resolved,
            ],
            false,
        )
        .await;
    }

    // Sign with the scoped key of its role, else the first plain signing key.
    let listed: Vec<_> = acct_keys
        .signing
        .iter()
        .map(|s| (s.as_account_key(), s.retiring))
        .collect();
    let signer = match core::signing_key_for(&u.spec, &listed) {
        Ok(k) => k.public_key.clone(),
        Err(e) => {
            return finish(
                prev,
                vec![
                    Cond::new(condition::READY, false, reason::INVALID_KEYS, e.to_string()),
                    resolved,
                ],
                false,
            )
            .await;
        }
    };
    let Some(signer) = acct_keys
        .signing
        .iter()
        .find(|s| s.key.public_key() == signer)
    else {
        return finish(prev, vec![resolved], false).await;
    };
    let claims = core::user_claims(&name, &u.spec, &user_pk, &account_pk);
    let now = unix_now();
    let issued = sign_stable::<User, _>(prev_jwt.as_deref(), now, |iat| {
        claims.encode_issued_at(&signer.key, iat)
    })
    .and_then(|jwt| {
        let iat = nats_claims::decode_unverified::<User>(&jwt)
            .map(|c| c.issued_at)
            .unwrap_or(now);
        core::issue(&claims, &signer.key, seed.as_ref(), iat)
    });
    let issued = match issued {
        Ok(i) => i,
        Err(e) => {
            return finish(
                prev,
                vec![
                    Cond::new(condition::READY, false, reason::INVALID_KEYS, e.to_string()),
                    resolved,
                ],
                false,
            )
            .await;
        }
    };
    let (jwt_status, message) = match issued {
        Issued::JwtOnly(jwt) => (
            Some(jwt),
            format!("user JWT signed by account {acc_name}; published in status.jwt"),
        ),
        Issued::Creds(text) => {
            let Some((secret, key)) = &creds_ref else {
                return finish(prev, vec![resolved], false).await;
            };
            if write_creds(ctx, u, secret, creds_found.as_ref(), key, text.into_bytes()).await?
                == Written::Changed
            {
                // Deleted or rewritten since it was read: judged again from what is there now.
                return Ok(Action::requeue(std::time::Duration::from_millis(200)));
            }
            (
                None,
                format!("user JWT signed by account {acc_name}; creds written to Secret {secret}"),
            )
        }
    };
    // A key replaced (a new publicKey, a creds Secret written afresh) is revoked from now on;
    // status.replacedKeys holds it until the account JWT revokes it.
    let mut replaced = prev.replaced_keys.clone();
    if let Some(old) = user_keys::replaced(prev.public_key.as_deref(), &user_pk) {
        user_keys::hold(&mut replaced, &old, now);
    }
    if let Some(c) = view
        .jwt
        .as_deref()
        .and_then(|j| nats_claims::decode_unverified::<nats_claims::Account>(j).ok())
    {
        replaced = user_keys::pending(&replaced, &c.nats.revocations);
    }
    let status = NatsUserStatus {
        public_key: Some(user_pk),
        jwt: jwt_status,
        replaced_keys: replaced,
        ..NatsUserStatus::default()
    };
    finish(
        status,
        vec![
            Cond::new(condition::READY, true, reason::SIGNED, message),
            resolved,
        ],
        true,
    )
    .await
}

/// A deleted user: its key is revoked in the account JWT (the account's reconcile adds it from
/// the deletion time); once every server holds that JWT and no replaced key is pending, its live
/// connections are kicked, its creds Secret goes last, and the finalizer is released. Without a
/// system connection nothing is pushed or kicked: the revocation signed is enough.
async fn deleting(
    ctx: &Context,
    u: &NatsUser,
    view: Option<&AccountView>,
) -> Result<Action, Error> {
    if !has_finalizer(u) {
        return Ok(Action::await_change());
    }
    let prev = u.status.clone().unwrap_or_default();
    let at = u
        .meta()
        .deletion_timestamp
        .as_ref()
        .map(secs_of)
        .unwrap_or(0);
    let claims = view
        .and_then(|v| v.jwt.as_deref())
        .and_then(|j| nats_claims::decode_unverified::<nats_claims::Account>(j).ok());
    if let (Some(pk), Some(view), Some(claims)) = (&prev.public_key, view, claims)
        && view.admitted
    {
        let revoked = claims.nats.revocations.get(pk).is_some_and(|t| *t >= at);
        let pending = user_keys::pending(&prev.replaced_keys, &claims.nats.revocations);
        let connected = ctx.settings.system_connection.is_some();
        let current = !connected
            || view
                .distribution
                .as_ref()
                .is_some_and(distribution::all_current);
        let force = deletion_hold::force_delete(u.annotations());
        if !revoked || !user_keys::finalizer_may_proceed(current, &pending) {
            let mut waiting_for = format!("every server to hold the account JWT revoking {pk}");
            if let Some(d) = &view.distribution {
                waiting_for.push_str(&format!(" ({})", distribution::describe(d)));
            }
            match deletion_hold::hold(Held::User, &waiting_for, force) {
                Hold::Wait(message) => {
                    let cond = Cond::new(condition::READY, false, reason::DISTRIBUTING, message);
                    let generation = u.meta().generation;
                    let status = NatsUserStatus {
                        observed_generation: generation,
                        conditions: merge_conditions(
                            &previous_conditions(u),
                            generation,
                            std::slice::from_ref(&cond),
                            &[],
                        ),
                        ..prev.clone()
                    };
                    write_status(ctx, u, &status).await?;
                    super::deletion_held(ctx, u, &cond).await;
                    return Ok(Action::requeue(std::time::Duration::from_secs(1)));
                }
                Hold::Release(message) => super::force_deleted(ctx, u, message).await,
            }
        }
        // Ready reads False Kicking while connections remain; the finalizer waits for a CONNZ
        // that finds none (force-delete does not wait for it).
        if connected
            && !force
            && let Some(account_pk) = &view.public_key
            && kick_connections(ctx, u, account_pk, pk).await?.is_some()
        {
            return Ok(Action::requeue(std::time::Duration::from_secs(1)));
        }
    }
    if let Some(c) = &u.spec.credentials {
        delete_creds(ctx, u, &c.secret_key_ref.name).await?;
    }
    remove_finalizer(ctx, u).await?;
    ctx.metrics.forget(
        "NatsUser",
        &u.namespace().unwrap_or_default(),
        &u.name_any(),
    );
    Ok(Action::await_change())
}

/// Kicks the deleted user's live connections: CONNZ filtered by account and user key, then
/// KICK on each server holding one, with Ready False Kicking naming what remains written first.
/// Some(n) when n connections were found (the caller looks again), None when none remain or
/// CONNZ failed (logged; the revoked key is refused anyway).
async fn kick_connections(
    ctx: &Context,
    u: &NatsUser,
    account_pk: &str,
    user_pk: &str,
) -> Result<Option<usize>, Error> {
    let Ok(Some(wire)) = super::nats::system_wire(ctx).await else {
        return Ok(None);
    };
    let options = nats_wire::monitor::ConnzOptions::user_of_account(account_pk, user_pk);
    let replies = match wire
        .ping_connz(
            &options,
            nats_wire::Collect::until(std::time::Duration::from_millis(1500)),
        )
        .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "CONNZ of a deleted user failed");
            return Ok(None);
        }
    };
    let targets = kick::targets(&replies, user_pk);
    let Some(message) = kick::kicking_message(user_pk, &targets) else {
        return Ok(None);
    };
    let cond = Cond::new(condition::READY, false, reason::KICKING, message);
    let generation = u.meta().generation;
    let prev = u.status.clone().unwrap_or_default();
    let status = NatsUserStatus {
        observed_generation: generation,
        conditions: merge_conditions(&previous_conditions(u), generation, &[cond], &[]),
        ..prev
    };
    write_status(ctx, u, &status).await?;
    let mut kicked = 0;
    for (server, cid) in &targets {
        match wire.kick(server, *cid).await {
            Ok(_) => kicked += 1,
            Err(e) => tracing::warn!(error = %e, server, cid, "KICK failed"),
        }
    }
    if kicked > 0 {
        ctx.events
            .publish(
                u,
                false,
                nats_api::auth::event::USER_KICKED,
                format!("kicked {kicked} connection(s) of revoked user {user_pk}"),
            )
            .await;
    }
    Ok(Some(targets.len()))
}
