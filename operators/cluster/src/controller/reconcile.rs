//! One reconcile of a NatsCluster: read it fresh, then either its deletion (the deletion guard,
//! [`super::deletion`]) or the finalizer kept and one pass ([`super::pass`]); and the error
//! policy: a failed reconcile is counted by its error's label and retried after a backoff.

use std::sync::Arc;
use std::time::Instant;

use controller_kit::error::ReconcileError;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::cluster::NatsCluster;

use super::context::Context;
use super::error::Error;
use super::{deletion, gauges, pass};
use crate::lifecycle::ServerLifecycle;
use controller_kit::reconcile::describe;

/// Reconciles `cached` (its watch copy), read fresh.
pub async fn reconcile<L: ServerLifecycle>(
    cached: Arc<NatsCluster>,
    ctx: Arc<Context<L>>,
) -> Result<Action, Error> {
    use tracing::Instrument;
    // Each pass reads its object fresh: the watch cache may still hold the object from before
    // the last pass's status write, and a pass over that stale status would drop what the
    // last one recorded (a replace-server read into status.removals and already cleared).
    let api: kube::Api<NatsCluster> = kube::Api::namespaced(
        ctx.shared.client.clone(),
        &cached.namespace().unwrap_or_default(),
    );
    let fresh = api
        .get_opt(&cached.name_any())
        .await
        .map_err(Error::kube(describe(&*cached)))?;
    let Some(cluster) = fresh.map(Arc::new) else {
        return Ok(Action::await_change());
    };
    let span = controller_kit::trace::reconcile_span(
        "NatsCluster",
        &cluster.namespace().unwrap_or_default(),
        &cluster.name_any(),
    );
    let started = Instant::now();
    let result = async {
        if cluster.meta().deletion_timestamp.is_some() {
            return deleted(&ctx, &cluster).await;
        }
        deletion::keep_finalizer(&ctx, &cluster).await?;
        let wait = pass::pass(&ctx, &cluster).await?;
        Ok(Action::requeue(wait))
    }
    .instrument(span)
    .await;
    ctx.shared
        .metrics
        .reconciled("NatsCluster", started.elapsed());
    if result.is_ok() {
        ctx.shared.backoff.succeeded(&describe(&*cluster));
    }
    result
}

/// A NatsCluster being deleted: the deletion guard first; then the owner references take the
/// objects with it, and its series go.
async fn deleted<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
) -> Result<Action, Error> {
    if let Some(wait) = deletion::on_delete(ctx, cluster).await? {
        return Ok(Action::requeue(wait));
    }
    let (ns, name) = (cluster.namespace().unwrap_or_default(), cluster.name_any());
    ctx.shared.metrics.forget("NatsCluster", &ns, &name);
    gauges::forget_rollout(&ctx.shared.metrics, &ns, &name);
    Ok(Action::await_change())
}

/// A failed reconcile: counted by its error's label, logged, retried after a backoff that grows
/// per consecutive failure.
pub fn error_policy<L: ServerLifecycle>(
    cluster: Arc<NatsCluster>,
    err: &Error,
    ctx: Arc<Context<L>>,
) -> Action {
    let key = describe(&*cluster);
    ctx.shared.metrics.failed("NatsCluster", err.metric_label());
    let wait = ctx.shared.backoff.failed(&key);
    tracing::warn!(object = %key, error = %err, ?wait, "reconcile failed");
    Action::requeue(wait)
}
