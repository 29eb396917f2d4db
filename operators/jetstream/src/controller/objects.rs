//! NatsStream, NatsKeyValue and NatsObjectStore: each is one stream on the server, so one
//! reconciler serves the three through [`StreamBacked`].

use std::fmt::Debug;
use std::sync::Arc;

use controller_kit::grants;
use futures::FutureExt;
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::{Resource, ResourceExt};
use nats_api::common::ObjectReference;
use nats_api::jetstream::{
    AdoptionPolicy, DeletionPolicy, FINALIZER, NatsKeyValue, NatsKeyValueSpec, NatsObjectStore,
    NatsObjectStoreSpec, NatsStream, NatsStreamSpec, TerminalPolicy, condition, reason,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{
    Context, Error, Outcome, describe, drive, instrumented, kube_err, previous_status,
    previous_transfer, retry_later, settled, watch_config, write_status,
};
use crate::drift::{self, Decision, Field};
use crate::jsapi::{self, JsApiError};
use crate::late_init::late_initialize;
use crate::lifecycle::{self, Action as Plan, Cleanup, ConnectionState, Kind};
use crate::ownership::{self, Found};
use crate::pool::Resolved;
use crate::references::{self, CONNECTION_GROUP, JETSTREAM_GROUP, Referrer};
use crate::server_state;
use crate::stream_config::MappingError;
use crate::transfer;
use crate::{kv_config, object_config, stream_config};

/// A kind that is one stream on the server.
pub trait StreamBacked:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The kind's spec.
    type Spec: Serialize + DeserializeOwned + Clone + Send + Sync;
    /// The lifecycle kind.
    const KIND: Kind;
    /// What the server object is called in messages.
    const NOUN: &'static str;
    /// The spec.
    fn spec(&self) -> &Self::Spec;
    /// The connection the resource names.
    fn connection_ref(&self) -> &ObjectReference;
    /// adoptionPolicy, deletionPolicy, terminalPolicy.
    fn policies(&self) -> (AdoptionPolicy, DeletionPolicy, TerminalPolicy);
    /// The name users know (stream name, bucket name).
    fn display_name(&self) -> String;
    /// The server-side stream name.
    fn stream_name(&self) -> String;
    /// The stream config `spec` asks for, owned by `uid`.
    fn desired(&self, spec: &Self::Spec, uid: &str) -> Result<Map<String, Value>, MappingError>;
    /// The fields compared for drift.
    fn fields() -> &'static [Field];
    /// The spec read from the server's config (refuses a stream that is not of this kind).
    fn spec_from_server(spec: &Self::Spec, server: &Value) -> Result<Self::Spec, MappingError>;
}

impl StreamBacked for NatsStream {
    type Spec = NatsStreamSpec;
    const KIND: Kind = Kind::Stream;
    const NOUN: &'static str = "stream";
    fn spec(&self) -> &Self::Spec {
        &self.spec
    }
    fn connection_ref(&self) -> &ObjectReference {
        &self.spec.connection_ref
    }
    fn policies(&self) -> (AdoptionPolicy, DeletionPolicy, TerminalPolicy) {
        let s = &self.spec;
        (s.adoption_policy, s.deletion_policy, s.terminal_policy)
    }
    fn display_name(&self) -> String {
        NatsStream::stream_name(self).to_string()
    }
    fn stream_name(&self) -> String {
        NatsStream::stream_name(self).to_string()
    }
    fn desired(&self, spec: &Self::Spec, uid: &str) -> Result<Map<String, Value>, MappingError> {
        stream_config::desired(NatsStream::stream_name(self), spec, uid)
    }
    fn fields() -> &'static [Field] {
        stream_config::STREAM_FIELDS
    }
    fn spec_from_server(spec: &Self::Spec, server: &Value) -> Result<Self::Spec, MappingError> {
        stream_config::spec_from_server(spec, server)
    }
}

