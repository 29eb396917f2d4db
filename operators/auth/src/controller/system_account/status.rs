//! The end of a NatsSystemAccount pass: the status written (SigningKeyUntrusted removed unless
//! set) and when to look again.

use controller_kit::conditions::Decided;
use kube::Resource;
use kube::runtime::controller::Action;
use nats_api::auth::{NatsSystemAccount, NatsSystemAccountStatus, condition};

use super::stop::Stop;
use crate::controller::error::Error;
use crate::controller::pass::{retry_later, settled};
use crate::controller::write_status::{merged, write_status};
use crate::controller::{Context, WAIT_RETRY};

/// Writes the status as the pass left it. Pushed (`end` Ok with its conditions): settled, again
/// after the resync where every condition is True, else soon. Refused: again after the backoff.
pub(super) async fn write(
    ctx: &Context,
    sys: &NatsSystemAccount,
    mut status: NatsSystemAccountStatus,
    end: Result<Vec<Decided>, Stop>,
) -> Result<Action, Error> {
    let (conds, ready) = match end {
        Ok(conds) => (conds, true),
        Err(Stop::Refused(conds)) => (conds, false),
        Err(Stop::NotSelected(conds)) => {
            status.jwt_hash = None;
            status.distribution = None;
            (conds, false)
        }
        Err(Stop::Failed(e)) => return Err(e),
    };
    let generation = sys.meta().generation;
    let wait = if conds.iter().all(|c| c.status) {
        ctx.settings.resync
    } else {
        WAIT_RETRY
    };
    let status = NatsSystemAccountStatus {
        observed_generation: generation,
        conditions: merged(sys, &conds, &[condition::SIGNING_KEY_UNTRUSTED]),
        ..status
    };
    write_status(ctx, sys, &status).await?;
    if ready {
        settled(ctx, sys);
        Ok(Action::requeue(wait))
    } else {
        Ok(Action::requeue(retry_later(ctx, sys)))
    }
}
