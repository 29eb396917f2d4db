//! The act phase of a NatsBalancer's pass: the verdict carried out — the NATS cluster's lease
//! taken and the move requested over the account's own connection (MoveStarted, MoveRefused)
//! — as what status shows ([`Stepped`]).

use std::time::Instant;

use controller_kit::conditions::{self, Decided};
use controller_kit::reconcile::describe;
use nats_api::jetstream::{
    Move, MoveKind, NatsBalancer, NatsBalancerStatus, condition, event, reason,
};
use nats_wire::Wire;

use super::super::context::Context;
use super::super::moves::stepdown;
use super::gather::Gathered;
use super::pace;
use super::status::Stepped;
use crate::balance::judge::Verdict;
use crate::balance::{self, PlannedMove};
use crate::jsapi;

/// The act phase.
pub(super) async fn act(
    ctx: &Context,
    obj: &NatsBalancer,
    g: &Gathered,
    verdict: Verdict,
    previous: &NatsBalancerStatus,
) -> Stepped {
    let me = describe(obj);
    let quiet = |holding| Stepped {
        holding,
        last_move: previous.last_move.clone(),
        pending: false,
        after: pace(&obj.spec.interval),
    };
    let planned = match verdict {
        Verdict::Hold { reason, message } => {
            return quiet(Some(Decided::new(
                condition::HOLDING,
                true,
                reason,
                message,
            )));
        }
        Verdict::Settled(message) => {
            let settled = Decided::new(condition::HOLDING, false, reason::SETTLED, message);
            return quiet(Some(settled));
        }
        Verdict::Move(planned) => planned,
    };
    if let Err(holder) = ctx.leases.take(&g.cluster, &me, Instant::now()) {
        let message = format!(
            "{holder} holds the move lease of NATS cluster {}",
            g.cluster
        );
        return quiet(Some(Decided::new(
            condition::HOLDING,
            true,
            reason::MOVE_LEASE_HELD,
            message,
        )));
    }
    started(ctx, obj, g, planned, quiet(None)).await
}

/// The move requested: MoveStarted and the move pending, or MoveRefused and the lease
/// released (`quiet` what status shows then).
async fn started(
    ctx: &Context,
    obj: &NatsBalancer,
    g: &Gathered,
    planned: PlannedMove,
    quiet: Stepped,
) -> Stepped {
    let about = format!(
        "{:?} move of {} off {}{}",
        planned.kind,
        balance::moved(&planned.stream, planned.consumer.as_deref()),
        planned.from,
        planned.toward()
    );
    match request(g, &planned).await {
        Ok(()) => {
            ctx.shared
                .events
                .publish(obj, false, event::MOVE_STARTED, about)
                .await;
            Stepped::pending(Move {
                kind: planned.kind,
                account: g.account.clone(),
                stream: planned.stream,
                consumer: planned.consumer,
                from: Some(planned.from),
                to: planned.to,
                time: Some(conditions::now()),
            })
        }
        Err(e) => {
            ctx.leases.release(&g.cluster, &describe(obj));
            ctx.shared
                .events
                .publish(obj, true, event::MOVE_REFUSED, format!("{about}: {e}"))
                .await;
            quiet
        }
    }
}

/// The move on the server, over the account's own connection: a stepdown toward the chosen
/// member ([`stepdown`]), or the copy on `from` removed from the stream's peers for the meta
/// leader to place anew.
async fn request(g: &Gathered, m: &PlannedMove) -> Result<(), String> {
    match m.kind {
        MoveKind::Leader => stepdown(Wire::new(g.client.clone()), m)
            .await
            .map_err(|e| e.to_string()),
        MoveKind::Placement => jsapi::stream_peer_remove(&g.client, &m.stream, &m.from)
            .await
            .map_err(|e| e.to_string()),
    }
}
