//! The watch a controller keeps of its own kind, holding no more than a pass reads, in the
//! namespaces it works in ([`crate::scope`]).
//!
//! kube's `Controller::new` keeps every object as the apiserver sends it, `managedFields`
//! included: one entry per field manager, each a tree of every field it set, often larger than
//! the object itself. No pass reads them (a server-side apply sends its own fields, the server
//! keeps the record), so [`controller`] drops them before the store keeps an object.

use std::sync::Arc;

use kube::runtime::controller::Controller;
use kube::runtime::{WatchStreamExt, reflector, watcher};

use crate::context::HasShared;
use crate::scope::Scope;
pub use crate::watched::Watched;

/// A Controller of `K` in the namespaces of `scope`, bounded by its concurrency, whose store
/// holds each object without its `managedFields`.
pub fn controller<K>(client: &kube::Client, scope: &Scope, config: watcher::Config) -> Controller<K>
where
    K: Watched,
{
    let (reader, applied) = lean_applied(client, scope, config);
    Controller::for_stream(applied, reader).with_config(scope.config())
}

/// [`controller`], less the watch events that are the echoes of the writes of `passes` (the
/// context its passes run with, [`crate::echoes`]): a pass that records what it wrote with
/// [`crate::echoes::Echoes::worked_from`] is not woken again by it. The store still takes every
/// event; a change by anyone else is a version no pass recorded, and wakes a pass.
pub fn controller_less_echoes<K, C>(
    client: &kube::Client,
    scope: &Scope,
    config: watcher::Config,
    passes: Arc<C>,
) -> Controller<K>
where
    K: Watched,
    C: HasShared,
{
    use futures::StreamExt;
    let (reader, applied) = lean_applied(client, scope, config);
    let trigger = applied.filter(move |event| {
        let echo = matches!(event, Ok(o) if passes.shared().echoes.echo(o));
        futures::future::ready(!echo)
    });
    Controller::for_stream(trigger, reader).with_config(scope.config())
}

/// The store of `K` in the namespaces of `scope`, each object kept without its `managedFields`,
/// and the stream of objects the watch applied to it.
fn lean_applied<K>(
    client: &kube::Client,
    scope: &Scope,
    config: watcher::Config,
) -> (
    reflector::Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + use<K>,
)
where
    K: Watched,
{
    let (reader, writer) = reflector::store();
    let lean = scope
        .namespaces
        .watch(client, config, reader.clone(), |o: &mut K| {
            o.meta_mut().managed_fields = None;
        });
    (reader, reflector(writer, lean).applied_objects())
}

/// A store of every `K` in the namespaces of `scope`, and the future that keeps it (run it for
/// the life of the controller reading it; a failing watch is retried, backed off).
pub fn store<K>(
    client: &kube::Client,
    scope: &Scope,
    config: watcher::Config,
) -> (
    reflector::Store<K>,
    impl std::future::Future<Output = ()> + Send + 'static,
)
where
    K: Watched,
{
    use futures::StreamExt;
    let (reader, writer) = reflector::store();
    let events = scope
        .namespaces
        .watch(client, config, reader.clone(), |o: &mut K| {
            o.meta_mut().managed_fields = None;
        });
    let kept = reflector(writer, events.default_backoff()).for_each(|_| async {});
    (reader, kept)
}
