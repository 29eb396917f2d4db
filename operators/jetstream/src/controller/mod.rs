//! The Kubernetes shell: one kube-rs `Controller` per kind (NatsConnection, NatsStream,
//! NatsConsumer, NatsKeyValue, NatsObjectStore). Each reconcile gathers its inputs (the resource,
//! its NatsConnection through the pool, grants, the server object), asks the pure core what to do,
//! carries it out on the server and writes status by server-side apply.
//!
//! A NATS failure, a refusal or a missing reference is reported as a condition and requeued; only
//! a failure to reach the Kubernetes API is an error (retried with backoff). Nothing crashes the
//! loop.

mod connection;
mod consumer;
mod objects;

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_kit::backoff::Backoff;
use controller_kit::conditions::{self, Desired};
use controller_kit::events::Events;
use controller_kit::metrics::Metrics;
use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use nats_api::jetstream::{
    FIELD_MANAGER, Ownership, ServerState, StreamTransfer, SyncStatus, condition,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::pool::Pool;

pub use objects::StreamBacked;

/// The default resync period: every resource is re-read and compared this often.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(300);

/// How often a resource waiting for a reference (a consumer's stream) looks again.
pub const WAIT_RETRY: Duration = Duration::from_secs(5);

/// Settings of a controller process.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The resync period.
    pub resync: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            resync: DEFAULT_RESYNC,
        }
    }
}

/// What every reconcile shares: nothing global.
pub struct Context {
    /// The Kubernetes client.
    pub client: kube::Client,
    /// The metrics registry.
    pub metrics: Metrics,
    /// The Event publisher.
    pub events: Events,
    /// Consecutive failures per object.
    pub backoff: Backoff,
    /// One NATS connection per NatsConnection.
    pub pool: Pool,
    /// The process settings.
    pub settings: Settings,
    /// When each object is next due, and what it looked like when its status was written: a
    /// watch event caused only by that status write is not a reason for another pass.
    due: std::sync::Mutex<HashMap<String, (Fingerprint, Instant)>>,
}

/// What of an object, when changed, calls for a pass before it is due: its spec (generation),
/// its finalizers and its deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    uid: Option<String>,
    generation: Option<i64>,
    deleting: bool,
    finalizers: Vec<String>,
}

fn fingerprint<K: Resource>(obj: &K) -> Fingerprint {
    let m = obj.meta();
    Fingerprint {
        uid: m.uid.clone(),
        generation: m.generation,
        deleting: m.deletion_timestamp.is_some(),
        finalizers: m.finalizers.clone().unwrap_or_default(),
    }
}

/// The wait left before a pass is due: none when the object changed in a way that calls for a
/// pass (spec, finalizers, deletion) or the time has come.
fn time_left(
    scheduled: &Fingerprint,
    due: Instant,
    now_seen: &Fingerprint,
    now: Instant,
) -> Option<Duration> {
    let left = due.checked_duration_since(now)?;
    (scheduled == now_seen && !left.is_zero()).then_some(left)
}

impl Context {
    fn due_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Fingerprint, Instant)>> {
        self.due.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `obj` is next due after `wait`.
    pub(crate) fn schedule<K: Resource<DynamicType = ()>>(&self, obj: &K, wait: Duration) {
        self.due_map()
            .insert(describe(obj), (fingerprint(obj), Instant::now() + wait));
    }

    /// The time left before `obj` is due, when nothing that calls for a pass changed.
    fn not_yet_due<K: Resource<DynamicType = ()>>(&self, obj: &K) -> Option<Duration> {
        let map = self.due_map();
        let (fp, due) = map.get(&describe(obj))?;
        time_left(fp, *due, &fingerprint(obj), Instant::now())
    }

    pub(crate) fn forget_due<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        self.due_map().remove(&describe(obj));
    }
}

