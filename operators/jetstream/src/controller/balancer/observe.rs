//! The observe and judge phases of a NatsBalancer's pass: its own last move, while it holds
//! the NATS cluster's lease, judged done or pending ([`Observed`]); then what the controller's
//! other passes hold read, and the pure verdict asked for
//! ([`crate::balance::judge::account_verdict`]).

use std::time::Instant;

use controller_kit::reconcile::describe;
use nats_api::jetstream::{GoDuration, Move, NatsBalancer, NatsBalancerStatus, event};

use super::super::context::Context;
use super::gather::Gathered;
use super::pace;
use crate::balance::account;
use crate::balance::judge::{Around, Verdict, account_verdict};
use crate::balance::{self, gate};

/// What the observe phase found of its own last move.
pub(super) enum Observed {
    /// Still pending (the lease renewed): no judging this pass.
    Pending(Move),
    /// None pending: done (MoveDone, the lease released), or none held.
    Clear,
}

/// The observe phase.
pub(super) async fn observe(
    ctx: &Context,
    obj: &NatsBalancer,
    g: &Gathered,
    previous: &NatsBalancerStatus,
) -> Observed {
    let me = describe(obj);
    let now = Instant::now();
    let Some(m) = previous
        .last_move
        .as_ref()
        .filter(|_| ctx.leases.holds(&g.cluster, &me, now))
    else {
        return Observed::Clear;
    };
    if !account::move_done(&g.view, m) {
        ctx.leases.renew(&g.cluster, &me, now);
        return Observed::Pending(m.clone());
    }
    ctx.leases.release(&g.cluster, &me);
    let message = format!(
        "{:?} move of {} off {} done",
        m.kind,
        balance::moved(&m.stream, m.consumer.as_deref()),
        m.from.as_deref().unwrap_or_default()
    );
    ctx.shared
        .events
        .publish(obj, false, event::MOVE_DONE, message)
        .await;
    Observed::Clear
}

/// The judge phase: the gate reads the whole NATS cluster where a system-credentials pass saw
/// it lately (the sighting gather read, which also widened the servers placement is judged
/// over); the streams under evacuation and those a live system balancer has a move pending
/// on, as the controller holds them now; the verdict pure.
pub(super) fn judge(ctx: &Context, obj: &NatsBalancer, g: &Gathered) -> Verdict {
    let now = Instant::now();
    let around = Around {
        from: gate::gate_from(g.sighting.as_deref(), &g.cluster, g.sighted_at),
        system_pending: account::system_pending(&ctx.moving.system_covers(now)),
        evacuating: ctx.moving.under_evacuation(),
    };
    let interval = GoDuration::from(pace(&obj.spec.interval)).0;
    account_verdict(&g.seen(), &around, &obj.spec.moves, &interval)
}
