//! The status phase of a NatsBalancer's pass: pools, lastMove, Ready, Holding and Overlapping
//! written by server-side apply, the skew and pending gauges set; or, for a pass that stopped
//! short, Ready=False with its reason and the rest as it was.

use std::time::Duration;

use controller_kit::conditions::{self, Decided};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use nats_api::jetstream::{
    Move, MoveKind, NatsBalancer, NatsBalancerStatus, condition, metric, reason,
};

use super::super::context::Context;
use super::super::error::{Error, kube_err};
use super::gather::{Gathered, Stopped};
use super::{note_pace, with_note};
use crate::balance::{self, pools};
use crate::stopped_status;

/// How soon a pass with its move pending looks again.
const PENDING_POLL: Duration = Duration::from_secs(2);

/// What the observe, judge and act phases decided.
pub(super) struct Stepped {
    pub holding: Option<Decided>,
    pub last_move: Option<Move>,
    pub pending: bool,
    pub after: Duration,
}

impl Stepped {
    /// `m` pending: Holding MovePending, looked at again soon.
    pub fn pending(m: Move) -> Self {
        let message = format!(
            "the move of {} is pending",
            balance::moved(&m.stream, m.consumer.as_deref())
        );
        Stepped {
            holding: Some(Decided::new(
                condition::HOLDING,
                true,
                reason::MOVE_PENDING,
                message,
            )),
            last_move: Some(m),
            pending: true,
            after: PENDING_POLL,
        }
    }
}

/// A pass that stopped short: Ready=False with its reason and message, the rest as it was
/// ([`stopped_status::stopped`]).
pub(super) async fn write_stopped(
    ctx: &Context,
    obj: &NatsBalancer,
    previous: &NatsBalancerStatus,
    stopped: Stopped,
) -> Result<Action, Error> {
    let ready = Decided::new(condition::READY, false, stopped.reason, stopped.message);
    let generation = obj.metadata.generation;
    let status = stopped_status::stopped(previous, generation, &[ready], &conditions::now());
    write(ctx, obj, &status, previous).await?;
    Ok(Action::requeue(stopped.after))
}

/// The status phase of a pass that judged.
pub(super) async fn write_status(
    ctx: &Context,
    obj: &NatsBalancer,
    g: &Gathered,
    previous: &NatsBalancerStatus,
    s: Stepped,
) -> Result<Action, Error> {
    let note = note_pace(ctx, obj, &obj.spec.interval, &previous.conditions).await;
    let ready = Decided::new(
        condition::READY,
        true,
        reason::BALANCING,
        with_note(
            with_note(
                format!(
                    "{} pools over NATS cluster {}",
                    g.assignment.pools.len(),
                    g.cluster
                ),
                g.unseen.as_deref(),
            ),
            note.as_deref(),
        ),
    );
    let overlapping = pools::overlap_message(&g.assignment.overlapping)
        .map(|m| Decided::new(condition::OVERLAPPING, true, reason::OVERLAPPING, m));
    let set: Vec<Decided> = std::iter::once(ready)
        .chain(s.holding)
        .chain(overlapping)
        .collect();
    let status = NatsBalancerStatus {
        observed_generation: obj.metadata.generation,
        conditions: merged(&previous.conditions, obj.metadata.generation, &set),
        pools: g.pools.clone(),
        last_move: s.last_move,
    };
    write(ctx, obj, &status, previous).await?;
    set_replica_gauges(ctx, obj, g);
    let pending = s.pending.then_some(status.last_move.as_ref()).flatten();
    set_pending_gauge(ctx, obj, pending);
    Ok(Action::requeue(s.after))
}

fn merged(previous: &[Condition], generation: Option<i64>, set: &[Decided]) -> Vec<Condition> {
    conditions::merge(
        previous,
        generation,
        set,
        &[condition::HOLDING, condition::OVERLAPPING],
        &conditions::now(),
    )
}

/// Status applied, each pool's skew gauge set (those of pools gone removed).
async fn write(
    ctx: &Context,
    obj: &NatsBalancer,
    status: &NatsBalancerStatus,
    previous: &NatsBalancerStatus,
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let m = &ctx.shared.metrics;
    for p in previous
        .pools
        .iter()
        .filter(|p| status.pools.iter().all(|q| q.name != p.name))
    {
        for gauge in [metric::BALANCER_LEADER_SKEW, metric::BALANCER_REPLICA_SKEW] {
            m.remove_gauge(
                gauge,
                &[("namespace", &ns), ("name", &name), ("pool", &p.name)],
            );
        }
    }
    for p in &status.pools {
        m.set_gauge(
            metric::BALANCER_LEADER_SKEW,
            "The difference between the most and fewest group leaders a server holds, per pool.",
            &[("namespace", &ns), ("name", &name), ("pool", &p.name)],
            f64::from(p.leader_skew),
        );
    }
    super::super::write_status::count_held(ctx, obj, &status.conditions);
    let written = ctx
        .shared
        .write_status(obj, status)
        .await
        .map_err(kube_err(obj))?;
    ctx.shared.echoes.worked_from(&written);
    Ok(())
}

/// Each pool's replica skew gauge (the family the NatsSystemBalancer sets with pool `system`).
fn set_replica_gauges(ctx: &Context, obj: &NatsBalancer, g: &Gathered) {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    for (p, skew) in g.pools.iter().zip(&g.replica_skews) {
        ctx.shared.metrics.set_gauge(
            metric::BALANCER_REPLICA_SKEW,
            "The difference between the most and fewest group copies a server holds, per pool.",
            &[("namespace", &ns), ("name", &name), ("pool", &p.name)],
            f64::from(*skew),
        );
    }
}

/// The pending gauge: one move of its kind while `pending` is its move pending.
fn set_pending_gauge(ctx: &Context, obj: &NatsBalancer, pending: Option<&Move>) {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    for (kind, label) in [
        (MoveKind::Leader, "leader"),
        (MoveKind::Placement, "placement"),
    ] {
        let n = pending.filter(|m| m.kind == kind).map_or(0.0, |_| 1.0);
        ctx.shared.metrics.set_gauge(
            metric::BALANCER_PENDING_MOVES,
            "Moves a balancer requested and has not seen done, per kind of move.",
            &[("namespace", &ns), ("name", &name), ("move_kind", label)],
            n,
        );
    }
}