/// A failure to talk to the Kubernetes API (NATS failures become conditions instead).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API request about `object` failed.
    #[error("{object}: Kubernetes API: {source}")]
    Kube {
        /// The object concerned (kind namespace/name).
        object: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Adding or removing the finalizer, or the cleanup, failed.
    #[error("{object}: finalizer: {message}")]
    Finalizer {
        /// The object concerned.
        object: String,
        /// What failed.
        message: String,
    },
    /// A server object must be removed but NATS could not be reached or refused.
    #[error("{object}: cleanup on the server: {message}")]
    Cleanup {
        /// The object concerned.
        object: String,
        /// What failed.
        message: String,
    },
}

impl Error {
    /// The metric label of the error.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::Finalizer { .. } => "finalizer",
            Error::Cleanup { .. } => "cleanup",
        }
    }
}

/// "Kind namespace/name" of an object, for errors and logs.
pub(crate) fn describe<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{} {}/{}",
        K::kind(&()),
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

pub(crate) fn kube_err<K: Resource<DynamicType = ()>>(
    obj: &K,
) -> impl FnOnce(kube::Error) -> Error + '_ {
    move |source| Error::Kube {
        object: describe(obj),
        source,
    }
}

/// The wait before looking again at an object whose server side is not reachable or not ready:
/// doubles per consecutive pass that ends so (kept apart from the error backoff).
pub(crate) fn retry_later<K: Resource<DynamicType = ()>>(ctx: &Context, obj: &K) -> Duration {
    ctx.backoff
        .failed(&format!("{} (not ready)", describe(obj)))
}

/// Resets [`retry_later`] after a pass that reached the server.
pub(crate) fn settled<K: Resource<DynamicType = ()>>(ctx: &Context, obj: &K) {
    ctx.backoff
        .succeeded(&format!("{} (not ready)", describe(obj)));
}

/// The conditions and state one pass decided; written as status by [`write_status`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// Ready: status, reason, message.
    pub ready: Option<(bool, &'static str, String)>,
    /// Synced: status, reason, message (None: leave as it was).
    pub synced: Option<(bool, &'static str, String)>,
    /// Terminal=True with this reason and message; None removes the condition.
    pub terminal: Option<(&'static str, String)>,
    /// Adopted=True (FoundUnowned) with this message; None keeps what was there.
    pub adopted: Option<String>,
    /// status.ownership (None keeps the previous one).
    pub ownership: Option<Ownership>,
    /// status.server (None keeps the previous one).
    pub server: Option<ServerState>,
    /// Whether the server object was compared in this pass (lastSyncedTime).
    pub compared: bool,
    /// When to look again.
    pub requeue: Option<Duration>,
    /// Spec fields to write after the status (Adopt, late-initialization). After, so the watch
    /// event of the spec write already carries this pass's status (Adopted, ownership).
    pub spec_patch: Option<serde_json::Value>,
    /// status.transfer of a NatsStream: Some(None) clears it, None keeps the previous one.
    pub transfer: Option<Option<StreamTransfer>>,
}

/// The previous status.transfer of a NatsStream (None for the other kinds).
pub(crate) fn previous_transfer<K: Serialize>(obj: &K) -> Option<StreamTransfer> {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.pointer("/status/transfer").cloned())
        .and_then(|t| serde_json::from_value(t).ok())
}

/// The previous SyncStatus of any JetStream kind (NatsStream's status is a superset).
pub(crate) fn previous_status<K: Serialize>(obj: &K) -> SyncStatus {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.get("status").cloned())
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default()
}

fn plus(now: &Time, d: Duration) -> Time {
    let span = k8s_openapi::jiff::SignedDuration::try_from(d).unwrap_or_default();
    Time(now.0.checked_add(span).unwrap_or(now.0))
}

