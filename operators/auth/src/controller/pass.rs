//! What every pass shares: its Controller (the kind's watch from the index, woken by every
//! change of the kinds it reads), the wait for the index, the fresh read of its own object, its
//! span and metrics, the error policy, and the backoff of a pass that was refused or waits.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use super::Context;
use super::error::{Error, describe, kube_err};
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
    let c = Controller::for_stream(feed.trigger(ctx.client.clone()), store).with_config(config());
    woken(c, ctx, wakes)
}

/// The controller of a kind the index does not hold (the trust objects): its own watch, woken
/// like [`indexed`].
pub(crate) fn watched<K: Watched>(ctx: &Context, wakes: &[Kind]) -> Controller<K> {
    let c = Controller::new(
        Api::<K>::all(ctx.client.clone()),
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

/// Drives a Controller's stream, each pass run by [`instrumented`], logging each result.
pub(crate) async fn drive<K, F, Fut>(controller: Controller<K>, ctx: Arc<Context>, pass: F)
where
    K: Watched + Resource<Scope = NamespaceResourceScope>,
    F: Fn(Arc<K>, Arc<Context>) -> Fut + Send + Sync + Copy + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let kind = K::kind(&()).to_string();
    let (redrive, again) = controller_kit::relist::redrive(&kind);
    controller
        .reconcile_all_on(again)
        .run(
            move |obj, ctx| Box::pin(instrumented(obj, ctx, pass)),
            error_policy::<K>,
            ctx,
        )
        .for_each(|r| {
            redrive.note(&r);
            controller_kit::trace::run_result(&kind, &r);
            futures::future::ready(())
        })
        .await;
}

/// Runs one reconcile inside its span, counting it and resetting the backoff on success. It
/// waits for the index first (no pass reads a store before its first list), and reads the
/// object again: the watch may not hold this controller's last status write yet, and a pass
/// over a stale status would sign again what was just signed.
async fn instrumented<K, F, Fut>(obj: Arc<K>, ctx: Arc<Context>, f: F) -> Result<Action, Error>
where
    K: Watched + Resource<Scope = NamespaceResourceScope>,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<Action, Error>>,
{
    use tracing::Instrument;
    ctx.index.ready().await?;
    let kind = K::kind(&()).to_string();
    let key = describe(&*obj);
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let obj = match api
        .get_opt(&obj.name_any())
        .await
        .map_err(kube_err(key.clone()))?
    {
        Some(fresh) => Arc::new(fresh),
        None => return Ok(Action::await_change()),
    };
    let span = controller_kit::trace::reconcile_span(
        &kind,
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
    );
    let started = Instant::now();
    let result = f(obj.clone(), ctx.clone()).instrument(span).await;
    ctx.metrics.reconciled(&kind, started.elapsed());
    if result.is_ok() {
        ctx.backoff.succeeded(&key);
    }
    result
}

/// error_policy: count the failure and retry after a backoff that doubles per failure.
fn error_policy<K: Resource<DynamicType = ()>>(
    obj: Arc<K>,
    err: &Error,
    ctx: Arc<Context>,
) -> Action {
    let key = describe(&*obj);
    ctx.metrics.failed(&K::kind(&()), err.metric_label());
    let wait = ctx.backoff.failed(&key);
    tracing::warn!(object = %key, error = %err, ?wait, "reconcile failed");
    Action::requeue(wait)
}

/// The wait before looking again at an object that was refused or waits on another: doubles
/// per consecutive such pass, capped by the resync.
pub(crate) fn retry_later<K: Resource<DynamicType = ()>>(ctx: &Context, obj: &K) -> Duration {
    ctx.backoff
        .failed(&format!("{} (waiting)", describe(obj)))
        .min(ctx.settings.resync)
}

/// Resets [`retry_later`] after a pass that signed.
pub(crate) fn settled<K: Resource<DynamicType = ()>>(ctx: &Context, obj: &K) {
    ctx.backoff
        .succeeded(&format!("{} (waiting)", describe(obj)));
}