impl StreamBacked for NatsKeyValue {
    type Spec = NatsKeyValueSpec;
    const KIND: Kind = Kind::KeyValue;
    const NOUN: &'static str = "key-value bucket";
    fn spec(&self) -> &Self::Spec {
        &self.spec
    }
    fn connection_ref(&self) -> &ObjectReference {
        &self.spec.connection_ref
    }
    fn policies(&self) -> (AdoptionPolicy, DeletionPolicy, TerminalPolicy) {
        let s = &self.spec;
        (s.adoption_policy, s.deletion_policy, s.terminal_policy)
    }
    fn display_name(&self) -> String {
        self.bucket_name().to_string()
    }
    fn stream_name(&self) -> String {
        kv_config::stream_name(self.bucket_name())
    }
    fn desired(&self, spec: &Self::Spec, uid: &str) -> Result<Map<String, Value>, MappingError> {
        kv_config::desired(self.bucket_name(), spec, uid)
    }
    fn fields() -> &'static [Field] {
        kv_config::KV_FIELDS
    }
    fn spec_from_server(spec: &Self::Spec, server: &Value) -> Result<Self::Spec, MappingError> {
        kv_config::spec_from_server(spec, server)
    }
}

impl StreamBacked for NatsObjectStore {
    type Spec = NatsObjectStoreSpec;
    const KIND: Kind = Kind::ObjectStore;
    const NOUN: &'static str = "object store";
    fn spec(&self) -> &Self::Spec {
        &self.spec
    }
    fn connection_ref(&self) -> &ObjectReference {
        &self.spec.connection_ref
    }
    fn policies(&self) -> (AdoptionPolicy, DeletionPolicy, TerminalPolicy) {
        let s = &self.spec;
        (s.adoption_policy, s.deletion_policy, s.terminal_policy)
    }
    fn display_name(&self) -> String {
        self.bucket_name().to_string()
    }
    fn stream_name(&self) -> String {
        object_config::stream_name(self.bucket_name())
    }
    fn desired(&self, spec: &Self::Spec, uid: &str) -> Result<Map<String, Value>, MappingError> {
        object_config::desired(self.bucket_name(), spec, uid)
    }
    fn fields() -> &'static [Field] {
        object_config::OBJECT_FIELDS
    }
    fn spec_from_server(spec: &Self::Spec, server: &Value) -> Result<Self::Spec, MappingError> {
        object_config::spec_from_server(spec, server)
    }
}

/// A Ready=False outcome (Synced too), retried after a backoff.
pub(super) fn not_ready<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    reason: &'static str,
    message: String,
) -> Outcome {
    Outcome {
        ready: Some((false, reason, message.clone())),
        synced: Some((false, reason, message)),
        requeue: Some(retry_later(ctx, obj)),
        ..Outcome::default()
    }
}

/// The referrer of a JetStream resource.
pub(super) fn referrer<'a>(kind: &'a str, ns: &'a str) -> Referrer<'a> {
    Referrer {
        group: JETSTREAM_GROUP,
        kind,
        namespace: ns,
    }
}

/// The NATS client of the connection `conn` (absolute), or the outcome saying why not: not
/// admitted by a grant, missing, or not connecting.
pub(super) async fn reach<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    conn: &ObjectReference,
    check_grant: bool,
) -> Result<Result<async_nats::Client, Outcome>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let kind = K::kind(&());
    let target_ns = conn.namespace.clone().unwrap_or_else(|| ns.clone());
    if check_grant {
        let admitted = grants::admitted(
            &ctx.client,
            grants::From {
                group: JETSTREAM_GROUP,
                kind: &kind,
                namespace: &ns,
            },
            grants::To {
                group: CONNECTION_GROUP,
                kind: "NatsConnection",
                namespace: &target_ns,
                name: &conn.name,
            },
        )
        .await
        .map_err(kube_err(obj))?;
        if !admitted {
            return Ok(Err(not_ready(
                ctx,
                obj,
                reason::REFERENCE_NOT_PERMITTED,
                format!(
                    "no NatsReferenceGrant in {target_ns} admits NatsConnection {} from {kind} in {ns}",
                    conn.name
                ),
            )));
        }
    }
    match ctx
        .pool
        .resolve(&ctx.client, &target_ns, &conn.name)
        .await
        .map_err(kube_err(obj))?
    {
        Resolved::Connected(c) => Ok(Ok(c)),
        Resolved::Missing => Ok(Err(not_ready(
            ctx,
            obj,
            reason::REFERENCE_NOT_FOUND,
            format!("NatsConnection {target_ns}/{} does not exist", conn.name),
        ))),
        Resolved::NotReady(r) => Ok(Err(not_ready(
            ctx,
            obj,
            r.reason(),
            format!("NatsConnection {target_ns}/{}: {}", conn.name, r.message()),
        ))),
    }
}

