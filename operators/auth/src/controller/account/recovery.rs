//! What the servers hold for a NatsAccount before it is signed (§5.3): the revocation record
//! rebuilt from the record before and the account's users (from the index), revocations taken
//! back from the JWTs the servers hold, never signing older than one of them, and no signing
//! while a roster server is silent for an account recorded distributed (it may hold a newer JWT).

use controller_kit::conditions::Decided;
use kube::ResourceExt;
use nats_api::auth::{AccountKind, NatsAccount, NatsAccountStatus, Revocation, condition, reason};
use nats_claims::Account;

use super::stop::{Stop, not_ready};
use crate::controller::Context;
use crate::controller::nats::{self, Holding};
use crate::controller::revocation::revocation_record;
use crate::controller::seeds::Resolved;
use crate::controller::time::time_of;
use crate::controller::user::in_use;
use crate::distribution::{self, Recovery};

/// The revocation record before the servers are asked: the record and JWT of before, and the
/// users of this account being deleted or that replaced a key. A deleted user is revoked once
/// its own pass marked it revocable, or once this pass finds no NatsConnection naming its creds
/// ([`in_use::unused_creds`]): the revocation need not wait for the user's status write.
pub(super) async fn record(
    ctx: &Context,
    acct: &NatsAccount,
    keys: &Resolved,
    prev: &NatsAccountStatus,
    now: i64,
) -> Vec<Revocation> {
    let (ns, name) = (acct.namespace().unwrap_or_default(), acct.name_any());
    let users = ctx.index.users_of(AccountKind::NatsAccount, &ns, &name);
    let unused = in_use::unused_creds(ctx, &users);
    revocation_record(
        &prev.revocations,
        prev.jwt.as_deref(),
        &users,
        &keys.signing_public_keys(),
        now,
        |u| in_use::revocable(u) || unused.contains(&in_use::user_key(u)),
    )
}

/// The record with what the servers hold merged in, and what they said.
pub(super) struct Recovered {
    pub record: Vec<Revocation>,
    /// What the servers hold (`None`: no system connection, or they could not be asked).
    pub holding: Option<Holding>,
    /// RevocationsUnrecovered, where the servers could be asked.
    pub unrecovered: Option<Decided>,
}

/// Asks the servers which JWT they hold and judges whether to sign (RecoveringRevocations when
/// not: the record is lost and the servers cannot be asked, or a silent one may hold newer).
pub(super) async fn recover(
    ctx: &Context,
    (operator, operator_jwt): (&str, &str),
    keys: &Resolved,
    prev: &NatsAccountStatus,
    mut record: Vec<Revocation>,
    now: i64,
) -> Result<Recovered, Stop> {
    let pk = &keys.public_key;
    // The record of another operator's deployment names none of these servers.
    let recorded = prev
        .distribution
        .as_ref()
        .filter(|_| crate::roster::recorded_under(operator_jwt, prev.jwt.as_deref()));
    let holding = match nats::holding(ctx, operator, pk, recorded).await {
        Ok(h) => h,
        // Servers were heard before, none can be asked now, and the record is lost: any of them
        // may hold the only copy of a revocation.
        Err(e) if prev.jwt.is_none() && !ctx.roster(operator).is_empty() => {
            let m = format!(
                "the servers could not be asked which JWT they hold ({e}); with the status record lost, not signed until they answer"
            );
            return Err(not_ready(reason::RECOVERING_REVOCATIONS, m));
        }
        Err(_) => None,
    };
    let Some(h) = holding else {
        return Ok(Recovered {
            record,
            holding: None,
            unrecovered: None,
        });
    };
    let unrecovered = judge(&h, prev)?;
    for held in h
        .jwts
        .iter()
        .filter(|j| Some(j.as_str()) != prev.jwt.as_deref())
    {
        if let Ok(c) = nats_claims::decode::<Account>(held) {
            record = crate::revocations::merge_from_jwt(&record, &c);
            ctx.raise_iat_floor(pk, c.issued_at + 1);
        }
    }
    record = crate::revocations::prune(&record, &keys.signing_public_keys(), |_| None, now);
    Ok(Recovered {
        record,
        holding: Some(h),
        unrecovered: Some(unrecovered),
    })
}

/// RevocationsUnrecovered as the servers' answers decide it, or the hold of a pass while a
/// silent server may hold a newer JWT.
fn judge(h: &Holding, prev: &NatsAccountStatus) -> Result<Decided, Stop> {
    let answered = h.answered_phrase();
    let rec = distribution::record(
        distribution::issued_at(prev.jwt.as_deref()),
        &h.jwts
            .iter()
            .filter_map(|j| distribution::issued_at(Some(j)))
            .collect::<Vec<_>>(),
        prev.distribution.as_ref(),
    );
    let unrecovered = |status, reason, message| {
        Ok(Decided::new(
            condition::REVOCATIONS_UNRECOVERED,
            status,
            reason,
            message,
        ))
    };
    match distribution::recovery(h.roster.len(), h.answered, rec) {
        Recovery::Sign => unrecovered(false, reason::ALL_SERVERS_CURRENT, answered),
        Recovery::SignFromRecord { .. } => unrecovered(
            false,
            reason::ALL_SERVERS_CURRENT,
            format!("{answered}; signed from the status record, which holds every revocation"),
        ),
        Recovery::SignUnrecovered { .. } => unrecovered(
            true,
            reason::RECOVERING_REVOCATIONS,
            format!("{answered}; signed without their revocations, asking again"),
        ),
        Recovery::Hold { .. } => {
            let m = format!(
                "{answered}: a silent server may hold a newer JWT; not signed until every server answers"
            );
            Err(Stop::Held {
                roster: h.roster.to_status(time_of),
                conds: vec![Decided::new(
                    condition::READY,
                    false,
                    reason::RECOVERING_REVOCATIONS,
                    m,
                )],
            })
        }
    }
}
