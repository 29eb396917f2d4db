//! The run loop every controller shares, written once: a Controller's stream driven with the
//! relist redrive ([`crate::relist`]) and each run result logged ([`crate::trace`]); each pass
//! skipped while its object is not yet due ([`crate::due`]), read fresh when the controller asks,
//! run inside its span, counted and timed; a failure counted under its metric label and retried
//! after the object's backoff ([`error_policy`]).
//!
//! A controller builds its `Controller` (its watches), then hands it to [`run`] with its Context
//! and its reconcile: `run(controller, ctx, Read::Cached, reconcile).await`.
//!
//! The loop obeys the [`Process`] it runs under (a binary's, see [`crate::process_state`]): a pass runs
//! only while this replica leads, no new pass starts once the process stops (kube's graceful
//! shutdown lets the running ones finish, then the loop ends), and the process hears when the
//! loop's watch has its first list in (its readiness). Outside a binary's process it always
//! leads.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use kube::ResourceExt;
use kube::api::Api;
use kube::core::Resource;
use kube::runtime::controller::{Action, Controller};
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::context::{HasShared, Shared};
use crate::error::{KubeError, ReconcileError};
pub use crate::object::describe;
use crate::process_state::{Gate, Process};

/// Which copy of the object a pass works from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// The watch cache's: enough when a pass never writes back what it read.
    Cached,
    /// Read again from the API first: the cache may not hold the last pass's status write yet,
    /// and a pass over that stale status would undo or repeat what the last one recorded. An
    /// object gone meanwhile ends the pass.
    Fresh,
    /// The watch cache's copy once every write the controller's passes recorded
    /// ([`crate::echoes::Echoes::worked_from`]) came back through the object's own watch
    /// ([`crate::echoes::Echoes::pending`]): that copy then holds the last pass's writes, or
    /// a version newer still. Read again from the API, as [`Read::Fresh`], while one has not.
    /// For a controller whose watch drops its echoes: the drop is what marks a write back.
    Current,
}

/// Whether a pass reads its object from the API before it runs: always for [`Read::Fresh`],
/// for [`Read::Current`] only while a write of the controller's to it is not back in the watch.
pub fn reads_fresh(read: Read, write_pending: bool) -> bool {
    match read {
        Read::Cached => false,
        Read::Fresh => true,
        Read::Current => write_pending,
    }
}

/// The copy of the object `ns`/`name` a pass works from, read as `read` says: `cached` (the
/// watch cache's), unless there is none or [`reads_fresh`] says to read it again (a write of
/// the controller's to it not back in the watch: [`crate::echoes::Echoes::pending`]), then the
/// API's. `None`: the object is gone.
pub async fn current<K>(
    shared: &Shared,
    cached: Option<Arc<K>>,
    read: Read,
    ns: &str,
    name: &str,
) -> Result<Option<Arc<K>>, KubeError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    if let Some(obj) = cached.filter(|o| !reads_fresh(read, shared.echoes.pending(&**o))) {
        return Ok(Some(obj));
    }
    let api: Api<K> = Api::namespaced(shared.client.clone(), ns);
    // Boxed: a pass that waits (its turn, the gate) holds only a few hundred bytes
    // until it reads; a request's state is kilobytes, times every pass waiting.
    let fresh = Box::pin(api.get_opt(name))
        .await
        .map_err(|source| KubeError {
            object: format!("{} {ns}/{name}", K::kind(&())),
            source,
        })?;
    Ok(fresh.map(Arc::new))
}

/// error_policy: counts the failure under its metric label and retries after a backoff that
/// doubles per consecutive failure of the object ([`crate::backoff`]).
pub fn error_policy<K, E, C>(obj: Arc<K>, err: &E, ctx: Arc<C>) -> Action
where
    K: Resource<DynamicType = ()>,
    E: ReconcileError,
    C: HasShared,
{
    let shared = ctx.shared();
    let key = describe(&*obj);
    shared.metrics.failed(&K::kind(&()), err.metric_label());
    let wait = shared.backoff.failed(&key);
    tracing::warn!(object = %key, error = %err, ?wait, "reconcile failed");
    Action::requeue(wait)
}

