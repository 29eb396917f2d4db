//! The Kubernetes shell of the auth controller: one kube-rs `Controller` per kind (NatsOperator,
//! NatsSystemAccount, NatsAccount, NatsUser, NatsOperatorTrust, NatsAccountTrust). A reconcile
//! gathers its inputs (the object, what it references, grants, key Secrets), asks the pure core
//! what to sign and what to refuse, and writes what it decided: generated key Secrets and creds
//! Secrets by server-side apply, status through the status subresource, Events, and account JWTs
//! pushed over `--system-connection`.
//!
//! A refusal or a missing reference is a condition and a requeue with backoff; only a failure to
//! reach the Kubernetes API is an error (also retried with backoff). Seeds never leave Secrets:
//! nothing here formats an [`NKey`] or a creds file into a log, an Event, a status or an error.

mod account;
mod claims_delete;
mod keys;
mod nats;
mod operator;
mod system_account;
mod trust;
mod user;

use std::collections::{BTreeMap, HashMap};
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
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use nats_api::auth::FIELD_MANAGER;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use nats::SystemConnection;

/// The default resync period: every object is re-read and re-checked this often.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(300);

/// How soon an object waiting on another (its NatsOperator's keys, an exporter's activation)
/// looks again at the latest, besides the watch that wakes it.
pub const WAIT_RETRY: Duration = Duration::from_secs(5);

/// Settings of a controller process.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The resync period.
    pub resync: Duration,
    /// The NatsConnection (namespace, name) JWTs are pushed over; `None`: nothing is pushed and
    /// every account and user reads Distributed False, reason NoSystemConnection.
    pub system_connection: Option<SystemConnection>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            resync: DEFAULT_RESYNC,
            system_connection: None,
        }
    }
}

/// What every reconcile shares.
pub struct Context {
    /// The Kubernetes client.
    pub client: kube::Client,
    /// The metrics registry.
    pub metrics: Metrics,
    /// The Event publisher.
    pub events: Events,
    /// Consecutive failures per object.
    pub backoff: Backoff,
    /// The process settings.
    pub settings: Settings,
    /// The dialed system connection, re-dialed when what it is dialed from changes.
    system: tokio::sync::Mutex<Option<nats::Dialed>>,
    /// Set when a ping over the system connection heard no server at all: the server it is
    /// connected to is hung or cut off (the client would notice only after its pings time out),
    /// so the next pass dials again, which picks a server that answers.
    redial: std::sync::atomic::AtomicBool,
    /// The roster with memory as the last ping left it: the next ping waits for that many, and a
    /// recorded server that stops answering is counted as down (see [`crate::roster`]).
    roster: std::sync::Mutex<crate::roster::Roster>,
    /// Per NatsOperator (namespace/name), which deleted accounts each server (by its id) has
    /// confirmed deleting.
    confirmed: std::sync::Mutex<BTreeMap<String, crate::deletions::Confirmed>>,
    /// How often each account's JWT was pushed, which voids the confirmations before it.
    pushes: std::sync::Mutex<crate::deletions::Pushes>,
    /// Per NatsOperator (namespace/name), its deleted accounts and the key that signs their
    /// CLAIMS.DELETE, as its last pass left them: what the rejoin watch sends between passes.
    deletions: std::sync::Mutex<BTreeMap<String, claims_delete::Deletions>>,
    /// Per account key, the least iat a new JWT may carry: one past a newer JWT a server holds.
    iat_floor: std::sync::Mutex<HashMap<String, i64>>,
}

impl Context {
    /// The roster with memory as the last ping left it.
    pub(crate) fn roster(&self) -> crate::roster::Roster {
        self.roster
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn iat_floor(&self, account: &str) -> i64 {
        self.iat_floor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(account)
            .copied()
            .unwrap_or(0)
    }

    pub(crate) fn raise_iat_floor(&self, account: &str, at_least: i64) {
        let mut map = self.iat_floor.lock().unwrap_or_else(|p| p.into_inner());
        let e = map.entry(account.to_string()).or_insert(0);
        *e = (*e).max(at_least);
    }
}

/// A failure to talk to the Kubernetes API (refusals and NATS failures become conditions).
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
}

impl Error {
    /// The metric label of the error.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
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

pub(crate) fn kube_err(object: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let object = object.into();
    move |source| Error::Kube { object, source }
}

/// Unix seconds now.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A metav1 Time of unix seconds.
pub(crate) fn time_of(secs: i64) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(secs).unwrap_or_default(),
    )
}

/// Unix seconds of a metav1 Time.
pub(crate) fn secs_of(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
    t.0.as_second()
}

/// status.jwtHash: the hex SHA-256 of the JWT text.
pub(crate) fn jwt_hash(jwt: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(jwt.as_bytes()))
}

