//! What every pass shares: its Controller (the kind's watch, woken by every change of the kinds
//! it reads), the fresh read of its own object, its span and metrics, the error policy, and the
//! backoff of a pass that was refused or waits.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::Context;
use super::error::{Error, describe, kube_err};

/// Batches bursts of watch events.
fn config() -> Config {
    Config::default().debounce(Duration::from_millis(100))
}

/// The bounds of a kind a controller watches.
pub(crate) trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// A controller of `K` over every namespace, batching bursts of watch events.
pub(crate) fn controller_for<K: Watched>(ctx: &Context) -> Controller<K> {
    Controller::new(
        Api::<K>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .with_config(config())
}

/// Makes every change of a `W` wake every `K` the controller knows: the auth kinds depend on
/// each other by reference in both directions, and each pass is cheap and idempotent.
pub(crate) fn wake_all_on<K: Watched, W: Watched>(
    controller: Controller<K>,
    ctx: &Context,
) -> Controller<K> {
    let store = controller.store();
    controller.watches(
        Api::<W>::all(ctx.client.clone()),
        watcher::Config::default(),
        move |_: W| {
            store
                .state()
                .into_iter()
                .map(|o| ObjectRef::from_obj(&*o))
                .collect::<Vec<_>>()
        },
    )
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

/// Runs one reconcile inside its span, counting it and resetting the backoff on success. The
/// object is read again first: the watch cache may not hold this controller's last status write
/// yet, and a pass over a stale status would sign again what was just signed.
async fn instrumented<K, F, Fut>(obj: Arc<K>, ctx: Arc<Context>, f: F) -> Result<Action, Error>
where
    K: Watched + Resource<Scope = NamespaceResourceScope>,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<Action, Error>>,
{
    use tracing::Instrument;
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
