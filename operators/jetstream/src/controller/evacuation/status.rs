//! The status phase of a NatsClusterEvacuation's pass: counts, requested, pinned, stale
//! placements, Ready and Holding applied, the gauges of what remains set; a pass that stopped
//! short keeps the counts it had.

use controller_kit::conditions::{self, Decided};
use controller_kit::reconcile::describe;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use nats_api::jetstream::{NatsClusterEvacuation, NatsClusterEvacuationStatus, condition, metric};

use super::super::context::Context;
use super::super::error::{Error, kube_err};
use super::super::lock::lock;
use super::MOVE_POLL;
use super::gather::Stopped;
use crate::evacuation_rules::{self, EvacuationPlan};
use crate::stopped_status;

/// A pass that stopped short: Ready (and Holding when held) as `stopped` says, the rest as it
/// was ([`stopped_status::stopped`]).
pub(super) async fn write_stopped(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    previous: &NatsClusterEvacuationStatus,
    stopped: Stopped,
) -> Result<Action, Error> {
    let set = decided(&stopped.ready, stopped.held);
    let generation = obj.metadata.generation;
    let status = stopped_status::stopped(previous, generation, &set, &conditions::now());
    write(ctx, obj, status).await?;
    Ok(Action::requeue(stopped.after))
}

/// The status phase of a pass that carried out `plan`, `moved` in all; the moves in flight
/// recorded for the balancers to skip.
pub(super) async fn write_status(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    previous: &NatsClusterEvacuationStatus,
    plan: EvacuationPlan,
    moved: u32,
) -> Result<Action, Error> {
    let after = if plan.in_flight.is_empty() && plan.remaining == 0 {
        ctx.settings.resync
    } else {
        MOVE_POLL
    };
    let ready = evacuation_rules::ready(&plan, moved, &obj.spec.from.cluster);
    let moving = plan
        .in_flight
        .iter()
        .map(|r| (r.account.clone(), r.stream.clone()))
        .collect();
    lock(&ctx.moving.evacuations).insert(describe(obj), moving);
    let status = NatsClusterEvacuationStatus {
        observed_generation: obj.metadata.generation,
        conditions: merged(previous, obj.metadata.generation, &ready, false),
        moved,
        in_flight: plan.in_flight.len() as u32,
        remaining: plan.remaining,
        requested: plan.in_flight,
        pinned: plan.pinned,
        stale_placement: plan.stale,
    };
    write(ctx, obj, status).await?;
    Ok(Action::requeue(after))
}

/// Ready (and Holding, when held, with Ready's reason and message) over the previous
/// conditions; Holding removed otherwise.
fn merged(
    previous: &NatsClusterEvacuationStatus,
    generation: Option<i64>,
    ready: &Decided,
    held: bool,
) -> Vec<Condition> {
    let set = decided(ready, held);
    conditions::merge(
        &previous.conditions,
        generation,
        &set,
        &[condition::HOLDING],
        &conditions::now(),
    )
}

/// Ready, and Holding with Ready's reason and message when held.
fn decided(ready: &Decided, held: bool) -> Vec<Decided> {
    let holding = held.then(|| Decided {
        type_: condition::HOLDING,
        status: true,
        ..ready.clone()
    });
    std::iter::once(ready.clone()).chain(holding).collect()
}

/// The status applied and the gauges of what remains set.
async fn write(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    status: NatsClusterEvacuationStatus,
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let labels = [("namespace", ns.as_str()), ("name", name.as_str())];
    let m = &ctx.shared.metrics;
    m.set_gauge(
        metric::EVACUATION_REMAINING,
        "Stream groups an evacuation has still to move off its source (in flight included).",
        &labels,
        f64::from(status.remaining + status.in_flight),
    );
    m.set_gauge(
        metric::EVACUATION_STALE_PLACEMENTS,
        "Moved stream groups with no resource whose config still names the evacuated cluster.",
        &labels,
        status.stale_placement.len() as f64,
    );
    let written = ctx
        .shared
        .write_status(obj, &status)
        .await
        .map_err(kube_err(obj))?;
    ctx.shared.echoes.worked_from(&written);
    Ok(())
}
