//! The refuse, hold, judge and apply phases of a NatsClusterEvacuation's pass: a source server
//! carrying the target tags refuses it, servers down hold it ([`Stopped`]); the pure plan
//! ([`evacuation_rules::plan`]) chooses the next move, which is requested, and announces those done.

use std::collections::BTreeSet;
use std::time::Instant;

use controller_kit::conditions;
use controller_kit::reconcile::describe;
use nats_api::jetstream::{NatsClusterEvacuation, NatsClusterEvacuationStatus, event, reason};
use nats_wire::Wire;
use nats_wire::jsapi::StreamMove;

use super::super::context::Context;
use super::super::lock::lock;
use super::REFUSED_RETRY;
use super::gather::{Gathered, Stopped};
use crate::evacuation_rules::{self, EvacuationPlan};
use crate::system_view::SystemView;

/// The refuse phase: a source server carrying the target tags refuses the evacuation.
pub(super) async fn refuse(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    view: &SystemView,
) -> Option<Stopped> {
    let message =
        evacuation_rules::refusal(view, &obj.spec.from.cluster, &obj.spec.to.server_tags)?;
    ctx.shared
        .events
        .publish(obj, true, event::EVACUATION_REFUSED, message.clone())
        .await;
    let why = reason::SOURCE_CARRIES_TARGET_TAGS;
    Some(Stopped::ready_false(why, message, ctx.settings.resync))
}

/// The hold phase: while servers are down no move is made and none counted done.
pub(super) fn hold(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    view: &SystemView,
) -> Option<Stopped> {
    let why = evacuation_rules::servers_down(view, &obj.spec.from.cluster)?;
    let message = format!("no move while servers are down: {why}");
    let after = ctx.shared.retry_later(obj);
    Some(Stopped {
        held: true,
        ..Stopped::ready_false(reason::SERVERS_DOWN, message, after)
    })
}

/// The judge phase: the plan, pure, over what was gathered, the moves requested before, and
/// the streams whose move nats-server refused lately.
pub(super) fn judge(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    g: &Gathered,
    previous: &NatsClusterEvacuationStatus,
) -> EvacuationPlan {
    let refused = refused_lately(ctx, obj);
    evacuation_rules::plan(
        &g.view,
        &obj.spec.from.cluster,
        &g.owners,
        &previous.requested,
        &refused,
    )
}

/// The streams of this evacuation whose move nats-server refused within [`REFUSED_RETRY`];
/// older refusals forgotten.
fn refused_lately(ctx: &Context, obj: &NatsClusterEvacuation) -> BTreeSet<(String, String)> {
    let mut all = lock(&ctx.moving.refused);
    let mine = all.entry(describe(obj)).or_default();
    mine.retain(|_, at| at.elapsed() < REFUSED_RETRY);
    mine.keys().cloned().collect()
}

/// The apply phase: moves found done announced, the next move requested.
pub(super) async fn apply(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    wire: &Wire,
    plan: EvacuationPlan,
) -> EvacuationPlan {
    let from = &obj.spec.from.cluster;
    for done in &plan.done {
        let message = format!(
            "stream {} of account {} moved off {from}",
            done.stream, done.account
        );
        ctx.shared
            .events
            .publish(obj, false, event::MOVE_DONE, message)
            .await;
    }
    let Some((account, stream)) = plan.next.clone() else {
        return plan;
    };
    let request = StreamMove::to_tags(obj.spec.to.server_tags.iter().cloned());
    match wire.account_stream_move(&account, &stream, &request).await {
        Ok(_) => {
            let message = format!(
                "ACCOUNT.STREAM.MOVE of stream {stream} of account {account} off {from} to \
                 servers tagged {}",
                obj.spec.to.server_tags.join(", ")
            );
            ctx.shared
                .events
                .publish(obj, false, event::MOVE_STARTED, message)
                .await;
            plan.requested(conditions::now())
        }
        Err(e) => {
            let message =
                format!("ACCOUNT.STREAM.MOVE of stream {stream} of account {account}: {e}");
            tracing::warn!(object = %describe(obj), "{message}");
            ctx.shared
                .events
                .publish(obj, true, event::MOVE_REFUSED, message)
                .await;
            lock(&ctx.moving.refused)
                .entry(describe(obj))
                .or_default()
                .insert((account.clone(), stream.clone()), Instant::now());
            let mut refused = plan.refused.clone();
            refused.push((account, stream));
            EvacuationPlan {
                next: None,
                refused,
                ..plan
            }
        }
    }
}