/// Signs with the previous JWT's iat when that reproduces the previous JWT exactly (nothing
/// changed: keep it, so status and servers see no new JWT), else at `now`. `build(iat)` signs.
pub(crate) fn sign_stable<N: nats_claims::ClaimBody, E>(
    prev: Option<&str>,
    now: i64,
    build: impl Fn(i64) -> Result<String, E>,
) -> Result<String, E> {
    if let Some(prev) = prev.filter(|p| !p.is_empty())
        && let Ok(claims) = nats_claims::decode_unverified::<N>(prev)
        && claims.issued_at > 0
        && build(claims.issued_at)? == prev
    {
        return Ok(prev.to_string());
    }
    build(now)
}

/// Whether the object carries the auth controller's finalizer.
pub(crate) fn has_finalizer<K: Resource>(obj: &K) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == nats_api::auth::FINALIZER))
}

/// Sets the object's finalizers to `finalizers` (a merge patch replaces the list).
async fn set_finalizers<K>(ctx: &Context, obj: &K, finalizers: Vec<String>) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": obj.meta().resource_version,
    }});
    api.patch(
        &obj.name_any(),
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .map_err(kube_err(describe(obj)))?;
    Ok(())
}

/// Adds the auth controller's finalizer.
pub(crate) async fn add_finalizer<K>(ctx: &Context, obj: &K) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let mut f = obj.meta().finalizers.clone().unwrap_or_default();
    f.push(nats_api::auth::FINALIZER.to_string());
    set_finalizers(ctx, obj, f).await
}

/// Removes the auth controller's finalizer.
pub(crate) async fn remove_finalizer<K>(ctx: &Context, obj: &K) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let f: Vec<String> = obj
        .meta()
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != nats_api::auth::FINALIZER)
        .collect();
    set_finalizers(ctx, obj, f).await
}

/// A DeletionHeld Warning Event for a held deletion whose Ready condition `cond` is new (the
/// first pass that holds it, or a hold for another reason): not one per retry.
pub(crate) async fn deletion_held<K>(ctx: &Context, obj: &K, cond: &Cond)
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let already = previous_conditions(obj)
        .iter()
        .any(|c| c.type_ == cond.type_ && c.reason == cond.reason && c.message == cond.message);
    if !already {
        ctx.events
            .publish(
                obj,
                true,
                nats_api::auth::event::DELETION_HELD,
                cond.message.clone(),
            )
            .await;
    }
}

/// A ForceDeleted Warning Event: the finalizer is released without what it waited for.
pub(crate) async fn force_deleted<K>(ctx: &Context, obj: &K, message: String)
where
    K: Resource<DynamicType = ()>,
{
    tracing::warn!(object = %describe(obj), "{message}");
    ctx.events
        .publish(obj, true, nats_api::auth::event::FORCE_DELETED, message)
        .await;
}

/// An account's revocation record (§5.3): the previous record merged with the JWT it replaces,
/// plus the key of every user of the account being deleted (from its deletion time) and every
/// key a user replaced, each with the account's signing keys as issuers; pruned of entries none
/// of whose signing keys is left.
pub(crate) fn revocation_record(
    prev: &[nats_api::auth::Revocation],
    prev_jwt: Option<&str>,
    users: &[&nats_api::auth::NatsUser],
    signing_keys: &[String],
    now: i64,
) -> Vec<nats_api::auth::Revocation> {
    use crate::revocations;
    let mut record = match prev_jwt
        .filter(|j| !j.is_empty())
        .and_then(|j| nats_claims::decode_unverified::<nats_claims::Account>(j).ok())
    {
        Some(c) => revocations::merge_from_jwt(prev, &c),
        None => prev.to_vec(),
    };
    for u in users {
        let Some(st) = &u.status else { continue };
        if let (Some(at), Some(pk)) = (&u.metadata.deletion_timestamp, &st.public_key)
            && has_finalizer(*u)
        {
            revocations::revoke(&mut record, pk, secs_of(at), signing_keys);
        }
        for r in &st.replaced_keys {
            revocations::revoke(&mut record, &r.public_key, secs_of(&r.at), signing_keys);
        }
    }
    revocations::prune(&record, signing_keys, |_| None, now)
}

/// One condition as a pass decides it.
#[derive(Debug, Clone)]
pub(crate) struct Cond {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Cond {
    pub fn new(type_: &'static str, status: bool, reason: &'static str, message: String) -> Self {
        Cond {
            type_,
            status,
            reason,
            message,
        }
    }
}

/// The previous conditions with `set` upserted and `remove` removed.
pub(crate) fn merge_conditions(
    prev: &[Condition],
    generation: Option<i64>,
    set: &[Cond],
    remove: &[&str],
) -> Vec<Condition> {
    let now = conditions::now();
    let mut out = prev.to_vec();
    for c in set {
        conditions::upsert(
            &mut out,
            &Desired::new(c.type_, c.status, c.reason, c.message.clone()),
            generation,
            &now,
        );
    }
    for r in remove {
        if !set.iter().any(|c| c.type_ == *r) {
            conditions::remove(&mut out, r);
        }
    }
    out
}

/// The previous status of an object as JSON (an empty object when it has none).
pub(crate) fn previous_status<K: Serialize>(obj: &K) -> serde_json::Value {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.get("status").cloned())
        .filter(|v| v.is_object())
        .unwrap_or_else(|| serde_json::json!({}))
}

