//! A pass takes its NatsConnection's share of its Controller's request slots
//! ([`super::connection_shares`]) through the context: [`turn`] waits for it and hands back
//! the copy of the object to work from, [`in_line`] lets a Controller start every due pass
//! (the shares bound them, not the Controller), [`run_in_line`] runs the Controller of a kind
//! whose passes wait so (NatsConsumer and the stream-backed kinds), [`consumer_connection`] says
//! which connection a consumer's passes count against.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use controller_kit::reconcile::Read;
use controller_kit::watched::Watched;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};

use super::connection_shares::Taken;
use super::context::{Context, controller_of, due_now, watch_config};
use super::error::Error;

/// `controller`, starting every due pass at once: each waits for its turn in [`turn`], in its
/// connection's line and then for one of the Controller's `--concurrency` slots, holding
/// nothing meanwhile. A Controller bounded by its own concurrency as well would requeue the
/// passes of a connection at its share (a second pass each) or hold its slots with them.
pub(crate) fn in_line<K: controller_kit::watched::Watched>(
    controller: Controller<K>,
) -> Controller<K> {
    controller.with_config(kube::runtime::controller::Config::default().concurrency(0))
}

/// Runs the Controller of `K`, whose passes wait their turn in their connection's line, until
/// it ends: `K`'s watch, and a watch of `W` (what `K`'s objects wait for) whose every change
/// passes at once over the objects `waiting` names (in the Controller's store), their due time
/// forgotten. `with_store` gets that store before anything runs; `reconcile` is each pass, given
/// the store.
pub(crate) async fn run_in_line<K, W, F, R, Fut>(
    ctx: Arc<Context>,
    waiting: F,
    with_store: impl FnOnce(&Context, &Store<K>),
    reconcile: R,
) where
    K: Watched,
    W: Watched,
    F: Fn(&Store<K>, &W) -> Vec<Arc<K>> + Send + Sync + 'static,
    R: Fn(Arc<K>, Arc<Context>, Store<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let client = ctx.shared.client.clone();
    // Less the echoes of its passes' own finalizer and status writes: a second pass per
    // resource created would find nothing to do.
    let controller = controller_of::<K>(&ctx, ctx.clone());
    let store = controller.store();
    let own = store.clone();
    with_store(&ctx, &store);
    let c = ctx.clone();
    let controller = controller.watches_stream(
        ctx.shared
            .scope
            .namespaces
            .touched::<W>(&client, watch_config()),
        move |w| {
            waiting(&store, &w)
                .into_iter()
                .map(|o| due_now(&c, &*o))
                .collect::<Vec<_>>()
        },
    );
    // Every due pass starts, and waits its turn in its connection's line.
    let controller = in_line(controller);
    controller_kit::reconcile::run(controller, ctx, Read::Cached, move |o, c| {
        reconcile(o, c, own.clone())
    })
    .await;
}

/// A pass's turn for `obj` over its connection `conn` (relative to `obj`'s namespace): a slot
/// of `ctx`'s shares (a wait in line counted) and the copy of `obj` to work from. A pass that
/// waited works from the store's copy as it is now (`store`: its Controller's), not the one it
/// was handed. Instead of a turn, what the pass returns: nothing to do for an object gone
/// meanwhile or a process stopping, and a pass again at once for a replica that no longer
/// leads (its gate holds it).
pub(crate) async fn turn<K>(
    ctx: &super::context::Context,
    obj: Arc<K>,
    conn: &nats_api::common::ObjectReference,
    store: &Store<K>,
) -> Result<(Taken, Arc<K>), Action>
where
    K: kube::Resource<DynamicType = ()> + Clone,
{
    use kube::ResourceExt;
    let kind = K::kind(&()).to_string();
    let ns = obj.namespace().unwrap_or_default();
    let conn_ns = conn.namespace.as_deref().unwrap_or(&ns);
    let connection = format!("{kind}|{conn_ns}/{}", conn.name);
    let process = controller_kit::process_state::Process::current();
    let mut waited = false;
    let taken = tokio::select! {
        taken = ctx.shares.take(&connection, &kind, || {
            waited = true;
            ctx.shared.metrics.add_counter(
                nats_api::jetstream::metric::CONNECTION_SHARE_DEFERRED,
                "Passes put off because their NatsConnection held its share of the request slots.",
                &[("kind", &kind)],
                1.0,
            );
        }) => taken,
        () = process.stopping() => return Err(Action::await_change()),
    };
    let Ok(taken) = taken else {
        return Err(Action::requeue(Duration::from_secs(1)));
    };
    if !waited {
        return Ok((taken, obj));
    }
    if !process.leads() {
        return Err(Action::requeue(Duration::ZERO));
    }
    match store.get(&ObjectRef::from_obj(&*obj)) {
        Some(now) => Ok((taken, now)),
        None => Err(Action::await_change()),
    }
}

/// The connection a consumer's passes count against: its own `connectionRef`; by `streamRef`
/// the stream's, read from the index (or the stream reference itself until the index has it,
/// which bounds the stream's consumers all the same).
pub(crate) fn consumer_connection(
    ctx: &super::context::Context,
    obj: &nats_api::jetstream::NatsConsumer,
) -> nats_api::common::ObjectReference {
    use kube::ResourceExt;
    let ns = obj.namespace().unwrap_or_default();
    if let Some(c) = &obj.spec.connection_ref {
        return c.clone();
    }
    let Some(sr) = &obj.spec.stream_ref else {
        return nats_api::common::ObjectReference {
            name: String::new(),
            namespace: Some(ns),
        };
    };
    let stream_ns = sr.namespace.clone().unwrap_or_else(|| ns.clone());
    match ctx.index.stream(&stream_ns, &sr.name) {
        Some(s) => nats_api::common::ObjectReference {
            name: s.spec.connection_ref.name.clone(),
            namespace: Some(s.spec.connection_ref.namespace.clone().unwrap_or(stream_ns)),
        },
        None => nats_api::common::ObjectReference {
            name: format!("stream {}", sr.name),
            namespace: Some(stream_ns),
        },
    }
}