/// Writes the outcome as status (server-side apply on the status subresource), updates the
/// condition gauge, and returns the Action.
pub(crate) async fn write_status<K>(
    ctx: &Context,
    obj: &K,
    outcome: Outcome,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let prev = previous_status(obj);
    let now = conditions::now();
    let generation = obj.meta().generation;
    let mut conds = prev.conditions.clone();
    if let Some((status, reason, message)) = &outcome.ready {
        conditions::upsert(
            &mut conds,
            &Desired::new(condition::READY, *status, reason, message.clone()),
            generation,
            &now,
        );
    }
    if let Some((status, reason, message)) = &outcome.synced {
        conditions::upsert(
            &mut conds,
            &Desired::new(condition::SYNCED, *status, reason, message.clone()),
            generation,
            &now,
        );
    }
    match &outcome.terminal {
        Some((reason, message)) => conditions::upsert(
            &mut conds,
            &Desired::new(condition::TERMINAL, true, reason, message.clone()),
            generation,
            &now,
        ),
        None => conditions::remove(&mut conds, condition::TERMINAL),
    }
    if let Some(message) = &outcome.adopted {
        conditions::upsert(
            &mut conds,
            &Desired::new(
                condition::ADOPTED,
                true,
                nats_api::jetstream::reason::FOUND_UNOWNED,
                message.clone(),
            ),
            generation,
            &now,
        );
    }
    let requeue = outcome.requeue.unwrap_or(ctx.settings.resync);
    let status = SyncStatus {
        observed_generation: generation,
        conditions: conds,
        last_synced_time: if outcome.compared {
            Some(now.clone())
        } else {
            prev.last_synced_time.clone()
        },
        next_check_time: Some(plus(&now, requeue)),
        ownership: outcome.ownership.clone().or(prev.ownership.clone()),
        server: outcome.server.clone().or(prev.server.clone()),
    };
    // Only NatsStream's status has transfer; leaving it out of the apply removes it.
    let transfer = match outcome.transfer {
        Some(t) => t,
        None => previous_transfer(obj),
    };
    let mut body = serde_json::to_value(&status).unwrap_or_default();
    if let (Some(t), Some(map)) = (transfer, body.as_object_mut())
        && let Ok(t) = serde_json::to_value(t)
    {
        map.insert("transfer".into(), t);
    }
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    controller_kit::status::apply(&api, &obj.name_any(), FIELD_MANAGER, &body)
        .await
        .map_err(kube_err(obj))?;
    ctx.metrics
        .set_conditions(&K::kind(&()), &ns, &obj.name_any(), &status.conditions);
    if let Some(spec) = &outcome.spec_patch {
        controller_kit::status::apply_spec(&api, &obj.name_any(), FIELD_MANAGER, spec)
            .await
            .map_err(kube_err(obj))?;
    }
    ctx.schedule(obj, requeue);
    Ok(Action::requeue(requeue))
}

