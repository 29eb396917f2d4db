//! The account JWT pushed to every server over the system connection (§5.2), or, for an adopted
//! account whose servers could not be asked which JWT they hold, nothing pushed before they are
//! ([`crate::gates::push_waits_for_lookup`]).

use controller_kit::conditions::Decided;
use nats_api::auth::{Distribution, NatsAccount, condition, reason};

use super::sign::adopted_elsewhere;
use crate::controller::Context;
use crate::controller::nats::{self, Holding};
use crate::distribution;

/// What the push left: status.distribution, the conditions it adds, and whether every server
/// holds the JWT.
pub(super) struct Pushed {
    pub distribution: Option<Distribution>,
    pub conds: Vec<Decided>,
    pub current: bool,
}

/// Pushes `jwt` (counted against the distribution of before only where it is the same JWT),
/// with SigningKeyUntrusted where the operator JWT does not list its signer. `under`: the
/// NATS operator's roster key (`nats::roster_key`) and its JWT.
pub(super) async fn push(
    ctx: &Context,
    acct: &NatsAccount,
    (operator, operator_jwt): (&str, &str),
    public_key: &str,
    jwt: &str,
    asked: Option<&Holding>,
) -> Pushed {
    let prev = acct.status.clone().unwrap_or_default();
    let connection = ctx.settings.system_connection.is_some();
    let (d, cond) = if crate::gates::push_waits_for_lookup(
        adopted_elsewhere(acct, &prev),
        asked.is_some(),
        connection,
    ) {
        (
            prev.distribution.clone(),
            Decided::new(
                condition::DISTRIBUTED,
                false,
                reason::UNREACHABLE,
                "the servers could not be asked which JWT they hold for this adopted account; nothing is pushed before they are",
            ),
        )
    } else {
        let last = prev
            .distribution
            .as_ref()
            .filter(|_| prev.jwt.as_deref() == Some(jwt));
        nats::distribute(
            ctx,
            acct,
            (operator, operator_jwt),
            public_key,
            jwt,
            last,
            asked,
        )
        .await
    };
    let current = d.as_ref().is_some_and(distribution::all_current);
    let mut conds = vec![];
    if cond.reason == reason::UNTRUSTED_SIGNER {
        conds.push(Decided::new(
            condition::SIGNING_KEY_UNTRUSTED,
            true,
            reason::UNTRUSTED_SIGNER,
            cond.message.clone(),
        ));
    }
    conds.push(cond);
    Pushed {
        distribution: d,
        conds,
        current,
    }
}
