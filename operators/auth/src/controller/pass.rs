//! What every pass shares: its Controller (the kind's watch from the index, woken by every
//! change of the kinds it reads), run by the kit's run loop after the wait for the index, its
//! own object read fresh, and the backoff of a pass that was refused or waits.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use controller_kit::reconcile::Read;
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::watcher;

use super::Context;
use super::error::Error;
use super::index::{Feed, Kind, Watched};

/// Batches bursts of watch events.
fn config() -> Config {
    Config::default().debounce(Duration::from_millis(100))
}

/// The controller of an indexed kind `K`: triggered by the index's watch of `K`, and every `K`
/// reconciled on each change of a kind in `wakes` (the auth kinds depend on each other by
/// reference in both directions, and each pass is cheap and idempotent).
pub(crate) fn indexed<K: Watched>(ctx: &Context, feed: Feed<K>, wakes: &[Kind]) -> Controller<K> {
    let store = feed.store();
    let c = Controller::for_stream(feed.trigger(ctx.shared.client.clone()), store)
        .with_config(config());
    woken(c, ctx, wakes)
}

/// The controller of a kind the index does not hold (the trust objects): its own watch, woken
/// like [`indexed`].
pub(crate) fn watched<K: Watched>(ctx: &Context, wakes: &[Kind]) -> Controller<K> {
    let c = Controller::new(
        Api::<K>::all(ctx.shared.client.clone()),
        watcher::Config::default(),
    )
    .with_config(config());
    woken(c, ctx, wakes)
}

fn woken<K: Watched>(c: Controller<K>, ctx: &Context, wakes: &[Kind]) -> Controller<K> {
    wakes
        .iter()
        .fold(c, |c, kind| c.reconcile_all_on(ctx.index.wakes(*kind)))
}

/// Runs a Controller through the kit's run loop ([`controller_kit::reconcile::run`]: span, count,
/// relist redrive, error policy), each pass of its object read fresh: the watch may not hold
/// this controller's last status write yet, and a pass over a stale status would sign again
/// what was just signed. After that read, a pass waits for the index before it runs: no pass
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
        pass(obj, ctx).await
    };
    controller_kit::reconcile::run(controller, ctx, Read::Fresh, after_index).await;
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