/// The previous conditions of an object.
pub(crate) fn previous_conditions<K: Serialize>(obj: &K) -> Vec<Condition> {
    previous_status(obj)
        .get("conditions")
        .cloned()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default()
}

/// Writes `status` (the whole status this controller owns) by server-side apply on the status
/// subresource and updates the condition gauge. A field left out is removed.
pub(crate) async fn write_status<K, S>(ctx: &Context, obj: &K, status: &S) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
    S: Serialize,
{
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    controller_kit::status::apply(&api, &obj.name_any(), FIELD_MANAGER, status)
        .await
        .map_err(kube_err(describe(obj)))?;
    conditions_gauge(ctx, obj, status);
    Ok(())
}

/// The condition gauge of `obj`, from the status just written.
fn conditions_gauge<K: Resource<DynamicType = ()>, S: Serialize>(
    ctx: &Context,
    obj: &K,
    status: &S,
) {
    let conds: Vec<Condition> = serde_json::to_value(status)
        .ok()
        .and_then(|v| v.get("conditions").cloned())
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default();
    ctx.metrics.set_conditions(
        &K::kind(&()),
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
        &conds,
    );
}

/// Writes `status` as [`write_status`] does, only while `obj` is at the resourceVersion it was
/// read at; `Ok(false)` when it changed since (the caller looks again). For the status that is a
/// record (an account's revocations): a pass must never write back a status someone removed.
pub(crate) async fn write_status_at<K, S>(ctx: &Context, obj: &K, status: &S) -> Result<bool, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
    S: Serialize,
{
    let Some(rv) = obj.meta().resource_version.as_deref() else {
        return write_status(ctx, obj, status).await.map(|()| true);
    };
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    match controller_kit::status::apply_at(&api, &obj.name_any(), rv, FIELD_MANAGER, status).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => return Ok(false),
        Err(e) => return Err(kube_err(describe(obj))(e)),
    }
    conditions_gauge(ctx, obj, status);
    Ok(true)
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

/// Runs one reconcile inside its span, counting it and resetting the backoff on success. The
/// object is read again first: the watch cache may not hold this controller's last status write
/// yet, and a pass over a stale status would sign again what was just signed.
pub(crate) async fn instrumented<K, F, Fut>(
    obj: Arc<K>,
    ctx: Arc<Context>,
    f: F,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
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

/// A controller of `K` over every namespace, batching bursts of watch events.
pub(crate) fn controller_for<K>(ctx: &Context) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    Controller::new(
        Api::<K>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .with_config(Config::default().debounce(Duration::from_millis(100)))
}

/// Makes every change of a `W` wake every `K` the controller knows: the auth kinds depend on
/// each other by reference in both directions, and each pass is cheap and idempotent.
pub(crate) fn wake_all_on<K, W>(controller: Controller<K>, ctx: &Context) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    W: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
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

/// Runs every controller of the auth controller until they end (they run forever).
pub async fn run(ctx: Arc<Context>) {
    futures::join!(
        operator::controller(ctx.clone()),
        system_account::controller(ctx.clone()),
        account::controller(ctx.clone()),
        user::controller(ctx.clone()),
        trust::operator_trust_controller(ctx.clone()),
        trust::account_trust_controller(ctx.clone()),
        claims_delete::rejoin_watch(ctx.clone()),
    );
}

/// A context for `client` with fresh metrics state and Events.
pub fn context(client: kube::Client, settings: Settings, metrics: Metrics) -> Arc<Context> {
    Arc::new(Context {
        events: Events::new(client.clone(), FIELD_MANAGER),
        client,
        metrics,
        backoff: Backoff::default(),
        settings,
        system: tokio::sync::Mutex::new(None),
        roster: std::sync::Mutex::new(crate::roster::Roster::default()),
        redial: std::sync::atomic::AtomicBool::new(false),
        confirmed: std::sync::Mutex::default(),
        pushes: std::sync::Mutex::default(),
        deletions: std::sync::Mutex::default(),
        iat_floor: std::sync::Mutex::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            last_transition_time: time_of(1_000),
            observed_generation: Some(1),
        }
    }

    #[test]
    fn merging_conditions_upserts_and_removes_only_what_is_not_set() {
        let prev = vec![
            cond("Ready", "False", "KeysPending"),
            cond("Distributed", "False", "NoSystemConnection"),
        ];
        let out = merge_conditions(
            &prev,
            Some(2),
            &[Cond::new("Ready", true, "Signed", "signed".into())],
            &["Distributed", "Ready"],
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].reason, "Signed");
        assert_eq!(out[0].status, "True");
        assert_eq!(out[0].observed_generation, Some(2));
    }

    #[test]
    fn jwt_hash_is_hex_sha256() {
        assert_eq!(
            jwt_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn times_round_trip_through_metav1() {
        assert_eq!(secs_of(&time_of(1_790_000_000)), 1_790_000_000);
    }
}