/// One pass of `reconcile` over `obj`: skipped while not yet due, read as `read` says, run in
/// its span, counted; a success resets the object's backoff, a failure forgets when it was due.
pub async fn pass<K, C, E, F, Fut>(
    obj: Arc<K>,
    ctx: Arc<C>,
    read: Read,
    reconcile: F,
) -> Result<Action, E>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
    C: HasShared,
    E: From<KubeError>,
    F: FnOnce(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
{
    let shared = ctx.shared();
    // The watch event of the pass's own status write: wait for the time already scheduled.
    if let Some(left) = shared.due.not_yet(&*obj) {
        return Ok(Action::requeue(left));
    }
    let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    let Some(obj) = current(shared, Some(obj), read, &ns, &name).await? else {
        return Ok(Action::await_change());
    };
    let kind = K::kind(&()).to_string();
    let key = describe(&*obj);
    let span =
        crate::trace::reconcile_span(&kind, &obj.namespace().unwrap_or_default(), &obj.name_any());
    let started = Instant::now();
    let result = reconcile(obj.clone(), ctx.clone()).instrument(span).await;
    shared.metrics.reconciled(&kind, started.elapsed());
    match &result {
        Ok(_) => shared.backoff.succeeded(&key),
        Err(_) => shared.due.forget(&*obj),
    }
    result
}

/// Runs `controller` until its process stops (outside a binary's process it runs forever): every
/// pass through [`pass`] once the process's gate lets it ([`Process::gate`]), failures through
/// [`error_policy`], a trigger dropped by a relist redriven, every run result logged.
pub async fn run<K, C, E, F, Fut>(controller: Controller<K>, ctx: Arc<C>, read: Read, reconcile: F)
where
    K: crate::watched::Watched,
    C: HasShared,
    E: ReconcileError + From<KubeError>,
    F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    let process = Process::current();
    let kind = K::kind(&()).to_string();
    let entered = process.enter(&kind);
    let store = controller.store();
    let (redrive, again) = crate::relist::redrive(&kind, store.clone());
    let reconcile = Arc::new(reconcile);
    let gate = process.clone();
    let one = move |obj: Arc<K>, ctx: Arc<C>| -> BoxFuture<'static, Result<Action, E>> {
        let reconcile = reconcile.clone();
        let gate = gate.clone();
        Box::pin(async move {
            match gate.gate().await {
                Gate::Open => {
                    let _passing = gate.passing(describe(&*obj));
                    pass(obj, ctx, read, move |o, c| reconcile(o, c)).await
                }
                // The copy in hand is as old as the wait: run again on the store's current one.
                Gate::Opened => Ok(Action::requeue(std::time::Duration::ZERO)),
                Gate::Stopping => Ok(Action::await_change()),
            }
        })
    };
    let passes = controller
        .graceful_shutdown_on(process.stopping())
        .reconcile_on(again)
        .run(one, error_policy::<K, E, C>, ctx)
        .for_each(|r| {
            redrive.note(&r);
            crate::trace::run_result(&kind, &r);
            futures::future::ready(())
        });
    // The runner waits on this store too. Both waits are polled here, in one future, so both
    // register the same waker: neither can take the other's wake-up (the store keeps one).
    let synced = async {
        if store.wait_until_ready().await.is_ok() {
            entered.synced();
        }
    };
    let ran = async {
        futures::join!(passes, synced);
    };
    // kube's runner runs nothing before the store's first list is in, its end included, and once
    // the process stops nothing polls the watch again: a loop stopped before that list (a watch
    // refused or backing off) would hold the drain for good. It ran no pass, so it ends now.
    let stopped_unlisted = async {
        process.stopping().await;
        if store.wait_until_ready().now_or_never().is_some() {
            std::future::pending::<()>().await;
        }
        tracing::info!(%kind, "stopped before the watch's first list came in: no pass ran");
    };
    futures::future::select(Box::pin(ran), Box::pin(stopped_unlisted)).await;
    drop(entered);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::cached_never(Read::Cached, true, false)]
    #[case::fresh_always(Read::Fresh, false, true)]
    #[case::current_while_a_write_is_not_back(Read::Current, true, true)]
    #[case::current_once_every_write_is_back(Read::Current, false, false)]
    fn a_pass_reads_its_object_again_only_when_the_cache_may_lag_its_writes(
        #[case] read: Read,
        #[case] write_pending: bool,
        #[case] want: bool,
    ) {
        assert_eq!(reads_fresh(read, write_pending), want);
    }

    #[tokio::test]
    async fn the_current_copy_is_the_cached_one_unless_read_fresh_and_a_failed_read_names_it() {
        use k8s_openapi::api::core::v1::ConfigMap;
        // Nothing listens there: a read fails at once.
        let url = "http://127.0.0.1:9".parse().expect("a url");
        let client = kube::Client::try_from(kube::Config::new(url)).expect("a client");
        let shared = Shared::new(client, crate::metrics::Metrics::default(), "test");
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.name = Some("a".into());
        let cached = Arc::new(cm);
        let got = current(&shared, Some(cached.clone()), Read::Cached, "ns", "a").await;
        let got = got.expect("no request").expect("the cached copy");
        assert!(Arc::ptr_eq(&got, &cached));
        let e = current(&shared, Some(cached), Read::Fresh, "ns", "a")
            .await
            .expect_err("a request that fails");
        assert_eq!(e.object, "ConfigMap ns/a");
        let e = current::<ConfigMap>(&shared, None, Read::Cached, "ns", "b")
            .await
            .expect_err("no cached copy: a request");
        assert_eq!(e.object, "ConfigMap ns/b");
    }
}
