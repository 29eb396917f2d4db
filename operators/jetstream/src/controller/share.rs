//! A pass takes its NatsConnection's share of its Controller's request slots
//! ([`super::connection_shares`]) through the context: [`take_for`] before it dials,
//! [`wake_feed`] to be woken when a slot frees, [`consumer_connection`] to know which
//! connection a consumer's passes count against.

use std::time::Duration;

use super::connection_shares::Taken;

/// A slot for a pass of `obj` over its connection `conn` (relative to `obj`'s namespace) in
/// `ctx`'s shares, or the longest wait before it looks again (the deferral counted).
pub(crate) fn take_for<K: kube::Resource<DynamicType = ()>>(
    ctx: &super::context::Context,
    obj: &K,
    conn: &nats_api::common::ObjectReference,
) -> Result<Taken, Duration> {
    use kube::ResourceExt;
    let kind = K::kind(&());
    let ns = obj.namespace().unwrap_or_default();
    let conn_ns = conn.namespace.as_deref().unwrap_or(&ns);
    let connection = format!("{kind}|{conn_ns}/{}", conn.name);
    ctx.shares
        .take(&connection, (&kind, &ns, &obj.name_any()))
        .inspect_err(|_| {
            ctx.shared.metrics.add_counter(
                nats_api::jetstream::metric::CONNECTION_SHARE_DEFERRED,
                "Passes put off because their NatsConnection held its share of the request slots.",
                &[("kind", &kind)],
                1.0,
            );
        })
}

/// Wakes the objects of `K` waiting on a connection through the returned stream, which the
/// Controller of `K` takes with `reconcile_on`.
pub(crate) fn wake_feed<K>(
    ctx: &super::context::Context,
) -> impl futures::Stream<Item = kube::runtime::reflector::ObjectRef<K>> + Send + 'static
where
    K: kube::Resource<DynamicType = ()> + 'static,
{
    let (tx, rx) = futures::channel::mpsc::unbounded();
    ctx.shares.on_wake(&K::kind(&()), move |ns, name| {
        let _ = tx.unbounded_send(kube::runtime::reflector::ObjectRef::<K>::new(name).within(ns));
    });
    rx
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
