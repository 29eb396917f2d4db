//! The end of a NatsUser pass: ReferencesResolved once the account is, the status of a signed
//! user (its key, the JWT where published there, the replaced keys the account JWT does not
//! revoke yet), and the status written, Distributed False NoSystemConnection included where the
//! controller runs without a system connection (§5.2).

use std::time::Duration;

use controller_kit::conditions::Decided;
use kube::Resource;
use kube::runtime::controller::Action;
use nats_api::auth::{NatsUser, NatsUserStatus, condition, reason};

use super::gather::AccountView;
use super::publish::Published;
use super::stop::Stop;
use crate::controller::Context;
use crate::controller::error::Error;
use crate::controller::pass::{retry_later, settled};
use crate::controller::write_status::{merged, write_status};
use crate::user_keys;

/// ReferencesResolved True: the account is found and admitted.
pub(super) fn resolved(view: &AccountView) -> Decided {
    Decided::new(
        condition::REFERENCES_RESOLVED,
        true,
        reason::REFERENCES_RESOLVED,
        format!("accountRef {} resolved", view.desc),
    )
}

/// A signed user's status and conditions.
pub(super) struct Signed {
    pub status: NatsUserStatus,
    pub conds: Vec<Decided>,
}

/// The status of a user signed under `public_key`: a key replaced (a new publicKey, a creds
/// Secret written afresh) is revoked from now on, and status.replacedKeys holds it until the
/// account JWT revokes it.
pub(super) fn signed(
    prev: &NatsUserStatus,
    view: &AccountView,
    public_key: String,
    published: Published,
    resolved: Decided,
    now: i64,
) -> Signed {
    let mut replaced = prev.replaced_keys.clone();
    if let Some(old) = user_keys::replaced(prev.public_key.as_deref(), &public_key) {
        user_keys::hold(&mut replaced, &old, now);
    }
    if let Some(c) = view
        .jwt
        .as_deref()
        .and_then(|j| nats_claims::decode_unverified::<nats_claims::Account>(j).ok())
    {
        replaced = user_keys::pending(&replaced, &c.nats.revocations);
    }
    let ready = Decided::new(condition::READY, true, reason::SIGNED, published.message);
    Signed {
        status: NatsUserStatus {
            public_key: Some(public_key),
            jwt: published.jwt,
            replaced_keys: replaced,
            ..NatsUserStatus::default()
        },
        conds: vec![ready, resolved],
    }
}

/// Writes the status as the pass left it: signed (settled, again after the resync), refused
/// (the status of before, or only its key for PublicKeyInUse; again after the backoff),
/// withdrawn (the status of before with status.withdrawnAt), or nothing where the creds Secret
/// changed under the pass (again in 200 ms) or a fresh JWT must wait out the second.
pub(super) async fn write(
    ctx: &Context,
    u: &NatsUser,
    end: Result<Signed, Stop>,
) -> Result<Action, Error> {
    let prev = u.status.clone().unwrap_or_default();
    let mut again = None;
    let (status, mut conds, ready) = match end {
        Ok(s) => (s.status, s.conds, true),
        Err(Stop::Refused(conds)) => (prev, conds, false),
        Err(Stop::Withdrawn {
            conds,
            at,
            again: a,
        }) => {
            again = a;
            let status = NatsUserStatus {
                withdrawn_at: Some(at),
                ..prev
            };
            (status, conds, false)
        }
        Err(Stop::KeyInUse(conds)) => {
            let status = NatsUserStatus {
                public_key: prev.public_key,
                withdrawn_at: prev.withdrawn_at,
                ..NatsUserStatus::default()
            };
            (status, conds, false)
        }
        Err(Stop::SecretChanged) => return Ok(Action::requeue(Duration::from_millis(200))),
        Err(Stop::Again(after)) => return Ok(Action::requeue(after)),
        Err(Stop::Failed(e)) => return Err(e),
    };
    if ctx.settings.system_connection.is_none() {
        conds.push(Decided::new(
            condition::DISTRIBUTED,
            false,
            reason::NO_SYSTEM_CONNECTION,
            "no --system-connection: nothing is pushed and no deleted user is kicked",
        ));
    }
    let generation = u.meta().generation;
    let status = NatsUserStatus {
        observed_generation: generation,
        conditions: merged(u, &conds, &[condition::DISTRIBUTED]),
        ..status
    };
    write_status(ctx, u, &status).await?;
    if ready {
        settled(ctx, u);
        Ok(Action::requeue(ctx.settings.resync))
    } else {
        Ok(Action::requeue(
            again.unwrap_or_else(|| retry_later(ctx, u)),
        ))
    }
}
