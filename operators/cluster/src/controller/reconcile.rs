//! One reconcile of a NatsCluster, as the kit's run loop hands it over (read fresh,
//! [`controller_kit::reconcile::Read::Fresh`]: the watch cache may still hold the object from
//! before the last pass's status write, and a pass over that stale status would drop what the
//! last one recorded, a replace-server read into status.removals and already cleared). Under the
//! deletion guard's finalizer, through the kit's finalizer path: one pass ([`super::pass`]) for
//! a live NatsCluster, the guard ([`super::deletion::guard`]) for one being deleted. Once nothing
//! holds its deletion, its series go.

use std::sync::Arc;

use controller_kit::finalizer;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::cluster::NatsCluster;

use super::context::Context;
use super::deletion::{self, FINALIZER, wants_finalizer};
use super::error::Error;
use super::gauges;
use super::pass::pass;
use crate::server_lifecycle::ServerLifecycle;

/// Reconciles `cluster`: one pass, or the deletion guard.
pub async fn reconcile<L: ServerLifecycle>(
    cluster: Arc<NatsCluster>,
    ctx: Arc<Context<L>>,
) -> Result<Action, Error> {
    let api: Api<NatsCluster> = Api::namespaced(
        ctx.shared.client.clone(),
        &cluster.namespace().unwrap_or_default(),
    );
    let deleting = cluster.meta().deletion_timestamp.is_some();
    let (live, gone) = (ctx.clone(), ctx.clone());
    let action = finalizer::reconcile(
        &api,
        FINALIZER,
        cluster.clone(),
        wants_finalizer(&cluster),
        move |cluster| async move { pass(&live, &cluster).await.map(Action::requeue) },
        move |cluster| async move { deletion::guard(&gone, &cluster).await },
    )
    .await?;
    // A deletion nothing holds any more (the guard let it go, or the finalizer was not there)
    // waits for no change: the owner references take the objects with it, and its series go.
    if deleting && action == Action::await_change() {
        forget(&ctx, &cluster);
    }
    Ok(action)
}

/// Drops a deleted NatsCluster's condition and rollout series.
fn forget<L: ServerLifecycle>(ctx: &Context<L>, cluster: &NatsCluster) {
    let (ns, name) = (cluster.namespace().unwrap_or_default(), cluster.name_any());
    ctx.shared.metrics.forget("NatsCluster", &ns, &name);
    gauges::forget_rollout(&ctx.shared.metrics, &ns, &name);
}
