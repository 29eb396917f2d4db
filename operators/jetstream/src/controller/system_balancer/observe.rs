//! The observe phase of a NatsSystemBalancer's pass: each move pending judged done
//! (MoveDone), given up after [`lease::abandon_after`] passes found undone in a row
//! (MoveAbandoned), or still waited for ([`Observed`]).

use controller_kit::reconcile::describe;
use kube::ResourceExt;
use nats_api::jetstream::{
    Move, MoveKind, NatsSystemBalancer, NatsSystemBalancerStatus, event, metric,
};

use super::super::context::Context;
use super::super::lock::lock;
use super::PENDING_POLL;
use super::gather::Gathered;
use crate::balance;
use crate::lease;
use crate::system_view::SystemView;

/// What the observe phase found of the moves pending.
pub(super) enum Observed {
    /// These still pending: no move this pass.
    Pending(Vec<Move>),
    /// None pending, one given up: no move this pass either, the lease another's to take.
    Abandoned,
    /// None pending.
    Clear,
}

/// Whether a pending move is undone: a leader move whose group is led by `from` again. A
/// placement move is never judged undone (the copy's way back is a move of its own).
fn undone(view: &SystemView, m: &Move) -> bool {
    m.kind == MoveKind::Leader
        && view.groups.iter().any(|g| {
            m.account.as_deref().is_none_or(|a| a == g.account)
                && g.stream == m.stream
                && g.consumer == m.consumer
                && Some(g.leader.as_str()) == m.from.as_deref()
        })
}

/// The key a pending move's undone passes are counted under.
fn undone_key(me: &str, m: &Move) -> String {
    format!(
        "{me}|{}|{}|{}|{}",
        m.account.as_deref().unwrap_or_default(),
        m.stream,
        m.consumer.as_deref().unwrap_or_default(),
        m.from.as_deref().unwrap_or_default()
    )
}

/// The observe phase.
pub(super) async fn observe(
    ctx: &Context,
    obj: &NatsSystemBalancer,
    g: &Gathered,
    previous: &NatsSystemBalancerStatus,
) -> Observed {
    let me = describe(obj);
    let mut pending = Vec::new();
    let mut abandoned = false;
    let bound = lease::abandon_after(PENDING_POLL);
    for m in &previous.pending {
        let key = undone_key(&me, m);
        let what = |verb: &str| {
            format!(
                "{:?} move of {} of account {} off {} {verb}",
                m.kind,
                balance::moved(&m.stream, m.consumer.as_deref()),
                m.account.as_deref().unwrap_or_default(),
                m.from.as_deref().unwrap_or_default()
            )
        };
        match lease::judge_pending(
            balance::move_done(&g.view, m),
            undone(&g.view, m),
            ctx.leases.undone(&key),
            bound,
        ) {
            lease::Pending::Done => {
                ctx.shared
                    .events
                    .publish(obj, false, event::MOVE_DONE, what("done"))
                    .await;
            }
            lease::Pending::Abandoned => {
                abandoned = true;
                let message = what(&format!(
                    "given up: led by {} again in {bound} passes in a row; the move lease is released",
                    m.from.as_deref().unwrap_or_default()
                ));
                ctx.shared
                    .events
                    .publish(obj, true, event::MOVE_ABANDONED, message)
                    .await;
                ctx.shared.metrics.add_counter(
                    metric::BALANCER_MOVES_ABANDONED,
                    "Pending moves a balancer gave up, found undone pass after pass.",
                    &[
                        ("namespace", &obj.namespace().unwrap_or_default()),
                        ("name", &obj.name_any()),
                    ],
                    1.0,
                );
            }
            lease::Pending::Waiting { undone } => {
                ctx.leases.set_undone(&key, undone);
                pending.push(m.clone());
            }
        }
    }
    let counted: Vec<String> = pending.iter().map(|m| undone_key(&me, m)).collect();
    ctx.leases.keep_undone(&me, &counted);
    record_pending(ctx, &me, &pending);
    match (pending.is_empty(), abandoned) {
        (false, _) => Observed::Pending(pending),
        (true, true) => Observed::Abandoned,
        (true, false) => Observed::Clear,
    }
}

/// The streams with a move pending, on this balancer's claim (the account balancers yield to
/// them).
pub(super) fn record_pending(ctx: &Context, me: &str, pending: &[Move]) {
    if let Some(c) = lock(&ctx.moving.system_balancers).get_mut(me) {
        c.pending = pending
            .iter()
            .map(|m| (m.account.clone().unwrap_or_default(), m.stream.clone()))
            .collect();
    }
}