/// The reason of a refused write: a mapping error that is not a bucket, or the server's refusal.
fn refused_reason(e: &MappingError) -> &'static str {
    match e {
        MappingError::NotABucket { .. } => reason::NOT_A_BUCKET,
        _ => reason::REJECTED,
    }
}

/// The spec patch writing `only` fields of `spec` (all when None) into the resource.
fn spec_patch<S: Serialize>(spec: &S, only: Option<&[String]>) -> Option<Value> {
    let mut value = serde_json::to_value(spec).ok()?;
    if let (Some(only), Some(map)) = (only, value.as_object_mut()) {
        map.retain(|k, _| only.contains(k));
    }
    Some(value)
}

async fn apply<K: StreamBacked>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let outcome = pass(&obj, &ctx).await?;
    write_status(&ctx, &*obj, outcome).await
}

/// One pass over a live resource: the outcome to write as status.
async fn pass<K: StreamBacked>(obj: &Arc<K>, ctx: &Context) -> Result<Outcome, Error> {
    let obj = &**obj;
    let ns = obj.namespace().unwrap_or_default();
    let uid = obj.uid().unwrap_or_default();
    let prev = previous_status(obj);
    let spec_edited = prev.observed_generation != obj.meta().generation;
    let (adoption, _, terminal_policy) = obj.policies();
    let what = format!("{} {}", K::NOUN, obj.display_name());

    // Hold: a Terminal resource waits for an edit of its spec.
    if controller_kit::conditions::is_true(&prev.conditions, condition::TERMINAL)
        && !lifecycle::recheck_terminal(terminal_policy, spec_edited)
    {
        return Ok(Outcome {
            terminal: controller_kit::conditions::find(&prev.conditions, condition::TERMINAL)
                .map(|c| (terminal_reason(&c.reason), c.message.clone())),
            requeue: Some(ctx.settings.resync),
            ..Outcome::default()
        });
    }

    let conn = references::absolute(obj.connection_ref(), &ns);
    let check_grant = conn.namespace.as_deref() != Some(ns.as_str());
    let client = match reach(ctx, obj, &conn, check_grant).await? {
        Ok(c) => c,
        Err(outcome) => return Ok(outcome),
    };
    let stream = obj.stream_name();
    let info = match jsapi::stream_info(&client, &stream).await {
        Ok(i) => i,
        Err(e) => {
            return Ok(not_ready(
                ctx,
                obj,
                reason::OBSERVE_FAILED,
                format!("reading {what}: {e}"),
            ));
        }
    };
    settled(ctx, obj);
    let config = info.as_ref().map(|i| i["config"].clone());
    let found = ownership::found(config.as_ref(), &uid);
    let plan = lifecycle::plan(adoption, &found);
    let terminal = |reason: &'static str, message: String| Outcome {
        ready: Some((false, reason, message.clone())),
        synced: Some((false, reason, message.clone())),
        terminal: Some((
            reason,
            format!("{message} (terminalPolicy {terminal_policy:?})"),
        )),
        compared: true,
        requeue: Some(ctx.settings.resync),
        ..Outcome::default()
    };
    // A KV or object-store resource never takes over a stream that is not of its kind.
    if let (Some(c), Kind::KeyValue | Kind::ObjectStore) = (&config, K::KIND)
        && let Err(e) = K::spec_from_server(obj.spec(), c)
    {
        return Ok(terminal(refused_reason(&e), e.to_string()));
    }
    let refused = |reason: &'static str, message: String| Outcome {
        ready: Some((false, reason, message.clone())),
        synced: Some((false, reason, message)),
        compared: true,
        requeue: Some(ctx.settings.resync),
        ..Outcome::default()
    };
    let desired = match obj.desired(obj.spec(), &uid) {
        Ok(d) => d,
        Err(e) => return Ok(refused(refused_reason(&e), format!("{what}: {e}"))),
    };
    let matches = format!("{what} matches spec");
    let to = desired
        .get("placement")
        .and_then(|p| p.get("cluster"))
        .and_then(Value::as_str);
    let prev_transfer = previous_transfer(obj);
    let now = controller_kit::conditions::now();
    let done = |reply: &Value, plan: Plan, synced: (bool, &'static str, String)| {
        // A placement move runs on the server after the update: followed closely until done.
        let transfer = (K::KIND == Kind::Stream)
            .then(|| transfer::observe(to, reply, prev_transfer.as_ref(), &now));
        let moving = transfer.as_ref().is_some_and(Option::is_some);
        Outcome {
            ready: Some((true, reason::MATCHES_SPEC, matches.clone())),
            synced: Some(synced),
            ownership: server_state::ownership(&reply["config"], plan, prev.ownership.as_ref()),
            server: Some(server_state::of_stream(reply)),
            compared: true,
            requeue: Some(if moving {
                transfer::IN_FLIGHT_RECHECK
            } else {
                ctx.settings.resync
            }),
            transfer,
            ..Outcome::default()
        }
    };
    let in_sync = (true, reason::MATCHES_SPEC, matches.clone());
    let mut outcome = match plan {
        Plan::Terminal(t) => {
            let message = match t {
                lifecycle::TerminalReason::ExistsUnowned => {
                    format!("{what} exists and carries no ownership marker; adoptionPolicy Never")
                }
                lifecycle::TerminalReason::OwnedByOther => {
                    let owner = match &found {
                        Found::OwnedByOther(o) => o.clone(),
                        _ => String::new(),
                    };
                    format!("{what} is owned by another resource (UID {owner})")
                }
                lifecycle::TerminalReason::NotFound => {
                    format!("{what} does not exist; adoptionPolicy Adopt requires it")
                }
            };
            terminal(t.reason(), message)
        }
        Plan::Create => match jsapi::create_stream(&client, &desired).await {
            Ok(reply) => {
                ctx.events
                    .publish(obj, false, "Created", format!("{what} created"))
                    .await;
                done(&reply, plan, in_sync)
            }
            Err(e) => refused(reason::REJECTED, format!("creating {what}: {e}")),
        },
        Plan::Update => {
            let server = config.clone().unwrap_or(Value::Null);
            let drift = drift::drifted(K::fields(), &desired, &server);
            let decision = drift::decide(&drift, false);
            let report = lifecycle::synced(&decision, spec_edited);
            match &decision {
                Decision::InSync => {
                    let reply = info.clone().unwrap_or(Value::Null);
                    done(&reply, plan, in_sync)
                }
                Decision::Update(fields) | Decision::Recreate(fields) => {
                    match jsapi::update_stream(&client, &desired).await {
                        Ok(reply) => {
                            let message = if report.drift_corrected_event {
                                let m = format!(
                                    "{what} was changed out of band; corrected {}",
                                    fields.join(", ")
                                );
                                ctx.events
                                    .publish(obj, true, reason::DRIFT_CORRECTED, m.clone())
                                    .await;
                                m
                            } else {
                                matches.clone()
                            };
                            done(&reply, plan, (report.status, report.reason, message))
                        }
                        Err(e) => refused(reason::REJECTED, format!("updating {what}: {e}")),
                    }
                }
                Decision::Refused(fields) => refused(
                    reason::SYNC_FAILED,
                    format!(
                        "{what}: nats-server cannot change {}; recreate the resource",
                        fields.join(", ")
                    ),
                ),
            }
        }
        Plan::AdoptIntoSpec => {
            let server = config.clone().unwrap_or(Value::Null);
            let adopted = match K::spec_from_server(obj.spec(), &server) {
                Ok(s) => s,
                Err(e) => return Ok(terminal(refused_reason(&e), e.to_string())),
            };
            let marked = match obj.desired(&adopted, &uid) {
                Ok(d) => d,
                Err(e) => return Ok(refused(refused_reason(&e), format!("{what}: {e}"))),
            };
            match jsapi::update_stream(&client, &marked).await {
                Ok(reply) => {
                    let mut o = done(&reply, plan, in_sync);
                    o.spec_patch = spec_patch(&adopted, None);
                    o.adopted = Some(format!(
                        "{what} existed unowned; adopted and its config written into spec"
                    ));
                    o
                }
                Err(e) => refused(reason::REJECTED, format!("adopting {what}: {e}")),
            }
        }
        Plan::LateInitialize => {
            // The omitted fields take the server's values first, so applying spec over the
            // existing stream changes only what spec sets (never storage it left out).
            let server = config.clone().unwrap_or(Value::Null);
            let filled = K::spec_from_server(obj.spec(), &server)
                .map_err(|e| e.to_string())
                .and_then(|s| late_initialize(obj.spec(), &s).map_err(|e| e.to_string()));
            let li = match filled {
                Ok(li) => li,
                Err(e) => return Ok(refused(reason::REJECTED, format!("{what}: {e}"))),
            };
            let applied = match obj.desired(&li.spec, &uid) {
                Ok(d) => d,
                Err(e) => return Ok(refused(refused_reason(&e), format!("{what}: {e}"))),
            };
            match jsapi::update_stream(&client, &applied).await {
                Ok(reply) => {
                    let mut o = done(&reply, plan, in_sync);
                    if !li.filled.is_empty() {
                        o.spec_patch = spec_patch(&li.spec, Some(&li.filled));
                    }
                    o.adopted = Some(format!(
                        "{what} existed unowned; adopted, spec applied and omitted fields filled from the server"
                    ));
                    o
                }
                Err(e) => refused(reason::REJECTED, format!("adopting {what}: {e}")),
            }
        }
    };
    // While a placement move runs, count the consumers that have followed the stream.
    if let Some(Some(t)) = outcome.transfer.as_mut()
        && let Some(to) = t.to.clone()
        && let Ok(consumers) = jsapi::consumer_list(&client, &stream).await
    {
        let replicas = desired
            .get("num_replicas")
            .and_then(Value::as_u64)
            .unwrap_or(1);
        t.consumers = Some(transfer::consumers_moved(&to, &consumers, replicas));
    }
    // AdoptOrCreate fills omitted spec fields from the server after each write.
    if lifecycle::late_initializes(adoption)
        && plan != Plan::LateInitialize
        && outcome.ready.as_ref().is_some_and(|r| r.0)
        && let Some(reply) = jsapi::stream_info(&client, &stream).await.ok().flatten()
        && let Ok(from_server) = K::spec_from_server(obj.spec(), &reply["config"])
        && let Ok(li) = late_initialize(obj.spec(), &from_server)
        && !li.filled.is_empty()
    {
        outcome.spec_patch = spec_patch(&li.spec, Some(&li.filled));
    }
    Ok(outcome)
}

