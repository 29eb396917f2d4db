//! The NatsSystemBalancer's status phase: its conditions merged, its status applied, the
//! skew and pending-move gauges set (and removed with the balancer).

use controller_kit::conditions::{self, Decided};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use nats_api::jetstream::{
    MoveKind, NatsSystemBalancer, NatsSystemBalancerStatus, condition, metric,
};

use super::super::context::Context;
use super::super::error::{Error, kube_err};
use super::super::replica_divergence;
use super::act::Written;
use super::gather::Gathered;
use crate::balance;
use crate::divergence;
use crate::stopped_status;

/// A pass that stopped short: Ready=False as `ready` says, the rest as it was
/// ([`stopped_status::stopped`]); looked at again after a backoff.
pub(super) async fn write_stopped(
    ctx: &Context,
    obj: &NatsSystemBalancer,
    previous: &NatsSystemBalancerStatus,
    ready: Decided,
) -> Result<Action, Error> {
    let generation = obj.metadata.generation;
    let status = stopped_status::stopped(previous, generation, &[ready], &conditions::now());
    write(ctx, obj, &status).await?;
    Ok(Action::requeue(ctx.shared.retry_later(obj)))
}

/// The status phase of a pass that gathered: what it found, the replicas' consistency (a
/// divergence told once), and what the later phases decided.
pub(super) async fn write_status(
    ctx: &Context,
    obj: &NatsSystemBalancer,
    g: &Gathered,
    previous: &NatsSystemBalancerStatus,
    w: Written,
) -> Result<Action, Error> {
    let diverged = divergence::carried(&previous.diverged, &g.diverged);
    let consistent = divergence::consistency(&diverged);
    replica_divergence::tell(ctx, obj, &diverged).await;
    let generation = obj.metadata.generation;
    let holding = w.holding.as_ref();
    let status = NatsSystemBalancerStatus {
        observed_generation: generation,
        conditions: merged(previous, generation, &w.ready, holding, Some(&consistent)),
        capabilities: Some(balance::capabilities(
            &g.accounts,
            &g.reached,
            &g.reached_consumers,
        )),
        servers: balance::loads(&g.view, &g.cluster),
        skew: Some(balance::judged_skew(&g.view, &g.cluster)),
        last_move: w.last_move,
        pending: w.pending,
        diverged,
    };
    write(ctx, obj, &status).await?;
    Ok(Action::requeue(w.after))
}

fn merged(
    previous: &NatsSystemBalancerStatus,
    generation: Option<i64>,
    ready: &Decided,
    holding: Option<&Decided>,
    consistent: Option<&Decided>,
) -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    let set: Vec<Decided> = std::iter::once(ready.clone())
        .chain(holding.cloned())
        .chain(consistent.cloned())
        .collect();
    conditions::merge(
        &previous.conditions,
        generation,
        &set,
        &[condition::HOLDING],
        &conditions::now(),
    )
}

/// The help of the leader and the replica skew gauges.
const SKEW_HELP: [&str; 2] = [
    "The difference between the most and fewest group leaders a server holds, per pool.",
    "The difference between the most and fewest group copies a server holds, per pool.",
];

/// The write-status phase: status applied, the skew and pending gauges set.
async fn write(
    ctx: &Context,
    obj: &NatsSystemBalancer,
    status: &NatsSystemBalancerStatus,
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let m = &ctx.shared.metrics;
    for (gauge, help, n) in status.skew.iter().flat_map(|k| {
        [
            (metric::BALANCER_LEADER_SKEW, SKEW_HELP[0], k.leaders),
            (metric::BALANCER_REPLICA_SKEW, SKEW_HELP[1], k.replicas),
        ]
    }) {
        let pool = [
            ("namespace", ns.as_str()),
            ("name", &name),
            ("pool", "system"),
        ];
        m.set_gauge(gauge, help, &pool, f64::from(n));
    }
    for (kind, label) in [
        (MoveKind::Leader, "leader"),
        (MoveKind::Placement, "placement"),
    ] {
        m.set_gauge(
            metric::BALANCER_PENDING_MOVES,
            "Moves a balancer requested and has not seen done, per kind of move.",
            &[("namespace", &ns), ("name", &name), ("move_kind", label)],
            status.pending.iter().filter(|p| p.kind == kind).count() as f64,
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

/// The gauges of a deleted system balancer removed.
pub(super) fn forget_gauges(ctx: &Context, obj: &NatsSystemBalancer, kind: &str) {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let m = &ctx.shared.metrics;
    for gauge in [metric::BALANCER_LEADER_SKEW, metric::BALANCER_REPLICA_SKEW] {
        m.remove_gauge(
            gauge,
            &[("namespace", &ns), ("name", &name), ("pool", "system")],
        );
    }
    for label in ["leader", "placement"] {
        m.remove_gauge(
            metric::BALANCER_PENDING_MOVES,
            &[("namespace", &ns), ("name", &name), ("move_kind", label)],
        );
    }
    m.forget(kind, &ns, &name);
}
