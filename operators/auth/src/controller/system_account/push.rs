//! The system account JWT its NatsOperator signed into that NatsOperator's status, pushed as
//! this object's own: held while an adopted system account's servers could not be asked which
//! JWT they hold (§ adoption), and while the NatsOperator reads RevocationsUnrecovered True (§5.2).

use controller_kit::conditions::Decided;
use nats_api::auth::{Distribution, NatsSystemAccount, NatsSystemAccountStatus, condition, reason};

use super::gather::Operator;
use super::stop::Stop;
use crate::controller::nats::{self, Holding};
use crate::controller::seeds::Resolved;
use crate::controller::{Context, jwt};

/// The JWT in force for this system account and the operator JWT it is pushed under.
pub(super) struct Signed {
    pub jwt: String,
    pub operator_jwt: String,
}

/// The system account JWT the NatsOperator signed for this key (KeysPending until it has).
pub(super) fn signed(op: &Operator, keys: &Resolved) -> Result<Signed, Stop> {
    let op_status = op.object.status.clone().unwrap_or_default();
    let jwt = op_status
        .system_account
        .as_ref()
        .filter(|s| s.public_key.as_deref() == Some(keys.public_key.as_str()))
        .and_then(|s| s.jwt.clone());
    let (Some(jwt), Some(operator_jwt)) = (jwt, op_status.jwt) else {
        let cond = Decided::new(
            condition::READY,
            false,
            reason::KEYS_PENDING,
            format!(
                "waiting for NatsOperator {} to sign this system account",
                op.name
            ),
        );
        return Err(Stop::Refused(vec![cond, op.resolved.clone()]));
    };
    Ok(Signed { jwt, operator_jwt })
}

/// Whether the keys were brought from elsewhere and never pushed from here.
fn adopted_unpushed(sys: &NatsSystemAccount, prev: &NatsSystemAccountStatus) -> bool {
    let adopted = sys.spec.public_key.is_some()
        || sys.spec.keys.as_ref().is_some_and(|k| k.identity.is_some());
    adopted && prev.distribution.is_none()
}

/// Adoption: a JWT the servers hold for adopted keys whose fields the NatsOperator's re-signing
/// from spec would drop is refused unless spec.adoption.droppedClaims is Accept (the same
/// comparison as a NatsAccount's).
pub(super) fn adoption(
    sys: &NatsSystemAccount,
    op: &Operator,
    holding: Option<&Holding>,
    signed: &Signed,
    prev: &NatsSystemAccountStatus,
) -> Result<(), Stop> {
    if !adopted_unpushed(sys, prev) {
        return Ok(());
    }
    let Some(held) = holding.and_then(|h| jwt::newest(&h.jwts)) else {
        return Ok(());
    };
    let dropped = crate::gates::dropped_by_resign(&held, &signed.jwt).unwrap_or_default();
    let policy = sys
        .spec
        .adoption
        .as_ref()
        .map(|a| a.dropped_claims)
        .unwrap_or_default();
    crate::gates::adoption(&dropped, policy).map_err(|m| {
        let cond = Decided::new(condition::READY, false, reason::ADOPTION_DROPS_CLAIMS, m);
        Stop::Refused(vec![cond, op.resolved.clone()])
    })
}

/// What the push left: status.distribution and the conditions it adds.
pub(super) struct Pushed {
    pub distribution: Option<Distribution>,
    pub conds: Vec<Decided>,
}

/// Pushes the JWT unless the lookup an adopted system account needs failed (Distributed False
/// Unreachable) or the NatsOperator reads RevocationsUnrecovered True (nothing said, the
/// distribution of before kept).
pub(super) async fn push(
    ctx: &Context,
    sys: &NatsSystemAccount,
    op: &Operator,
    keys: &Resolved,
    signed: &Signed,
    holding: Option<&Holding>,
    prev: &NatsSystemAccountStatus,
) -> Pushed {
    let asked = holding.is_some();
    let adopted_unpushed = adopted_unpushed(sys, prev);
    let mut pushed = Pushed {
        distribution: prev.distribution.clone(),
        conds: vec![],
    };
    let connection = ctx.settings.system_connection.is_some();
    let waits = crate::gates::push_waits_for_lookup(adopted_unpushed, asked, connection);
    if waits {
        pushed.conds.push(Decided::new(
            condition::DISTRIBUTED,
            false,
            reason::UNREACHABLE,
            "the servers could not be asked which JWT they hold for this adopted system account; nothing is pushed before they are",
        ));
    }
    let op_conditions = op
        .object
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    if !waits && crate::gates::may_push_system_account(&op_conditions) {
        let (d, cond) = nats::distribute(
            ctx,
            sys,
            (&nats::roster_key(&op.object), &signed.operator_jwt),
            &keys.public_key,
            &signed.jwt,
            prev.distribution.as_ref(),
            holding,
        )
        .await;
        pushed.distribution = d;
        if cond.reason == reason::UNTRUSTED_SIGNER {
            pushed.conds.push(Decided::new(
                condition::SIGNING_KEY_UNTRUSTED,
                true,
                reason::UNTRUSTED_SIGNER,
                cond.message.clone(),
            ));
        }
        pushed.conds.push(cond);
    }
    pushed
}