fn terminal_reason(r: &str) -> &'static str {
    match r {
        "ExistsUnowned" => reason::EXISTS_UNOWNED,
        "OwnedByOther" => reason::OWNED_BY_OTHER,
        "NotFound" => reason::NOT_FOUND,
        "NotABucket" => reason::NOT_A_BUCKET,
        _ => reason::REJECTED,
    }
}

/// Whether the connection the resource names still exists and is admitted.
pub(super) async fn connection_state<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    conn: &ObjectReference,
) -> Result<ConnectionState, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let kind = K::kind(&());
    let target_ns = references::namespace_of(conn, &ns).to_string();
    let grants = if target_ns == ns {
        Vec::new()
    } else {
        grants::grants_in(&ctx.client, &target_ns)
            .await
            .map_err(kube_err(obj))?
    };
    let api: Api<nats_api::nats::NatsConnection> = Api::namespaced(ctx.client.clone(), &target_ns);
    let exists = api
        .get_opt(&conn.name)
        .await
        .map_err(kube_err(obj))?
        .is_some_and(|c| c.metadata.deletion_timestamp.is_none());
    Ok(references::connection_state(
        &grants,
        referrer(&kind, &ns),
        conn,
        exists,
    ))
}

async fn cleanup<K: StreamBacked>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ns = obj.namespace().unwrap_or_default();
    let conn = references::absolute(obj.connection_ref(), &ns);
    let state = connection_state(&ctx, obj, &conn).await?;
    let what = format!("{} {}", K::NOUN, obj.display_name());
    let fail = |message: String| Error::Cleanup {
        object: describe(obj),
        message,
    };
    let policy = obj.policies().1;
    let cleanup = if lifecycle::dials_on_deletion(policy, state) {
        let client = match reach(&ctx, obj, &conn, false).await? {
            Ok(c) => c,
            Err(o) => {
                return Err(fail(
                    o.ready.map(|r| r.2).unwrap_or_else(|| "unreachable".into()),
                ));
            }
        };
        let stream = obj.stream_name();
        let info = jsapi::stream_info(&client, &stream)
            .await
            .map_err(|e: JsApiError| fail(format!("reading {what}: {e}")))?;
        let config = info.map(|i| i["config"].clone());
        let found = ownership::found(config.as_ref(), &obj.uid().unwrap_or_default());
        let c = lifecycle::on_deletion(policy, state, &found);
        if c == Cleanup::DeleteOnServer {
            jsapi::delete_stream(&client, &stream)
                .await
                .map_err(|e| fail(format!("deleting {what}: {e}")))?;
        }
        c
    } else {
        // Nothing on the server is touched: Retain, or a connection gone or no longer granted.
        lifecycle::on_deletion(policy, state, &Found::Absent)
    };
    tracing::info!(?cleanup, "{what}: finalizer released");
    ctx.metrics.forget(&K::kind(&()), &ns, &obj.name_any());
    Ok(Action::await_change())
}

