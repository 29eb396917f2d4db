//! The act phase of a NatsSystemBalancer's pass: the lease renewed while a move is pending and
//! released otherwise; the verdict carried out — the lease taken and the move requested
//! through the account's export (MoveStarted, MoveRefused) — as what status shows
//! ([`Written`]).

use std::time::{Duration, Instant};

use controller_kit::conditions::{self, Decided};
use controller_kit::reconcile::describe;
use nats_api::jetstream::{
    Move, MoveKind, NatsSystemBalancer, NatsSystemBalancerStatus, condition, event, reason,
};
use nats_wire::WireError;
use nats_wire::jsapi::StreamMove;

use super::super::balancer::{note_pace, with_note};
use super::super::context::Context;
use super::super::moves::stepdown;
use super::gather::Gathered;
use super::observe::{Observed, record_pending};
use super::{PENDING_POLL, interval};
use crate::balance::judge::Verdict;
use crate::balance::{self, PlannedMove};

/// The parts of status every pass that gathered writes, from what it decided.
pub(super) struct Written {
    pub ready: Decided,
    pub holding: Option<Decided>,
    pub pending: Vec<Move>,
    pub last_move: Option<Move>,
    pub after: Duration,
}

impl Written {
    /// A refused pass: Ready=False as `ready` says, the moves pending and the last as they were.
    pub fn refused(ready: Decided, previous: &NatsSystemBalancerStatus, after: Duration) -> Self {
        Written {
            ready,
            holding: None,
            pending: previous.pending.clone(),
            last_move: previous.last_move.clone(),
            after,
        }
    }
}

fn holding(reason: &'static str, message: String) -> Option<Decided> {
    Some(Decided::new(condition::HOLDING, true, reason, message))
}

/// Ready=True Balancing: what it balances across how many servers, and the pace's note.
pub(super) async fn balancing(
    ctx: &Context,
    obj: &NatsSystemBalancer,
    g: &Gathered,
    previous: &NatsSystemBalancerStatus,
) -> Decided {
    let servers = g.view.servers_of(&g.cluster).count();
    let what = if obj.spec.moves.placement {
        "leaders and replicas"
    } else {
        "leaders"
    };
    let note = note_pace(ctx, obj, &obj.spec.interval, &previous.conditions).await;
    let message = format!(
        "balancing {what} across {servers} servers of NATS cluster {}",
        g.cluster
    );
    Decided::new(
        condition::READY,
        true,
        reason::BALANCING,
        with_note(message, note.as_deref()),
    )
}

/// The act phase.
pub(super) async fn act(
    ctx: &Context,
    obj: &NatsSystemBalancer,
    g: &Gathered,
    previous: &NatsSystemBalancerStatus,
    ready: Decided,
    observed: Observed,
    verdict: Verdict,
) -> Written {
    let me = describe(obj);
    let now = Instant::now();
    let quiet = |holding| Written {
        ready: ready.clone(),
        holding,
        pending: Vec::new(),
        last_move: previous.last_move.clone(),
        after: interval(obj),
    };
    match observed {
        Observed::Pending(pending) => {
            ctx.leases.renew(&g.cluster, &me, now);
            let first = &pending[0];
            let message = format!(
                "a move of {} is pending",
                balance::moved(&first.stream, first.consumer.as_deref())
            );
            return Written {
                holding: holding(reason::MOVE_PENDING, message),
                pending,
                after: PENDING_POLL,
                ..quiet(None)
            };
        }
        Observed::Abandoned => {
            ctx.leases.release(&g.cluster, &me);
            // No move this pass, and none before the interval (not even on this pass's own
            // status write): the lease just released is another balancer's to take first.
            ctx.shared.due.schedule(obj, interval(obj));
            return quiet(None);
        }
        Observed::Clear => ctx.leases.release(&g.cluster, &me),
    }
    let planned = match verdict {
        Verdict::Hold { reason, message } => return quiet(holding(reason, message)),
        Verdict::Settled(message) => {
            let settled = Decided::new(condition::HOLDING, false, reason::SETTLED, message);
            return quiet(Some(settled));
        }
        Verdict::Move(planned) => planned,
    };
    if let Err(holder) = ctx.leases.take(&g.cluster, &me, now) {
        let message = format!("{holder} holds the move lease of {}", g.cluster);
        return quiet(holding(reason::MOVE_LEASE_HELD, message));
    }
    started(ctx, obj, g, planned, quiet(None)).await
}

/// The move requested: MoveStarted and the move pending, or MoveRefused and the lease
/// released (`quiet` what status shows then).
async fn started(
    ctx: &Context,
    obj: &NatsSystemBalancer,
    g: &Gathered,
    planned: PlannedMove,
    quiet: Written,
) -> Written {
    let me = describe(obj);
    match request(g, &planned).await {
        Ok(()) => {
            let m = Move {
                kind: planned.kind,
                account: Some(planned.account.clone()),
                stream: planned.stream.clone(),
                consumer: planned.consumer.clone(),
                from: Some(planned.from.clone()),
                to: planned.to.clone(),
                time: Some(conditions::now()),
            };
            let message = format!(
                "{:?} move of {} of account {} off {}{}",
                m.kind,
                balance::moved(&m.stream, m.consumer.as_deref()),
                planned.account,
                planned.from,
                planned.toward()
            );
            ctx.shared
                .events
                .publish(obj, false, event::MOVE_STARTED, message)
                .await;
            record_pending(ctx, &me, std::slice::from_ref(&m));
            let message = format!(
                "the move of {} is pending",
                balance::moved(&m.stream, m.consumer.as_deref())
            );
            Written {
                holding: holding(reason::MOVE_PENDING, message),
                pending: vec![m.clone()],
                last_move: Some(m),
                after: PENDING_POLL,
                ..quiet
            }
        }
        Err(e) => {
            ctx.leases.release(&g.cluster, &me);
            let message = format!(
                "{:?} move of {} of account {}: {e}",
                planned.kind,
                balance::moved(&planned.stream, planned.consumer.as_deref()),
                planned.account
            );
            ctx.shared
                .events
                .publish(obj, true, event::MOVE_REFUSED, message)
                .await;
            quiet
        }
    }
}

/// The move on the server: a stepdown of the stream's or the consumer's group through the
/// account's export toward the chosen member, or ACCOUNT.STREAM.MOVE of the copy on `from`
/// within the NATS cluster.
async fn request(g: &Gathered, m: &PlannedMove) -> Result<(), WireError> {
    match m.kind {
        MoveKind::Leader => stepdown(g.wire.clone().with_js_domain(&m.account), m).await,
        MoveKind::Placement => {
            let request = StreamMove {
                server: m.from.clone(),
                cluster: g.cluster.clone(),
                ..Default::default()
            };
            g.wire
                .account_stream_move(&m.account, &m.stream, &request)
                .await
                .map(|_| ())
        }
    }
}