/// Runs one reconcile inside its span, counting it and resetting the backoff on success.
pub(crate) async fn instrumented<K, F, Fut>(
    obj: Arc<K>,
    ctx: Arc<Context>,
    f: F,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()>,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<Action, Error>>,
{
    use tracing::Instrument;
    let kind = K::kind(&()).to_string();
    let key = describe(&*obj);
    let span = controller_kit::trace::reconcile_span(
        &kind,
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
    );
    // The watch event of our own status write: wait for the time already scheduled.
    if let Some(left) = ctx.not_yet_due(&*obj) {
        return Ok(Action::requeue(left));
    }
    let started = Instant::now();
    let result = f(obj.clone(), ctx.clone()).instrument(span).await;
    ctx.metrics.reconciled(&kind, started.elapsed());
    if result.is_ok() {
        ctx.backoff.succeeded(&key);
    } else {
        ctx.forget_due(&*obj);
    }
    result
}

/// error_policy: count the failure and retry after a backoff that doubles per failure.
pub(crate) fn error_policy<K: Resource<DynamicType = ()>>(
    obj: Arc<K>,
    err: &Error,
    ctx: Arc<Context>,
) -> Action {
    let key = describe(&*obj);
    ctx.metrics.failed(&K::kind(&()), err.label());
    let wait = ctx.backoff.failed(&key);
    tracing::warn!(object = %key, error = %err, ?wait, "reconcile failed");
    Action::requeue(wait)
}

/// Runs every controller of the JetStream controller until they end (they run forever).
pub async fn run(ctx: Arc<Context>) {
    futures::join!(
        connection::controller(ctx.clone()),
        objects::controller::<nats_api::jetstream::NatsStream>(ctx.clone()),
        objects::controller::<nats_api::jetstream::NatsKeyValue>(ctx.clone()),
        objects::controller::<nats_api::jetstream::NatsObjectStore>(ctx.clone()),
        consumer::controller(ctx.clone()),
    );
}

/// A context for `client` with a fresh pool, metrics and Events.
pub fn context(client: kube::Client, settings: Settings, metrics: Metrics) -> Arc<Context> {
    Arc::new(Context {
        events: Events::new(client.clone(), FIELD_MANAGER),
        client,
        metrics,
        backoff: Backoff::default(),
        pool: Pool::default(),
        settings,
        due: std::sync::Mutex::default(),
    })
}

/// The watcher configuration every controller uses.
pub(crate) fn watch_config() -> watcher::Config {
    watcher::Config::default()
}

/// Drives a Controller's stream, logging each result.
pub(crate) async fn drive<K>(
    controller: Controller<K>,
    ctx: Arc<Context>,
    reconcile: impl FnMut(
        Arc<K>,
        Arc<Context>,
    ) -> futures::future::BoxFuture<'static, Result<Action, Error>>
    + Send
    + 'static,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let kind = K::kind(&()).to_string();
    let (redrive, again) = controller_kit::relist::redrive(&kind);
    controller
        .reconcile_all_on(again)
        .run(reconcile, error_policy::<K>, ctx)
        .for_each(|r| {
            redrive.note(&r);
            controller_kit::trace::run_result(&kind, &r);
            futures::future::ready(())
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn fp(generation: i64, deleting: bool, finalizers: &[&str]) -> Fingerprint {
        Fingerprint {
            uid: Some("u".into()),
            generation: Some(generation),
            deleting,
            finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
        }
    }

    #[rstest]
    #[case::own_status_write_waits(fp(1, false, &["f"]), 5, Some(5))]
    #[case::spec_edit_runs_now(fp(2, false, &["f"]), 5, None)]
    #[case::deletion_runs_now(fp(1, true, &["f"]), 5, None)]
    #[case::finalizer_change_runs_now(fp(1, false, &[]), 5, None)]
    #[case::due_time_reached_runs(fp(1, false, &["f"]), 0, None)]
    fn a_pass_is_skipped_only_for_an_unchanged_object_before_it_is_due(
        #[case] seen: Fingerprint,
        #[case] secs_left: u64,
        #[case] want: Option<u64>,
    ) {
        let now = Instant::now();
        let due = now + Duration::from_secs(secs_left);
        assert_eq!(
            time_left(&fp(1, false, &["f"]), due, &seen, now),
            want.map(Duration::from_secs)
        );
    }

    #[test]
    fn next_check_time_is_now_plus_the_wait() {
        let now = Time(k8s_openapi::jiff::Timestamp::from_second(1_000).expect("a time"));
        assert_eq!(
            plus(&now, Duration::from_secs(300)),
            Time(k8s_openapi::jiff::Timestamp::from_second(1_300).expect("a time"))
        );
    }

    #[rstest]
    #[case::finalizer(Error::Finalizer { object: "x".into(), message: "m".into() }, "finalizer")]
    #[case::cleanup(Error::Cleanup { object: "x".into(), message: "m".into() }, "cleanup")]
    fn errors_know_their_metric_label(#[case] e: Error, #[case] label: &str) {
        assert_eq!(e.label(), label);
    }
}
