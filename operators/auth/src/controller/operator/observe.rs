//! What the servers hold for the system account, asked over the system connection before the
//! NatsOperator signs its JWT (§5.2, §5.3): a newer JWT raises the least iat the next may carry;
//! while a roster server is silent, its revocations may be unrecovered, and the JWT is then not
//! pushed, and not re-signed where it was distributed.

use controller_kit::conditions::Decided;
use nats_api::auth::{NatsOperatorStatus, condition, reason};
use nats_claims::Account;

use super::gather::SystemAccount;
use crate::controller::{Context, nats};
use crate::distribution::{self, Recovery};

/// What the servers said of the system account's JWT.
pub(super) struct Held {
    /// RevocationsUnrecovered, where the servers could be asked.
    pub recovery: Option<Decided>,
    /// Whether a silent server may hold revocations the record lacks: the JWT stays as it is.
    pub hold: bool,
}

/// Asks the servers which JWT they hold for the system account (nothing without a system
/// connection, or where they cannot be asked).
pub(super) async fn held(
    ctx: &Context,
    operator: &str,
    system: &SystemAccount,
    prev: &NatsOperatorStatus,
) -> Held {
    let sys_pk = &system.keys.public_key;
    let sys_status = system.object.status.clone().unwrap_or_default();
    let prev_sys_jwt = prev.system_account.as_ref().and_then(|s| s.jwt.clone());
    let Some(h) = nats::holding(ctx, operator, sys_pk, sys_status.distribution.as_ref())
        .await
        .ok()
        .flatten()
    else {
        return Held {
            recovery: None,
            hold: false,
        };
    };
    for j in h
        .jwts
        .iter()
        .filter(|j| Some(j.as_str()) != prev_sys_jwt.as_deref())
    {
        if let Ok(c) = nats_claims::decode::<Account>(j) {
            ctx.raise_iat_floor(sys_pk, c.issued_at + 1);
        }
    }
    let answered = h.answered_phrase();
    let record = distribution::record(
        distribution::issued_at(prev_sys_jwt.as_deref()),
        &h.jwts
            .iter()
            .filter_map(|j| distribution::issued_at(Some(j)))
            .collect::<Vec<_>>(),
        sys_status.distribution.as_ref(),
    );
    match distribution::recovery(h.roster.len(), h.answered, record) {
        Recovery::Sign | Recovery::SignFromRecord { .. } => Held {
            recovery: Some(Decided::new(
                condition::REVOCATIONS_UNRECOVERED,
                false,
                reason::ALL_SERVERS_CURRENT,
                answered,
            )),
            hold: false,
        },
        Recovery::SignUnrecovered { .. } | Recovery::Hold { .. } => Held {
            recovery: Some(Decided::new(
                condition::REVOCATIONS_UNRECOVERED,
                true,
                reason::RECOVERING_REVOCATIONS,
                format!("{answered}, for the system account"),
            )),
            hold: true,
        },
    }
}
