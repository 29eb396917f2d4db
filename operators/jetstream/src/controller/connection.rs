//! NatsConnection: dial it through the pool and report Ready (Connected, ConnectFailed,
//! SecretNotFound, InvalidSecret, Disconnected). Resources naming it share the pooled connection.
//! Being deleted, it is first kept while a Delete-policy resource still needs it ([`in_use`]).
//!
//! Ready follows the servers: the pool tells each connection lost or regained
//! ([`crate::pool::Pool::changes`]), which passes the NatsConnection at once, and a Disconnected
//! one is looked at again every [`DISCONNECTED_RECHECK`] at the latest.

use std::sync::Arc;

use futures::StreamExt;

use controller_kit::conditions::{self, Decided};
use controller_kit::reconcile::Read;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use nats_api::nats::{NatsConnection, NatsConnectionSpec, NatsConnectionStatus, condition};

use super::context::{Context, controller_of, due_now, watch_config};
use super::error::{Error, kube_err};
use super::in_use;
use crate::dialing::Ready;
use crate::pool::Resolved;

/// The longest wait between two passes of a Disconnected connection.
pub const DISCONNECTED_RECHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// One pass: the connection dialed (or shared) through the pool, then Ready written.
async fn reconcile(obj: Arc<NatsConnection>, ctx: Arc<Context>) -> Result<Action, Error> {
    // Being deleted: kept while a Delete-policy resource still needs it (`in_use`).
    if let Some(wait) = in_use::release(&ctx, &obj).await? {
        return Ok(Action::requeue(wait));
    }
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let ready = match ctx
        .pool
        .resolve(&ctx.shared.client, &ns, &name)
        .await
        .map_err(kube_err(&*obj))?
    {
        Resolved::Connected(_) => Ready::Connected,
        // Deleted between the watch event and now: nothing to report on.
        Resolved::Missing => return Ok(Action::await_change()),
        Resolved::NotReady(r) => r,
    };
    write_ready(&ctx, &obj, &ready).await?;
    let wait = if ready.status() {
        ctx.shared.settled(&*obj);
        ctx.settings.resync
    } else if matches!(ready, Ready::Disconnected { .. }) {
        ctx.shared.retry_later(&*obj).min(DISCONNECTED_RECHECK)
    } else {
        // Not an error of the controller: look again soon, backing off while it keeps failing.
        ctx.shared.retry_later(&*obj)
    };
    ctx.shared.due.schedule(&*obj, wait);
    Ok(Action::requeue(wait))
}

/// Writes Ready as `ready` says (and the condition gauge).
async fn write_ready(ctx: &Context, obj: &NatsConnection, ready: &Ready) -> Result<(), Error> {
    let message = match ready {
        Ready::Connected => format!("connected to {}", obj.spec.servers.join(", ")),
        other => other.message(),
    };
    let previous = obj
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let decided = Decided::new(condition::READY, ready.status(), ready.reason(), message);
    let status = NatsConnectionStatus {
        observed_generation: obj.metadata.generation,
        conditions: conditions::merge(
            &previous,
            obj.metadata.generation,
            &[decided],
            &[],
            &conditions::now(),
        ),
    };
    let written = ctx
        .shared
        .write_status(obj, &status)
        .await
        .map_err(kube_err(obj))?;
    ctx.shared.echoes.worked_from(&written);
    Ok(())
}

/// Whether the connection reads the Secret `name` (creds or CA).
fn reads_secret(spec: &NatsConnectionSpec, name: &str) -> bool {
    spec.credentials
        .as_ref()
        .is_some_and(|c| c.secret_key_ref.name == name)
        || spec
            .tls
            .as_ref()
            .and_then(|t| t.ca.as_ref())
            .is_some_and(|c| c.secret_key_ref.name == name)
}

/// The NatsConnection controller.
pub(super) async fn controller(ctx: Arc<Context>) {
    let client = ctx.shared.client.clone();
    // Less the echoes of its passes' own status writes.
    let controller = controller_of::<NatsConnection>(&ctx, ctx.clone());
    let store = controller.store();
    // What the resources' passes read their connection from, instead of a GET each.
    let _ = ctx.connections.set(store.clone());
    // A connection lost or regained passes its NatsConnection at once.
    let changes = {
        let store = store.clone();
        let c = ctx.clone();
        ctx.pool.changes().filter_map(move |(ns, name)| {
            let r = ObjectRef::<NatsConnection>::new(&name).within(&ns);
            if let Some(conn) = store.get(&r) {
                c.shared.due.forget(&*conn);
            }
            futures::future::ready(Some(r))
        })
    };
    let controller = controller.reconcile_on(changes);
    let c = ctx.clone();
    // A Secret a connection reads changing (rotated creds, a CA appearing) re-dials it at once.
    let controller = controller.watches_stream(
        // Metadata alone: no Secret's data passes through this watch.
        ctx.shared
            .scope
            .namespaces
            .touched::<kube::core::PartialObjectMeta<Secret>>(&client, watch_config()),
        move |secret| {
            let ns = secret.namespace().unwrap_or_default();
            let name = secret.name_any();
            store
                .state()
                .into_iter()
                .filter(|conn| {
                    conn.namespace().as_deref() == Some(ns.as_str())
                        && reads_secret(&conn.spec, &name)
                })
                .map(|conn| due_now(&c, &*conn))
                .collect::<Vec<_>>()
        },
    );
    controller_kit::reconcile::run(controller, ctx, Read::Cached, reconcile).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case::creds(json!({"servers": ["nats://x"], "credentials": {"secretKeyRef": {"name": "s"}}}), true)]
    #[case::ca(json!({"servers": ["nats://x"], "tls": {"ca": {"secretKeyRef": {"name": "s"}}}}), true)]
    #[case::another_secret(json!({"servers": ["nats://x"], "credentials": {"secretKeyRef": {"name": "t"}}}), false)]
    #[case::no_secrets(json!({"servers": ["nats://x"]}), false)]
    fn a_connection_is_woken_by_the_secrets_it_reads(
        #[case] spec: serde_json::Value,
        #[case] want: bool,
    ) {
        let spec: NatsConnectionSpec = serde_json::from_value(spec).expect("a spec");
        assert_eq!(reads_secret(&spec, "s"), want);
    }
}
