//! NatsConnection: dial it through the pool and report Ready (Connected, ConnectFailed,
//! SecretNotFound, InvalidSecret). Resources naming it share the pooled connection.

use std::sync::Arc;

use controller_kit::conditions::{self, Desired};
use futures::FutureExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use nats_api::jetstream::FIELD_MANAGER;
use nats_api::nats::{NatsConnection, NatsConnectionStatus, condition};

use super::{Context, Error, drive, instrumented, kube_err, watch_config};
use crate::connection::Ready;
use crate::pool::Resolved;

async fn reconcile(obj: Arc<NatsConnection>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let ready = match ctx
        .pool
        .resolve(&ctx.client, &ns, &name)
        .await
        .map_err(kube_err(&*obj))?
    {
        Resolved::Connected(_) => Ready::Connected,
        // Deleted between the watch event and now: nothing to report on.
        Resolved::Missing => return Ok(Action::await_change()),
        Resolved::NotReady(r) => r,
    };
    let message = match &ready {
        Ready::Connected => format!("connected to {}", obj.spec.servers.join(", ")),
        other => other.message(),
    };
    let mut conds = obj
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions::upsert(
        &mut conds,
        &Desired::new(condition::READY, ready.status(), ready.reason(), message),
        obj.metadata.generation,
        &conditions::now(),
    );
    let status = NatsConnectionStatus {
        observed_generation: obj.metadata.generation,
        conditions: conds,
    };
    let api: Api<NatsConnection> = Api::namespaced(ctx.client.clone(), &ns);
    controller_kit::status::apply(&api, &name, FIELD_MANAGER, &status)
        .await
        .map_err(kube_err(&*obj))?;
    ctx.metrics
        .set_conditions("NatsConnection", &ns, &name, &status.conditions);
    let wait = if ready.status() {
        super::settled(&ctx, &*obj);
        ctx.settings.resync
    } else {
        // Not an error of the controller: look again soon, backing off while it keeps failing.
        super::retry_later(&ctx, &*obj)
    };
    ctx.schedule(&*obj, wait);
    Ok(Action::requeue(wait))
}

/// The NatsConnection controller.
pub(super) async fn controller(ctx: Arc<Context>) {
    let api: Api<NatsConnection> = Api::all(ctx.client.clone());
    drive(Controller::new(api, watch_config()), ctx, |obj, ctx| {
        instrumented(obj, ctx, reconcile).boxed()
    })
    .await;
}