async fn reconcile<K: StreamBacked>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let object = describe(&*obj);
    let c = ctx.clone();
    controller_kit::finalizer::run(&api, FINALIZER, obj, |o| apply(o, c), |o| cleanup(o, ctx))
        .await
        .map_err(|e| Error::Finalizer {
            object,
            message: controller_kit::finalizer::describe(&e),
        })
}

/// The controller of one stream-backed kind.
pub(super) async fn controller<K: StreamBacked>(ctx: Arc<Context>) {
    let api: Api<K> = Api::all(ctx.client.clone());
    let controller = Controller::new(api, watch_config());
    let store = controller.store();
    let c = ctx.clone();
    // A NatsConnection turning Ready wakes the resources naming it at once (they may be backing
    // off after ConnectFailed or ReferenceNotFound).
    let controller = controller.watches(
        Api::<nats_api::nats::NatsConnection>::all(ctx.client.clone()),
        watch_config(),
        move |conn| {
            let ready = conn.status.as_ref().is_some_and(|s| {
                controller_kit::conditions::is_true(&s.conditions, condition::READY)
            });
            let ns = conn.namespace().unwrap_or_default();
            let name = conn.name_any();
            let dependents: Vec<_> = if ready {
                store
                    .state()
                    .into_iter()
                    .filter(|o| {
                        let own = o.namespace().unwrap_or_default();
                        o.connection_ref().name == name
                            && references::namespace_of(o.connection_ref(), &own) == ns
                            && !controller_kit::conditions::is_true(
                                &previous_status(&**o).conditions,
                                condition::READY,
                            )
                    })
                    .collect()
            } else {
                Vec::new()
            };
            dependents
                .into_iter()
                .map(|o| {
                    c.forget_due(&*o);
                    kube::runtime::reflector::ObjectRef::from_obj(&*o)
                })
                .collect::<Vec<_>>()
        },
    );
    drive(controller, ctx, |obj, ctx| {
        instrumented(obj, ctx, reconcile::<K>).boxed()
    })
    .await;
}
