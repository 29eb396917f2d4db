//! What every pass shares: its Controller (the kind's watch from the index, woken by the
//! changes of the kinds it reads, [`Wake`]), run by the kit's run loop after the wait for the
//! index, its own object read fresh while its last write is not back in the watch, and the
//! backoff of a pass that was refused or waits.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use controller_kit::reconcile::Read;
use futures::{Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::broadcast::error::RecvError;

use super::Context;
use super::change::Change;
use super::error::Error;
use super::index::{Feed, Kind, Watched};
use super::wakes::Related;

/// Batches bursts of watch events; bounds the passes run at once (`--concurrency`).
fn config(ctx: &Context) -> Config {
    ctx.shared
        .scope
        .config()
        .debounce(Duration::from_millis(100))
}

/// What wakes the objects of a controller's kind `K`.
pub(crate) enum Wake<K: Watched> {
    /// Every `K`, on each change of the kind (a kind with few objects).
    All(Kind),
    /// The `K` the map names for each changed object of the kind; every `K` after a relist or a
    /// change the wake missed ([`super::wakes`]).
    Related(Kind, Related<K>),
}

/// The controller of an indexed kind `K`: triggered by the index's watch of `K` (less the echoes
/// of its own passes' writes, [`controller_kit::echoes`]), and woken by
/// changes of the kinds it reads, as `wakes` says (the auth kinds depend on each other by
/// reference in both directions, and each pass is cheap and idempotent).
pub(crate) fn indexed<K: Watched>(
    ctx: &Arc<Context>,
    feed: Feed<K>,
    wakes: &[Wake<K>],
) -> Controller<K> {
    let store = feed.store();
    let echoes = ctx.clone();
    let trigger = feed
        .trigger(ctx.shared.client.clone(), &ctx.shared.scope.namespaces)
        .filter(move |event| {
            let echo = matches!(event, Ok(o) if echoes.shared.echoes.echo(o));
            futures::future::ready(!echo)
        });
    let c = Controller::for_stream(trigger, store.clone()).with_config(config(ctx));
    wakes.iter().fold(c, |c, wake| match wake {
        Wake::All(kind) => c.reconcile_all_on(ctx.index.wakes(*kind)),
        Wake::Related(kind, map) => {
            c.reconcile_on(related(ctx.clone(), store.clone(), *kind, *map))
        }
    })
}

/// The objects of `K` that `map` names for each change of `kind`; all of `store` after a relist
/// or a lag.
fn related<K: Watched>(
    ctx: Arc<Context>,
    store: Store<K>,
    kind: Kind,
    map: Related<K>,
) -> impl Stream<Item = ObjectRef<K>> + Send + 'static {
    futures::stream::unfold(ctx.index.changes(kind), move |rx| {
        let (ctx, store) = (ctx.clone(), store.clone());
        async move {
            let mut rx = rx?;
            let refs = match rx.recv().await {
                Ok(Change::Touched(t)) => map(&ctx.index, &t),
                Ok(Change::Relisted) | Err(RecvError::Lagged(_)) => store
                    .state()
                    .iter()
                    .map(|o| ObjectRef::from_obj(&**o))
                    .collect(),
                Err(RecvError::Closed) => return None,
            };
            Some((futures::stream::iter(refs), Some(rx)))
        }
    })
    .flatten()
}

/// The controller of a kind the index does not hold (the trust objects): its own watch, woken
/// on every change of the kinds in `wakes`.
pub(crate) fn watched<K: Watched>(ctx: &Context, wakes: &[Kind]) -> Controller<K> {
    let c = controller_kit::watch::controller::<K>(
        &ctx.shared.client,
        &ctx.shared.scope,
        watcher::Config::default(),
    )
    .with_config(config(ctx));
    wakes
        .iter()
        .fold(c, |c, kind| c.reconcile_all_on(ctx.index.wakes(*kind)))
}

/// Runs a Controller through the kit's run loop ([`controller_kit::reconcile::run`]: span, count,
/// relist redrive, error policy), each pass of its object read fresh while a write of this
/// controller's to it is not back in the watch ([`Read::Current`]): a pass over a status older
/// than the last one written would sign again what was just signed. Once every write is back
/// the watch's copy holds it, and a pass reads nothing (a GET per pass was a quarter of the
/// requests 1,000 NatsUsers cost). After that read, a pass waits for the index and its object's lock
/// (held by the revocation lane's pass, [`super::lane`]) before it runs: no pass
/// reads a store before its first list (the index's own signal, see [`super::index`]; the kit's
/// run loop waits on no store, so the Controller's runner stays the only waiter of its store).
pub(crate) async fn drive<K, F, Fut>(controller: Controller<K>, ctx: Arc<Context>, pass: F)
where
    K: Watched + Resource<Scope = NamespaceResourceScope>,
    F: Fn(Arc<K>, Arc<Context>) -> Fut + Send + Sync + Copy + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let after_index = move |obj: Arc<K>, ctx: Arc<Context>| async move {
        ctx.index.ready().await?;
        // The revocation lane ([`super::lane`]) may be passing over the same object: one at a
        // time, and a copy read before the lane's pass ended is read again.
        let (_held, waited) = ctx.locks.lock(super::locks::key(&*obj)).await;
        if waited {
            return Ok(Action::requeue(Duration::ZERO));
        }
        pass(obj, ctx).await
    };
    controller_kit::reconcile::run(controller, ctx, Read::Current, after_index).await;
}

/// The wait before looking again at an object that was refused or waits on another: doubles
/// per consecutive such pass ([`controller_kit::context::Shared::retry_later`]), capped by the
/// resync.
pub(crate) fn retry_later<K: Resource<DynamicType = ()>>(ctx: &Context, obj: &K) -> Duration {
    ctx.shared.retry_later(obj).min(ctx.settings.resync)
}

/// Resets [`retry_later`] after a pass that signed.
pub(crate) fn settled<K: Resource<DynamicType = ()>>(ctx: &Context, obj: &K) {
    ctx.shared.settled(obj);
}
