//! NatsStream, NatsKeyValue and NatsObjectStore: each is one stream on the server, so one pass
//! serves the three through [`StreamBacked`].
//!
//! A pass over a live resource ([`pass`]), phase by phase, each returning what the next takes:
//!
//! 1. `hold` — a Terminal resource waits for an edit of its spec (its Terminal kept).
//! 2. [`gather`] — the NatsConnection reached (grant, pool) and the stream read → [`Gathered`].
//! 3. [`refuse`] — a key-value or object-store resource never takes over a stream that is not of
//!    its kind (Terminal).
//! 4. [`plan`] — adoptionPolicy × ownership → the lifecycle action, and the config spec asks for
//!    → [`Planned`] (a spec the server cannot take is refused).
//! 5. [`apply`] — the action on the server: create, correct drift, adopt into spec or
//!    late-initialize; or Terminal → [`Written`].
//! 6. [`observe`] — what the write left: status.server and ownership, a placement move followed,
//!    omitted spec fields late-initialized → [`Outcome`].
//!
//! then `write_status`. A phase that cannot go on returns a [`Stop`], which the pass turns into
//! its outcome (a refusal, a server not reachable) or its error.
//!
//! **What a pass costs the apiserver.** The first pass over a resource created makes the two
//! writes no controller can avoid: the finalizer added (a JSON patch of metadata) and one
//! status write (server-side apply on the status subresource; Kubernetes takes metadata and
//! status in separate requests, so the two cannot be one). Nothing is read: the resource comes
//! from the Controller's watch, its NatsConnection from the NatsConnection Controller's watch
//! ([`Context::cached_connection`]; a GET only when that cache has not seen it), and the in-use
//! finalizer of a Delete-policy resource's connection is written once per connection and
//! process, not per resource ([`in_use::protect`]). Beyond those: the Secrets a connection
//! with credentials or a CA names are read on each pass (the pool's fingerprint of what it
//! dialed); a spec patch only when AdoptOrCreate fills omitted fields. A later pass that finds
//! nothing changed writes no status ([`super::write_status`]): a resync over settled resources costs
//! the apiserver nothing for a connection without Secrets.
//!
//! Deletion ([`cleanup`]): the connection's state; under deletionPolicy Delete over a usable
//! connection (one being deleted is kept usable for it by the in-use finalizer, [`in_use`]), the
//! stream deleted if this resource owns it; then the finalizer is released. A server that cannot
//! be reached fails the cleanup, which keeps the finalizer. A Delete released without reaching
//! the server (connection gone, grant withdrawn) says so in a `DeletionPolicyNotRun` Warning
//! Event naming the object left.

use std::sync::Arc;

use controller_kit::blocked::Blocked;
use controller_kit::conditions::Decided;
use controller_kit::finalizer::{self, Cleanup};
use controller_kit::reconcile::describe;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use nats_api::jetstream::{
    DeletionPolicy, FINALIZER, StreamTransfer, SyncStatus, condition, reason,
};
use nats_api::nats::NatsConnection;
use serde::Serialize;
use serde_json::{Map, Value};

use super::context::Context;
use super::error::Error;
use super::in_use;
use super::outcome::{
    Outcome, Stop, Written, hold, previous_status, previous_transfer, spec_edited, terminal_message,
};
use super::reach::{connection_state, reach};
use super::stream_backed::StreamBacked;
use super::write_status::write_status;
use crate::drift::{self, Decision};
use crate::late_init::late_initialize;
use crate::lifecycle_policies::{self, Action as Plan, ConnectionState, Kind};
use crate::ownership::{self, Found};
use crate::references;
use crate::server_config::MappingError;
use crate::{jsapi, server_state, transfer};

/// What a pass works from: the server reached, and the stream under the resource's name.
pub(super) struct Gathered {
    client: async_nats::Client,
    /// The server-side stream name.
    stream: String,
    /// Its STREAM.INFO answer; None when there is no such stream.
    info: Option<Value>,
    /// Its config.
    config: Option<Value>,
    /// Who owns it.
    found: Found,
}

/// What the pass is to do, and the config it writes.
pub(super) struct Planned {
    action: Plan,
    /// The stream config spec asks for, with the ownership marker.
    desired: Map<String, Value>,
}

/// The live path: the pass, then its outcome written as status.
async fn live<K: StreamBacked>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let outcome = pass(&*obj, &ctx).await?;
    write_status(&ctx, &*obj, outcome).await
}

/// One pass over a live resource: its phases, or the outcome of the phase that stopped it.
async fn pass<K: StreamBacked>(obj: &K, ctx: &Context) -> Result<Outcome, Error> {
    match phases(obj, ctx).await {
        Ok(outcome) => Ok(outcome),
        Err(stop) => stop.outcome(ctx, obj),
    }
}

/// The phases of a pass, in order (see the module doc); a phase that cannot go on stops it.
async fn phases<K: StreamBacked>(obj: &K, ctx: &Context) -> Result<Outcome, Stop> {
    let previous = previous_status(obj);
    let edited = spec_edited(obj, &previous);
    hold(&previous, obj.policies().2, edited)?;
    let gathered = gather(ctx, obj).await?;
    refuse(obj, &gathered)?;
    let planned = plan(obj, &gathered)?;
    let written = apply(ctx, obj, &gathered, &planned, edited).await?;
    Ok(observe(ctx, obj, &previous, &gathered, &planned, written).await)
}

/// The gather phase: the connection reached and the stream read.
async fn gather<K: StreamBacked>(ctx: &Context, obj: &K) -> Result<Gathered, Stop> {
    let ns = obj.namespace().unwrap_or_default();
    let conn = references::absolute(obj.connection_ref(), &ns);
    let check_grant = conn.namespace.as_deref() != Some(ns.as_str());
    in_use::protect(ctx, obj, &conn, obj.policies().1)
        .await
        .map_err(Stop::Failed)?;
    let client = reach(ctx, obj, &conn, check_grant).await?;
    let stream = obj.stream_name();
    let info = jsapi::stream_info(&client, &stream).await.map_err(|e| {
        Stop::NotReady(Blocked::new(
            reason::OBSERVE_FAILED,
            format!("reading {}: {e}", obj.what()),
        ))
    })?;
    ctx.shared.settled(obj);
    let config = info.as_ref().map(|i| i["config"].clone());
    let found = ownership::found(config.as_ref(), &obj.uid().unwrap_or_default());
    Ok(Gathered {
        client,
        stream,
        info,
        config,
        found,
    })
}

/// The refuse phase: a KV or object-store resource never takes over a stream that is not of
/// its kind.
fn refuse<K: StreamBacked>(obj: &K, g: &Gathered) -> Result<(), Stop> {
    if let (Some(c), Kind::KeyValue | Kind::ObjectStore) = (&g.config, K::KIND)
        && let Err(e) = K::spec_from_server(obj.spec(), c)
    {
        return Err(terminal(obj, refused_reason(&e), e.to_string()));
    }
    Ok(())
}

/// The plan phase: the lifecycle action and the config spec asks for.
fn plan<K: StreamBacked>(obj: &K, g: &Gathered) -> Result<Planned, Stop> {
    let action = lifecycle_policies::plan(obj.policies().0, &g.found);
    let desired = obj
        .desired(obj.spec(), &obj.uid().unwrap_or_default())
        .map_err(|e| Stop::refused(refused_reason(&e), format!("{}: {e}", obj.what())))?;
    Ok(Planned { action, desired })
}

/// The apply phase: the planned action carried out on the server.
async fn apply<K: StreamBacked>(
    ctx: &Context,
    obj: &K,
    g: &Gathered,
    p: &Planned,
    spec_edited: bool,
) -> Result<Written, Stop> {
    match p.action {
        Plan::Terminal(t) => Err(terminal(
            obj,
            t.reason(),
            terminal_message(&obj.what(), t, &g.found),
        )),
        Plan::Create => create(obj, g, p).await,
        Plan::Update => update(ctx, obj, g, p, spec_edited).await,
        Plan::AdoptIntoSpec => adopt_into_spec(obj, g).await,
        Plan::LateInitialize => adopt_late_initialized(obj, g).await,
    }
}

/// Create: the stream from spec, with the marker.
async fn create<K: StreamBacked>(obj: &K, g: &Gathered, p: &Planned) -> Result<Written, Stop> {
    let what = obj.what();
    let reply = jsapi::create_stream(&g.client, &p.desired)
        .await
        .map_err(|e| Stop::unwritten(format!("creating {what}: {e}"), &e))?;
    // No Event: status says it (ownership.origin Created, Ready), in the write the pass makes
    // anyway; an Event would be a third apiserver request per resource created.
    tracing::info!("{what} created");
    Ok(Written::in_sync(reply, &what))
}

/// Update: spec compared with the server's config; drift corrected (and reported when spec did
/// not change), a change nats-server cannot make refused.
async fn update<K: StreamBacked>(
    ctx: &Context,
    obj: &K,
    g: &Gathered,
    p: &Planned,
    spec_edited: bool,
) -> Result<Written, Stop> {
    let what = obj.what();
    let server = g.config.clone().unwrap_or(Value::Null);
    let decision = drift::decide(&drift::drifted(K::fields(), &p.desired, &server), false);
    let report = lifecycle_policies::synced(&decision, spec_edited);
    let fields = match &decision {
        Decision::InSync => {
            return Ok(Written::in_sync(
                g.info.clone().unwrap_or(Value::Null),
                &what,
            ));
        }
        Decision::Update(fields) | Decision::Recreate(fields) => fields,
        Decision::Refused(fields) => {
            return Err(Stop::refused(
                reason::SYNC_FAILED,
                format!(
                    "{what}: nats-server cannot change {}; recreate the resource",
                    fields.join(", ")
                ),
            ));
        }
    };
    let reply = jsapi::update_stream(&g.client, &p.desired)
        .await
        .map_err(|e| Stop::unwritten(format!("updating {what}: {e}"), &e))?;
    let mut written = Written::in_sync(reply, &what);
    if report.drift_corrected_event {
        let m = format!(
            "{what} was changed out of band; corrected {}",
            fields.join(", ")
        );
        ctx.shared
            .events
            .publish(obj, true, reason::DRIFT_CORRECTED, m.clone())
            .await;
        written.synced = Decided::new(condition::SYNCED, report.status, report.reason, m);
    }
    Ok(written)
}

/// Adopt: the server's config written into spec, then the stream marked as owned.
async fn adopt_into_spec<K: StreamBacked>(obj: &K, g: &Gathered) -> Result<Written, Stop> {
    let what = obj.what();
    let server = g.config.clone().unwrap_or(Value::Null);
    let adopted = K::spec_from_server(obj.spec(), &server)
        .map_err(|e| terminal(obj, refused_reason(&e), e.to_string()))?;
    let marked = obj
        .desired(&adopted, &obj.uid().unwrap_or_default())
        .map_err(|e| Stop::refused(refused_reason(&e), format!("{what}: {e}")))?;
    let reply = jsapi::update_stream(&g.client, &marked)
        .await
        .map_err(|e| Stop::unwritten(format!("adopting {what}: {e}"), &e))?;
    Ok(Written::in_sync(reply, &what).adopted(
        format!("{what} existed unowned; adopted and its config written into spec"),
        spec_patch(&adopted, None),
    ))
}

/// AdoptOrCreate over an unowned stream: the omitted fields take the server's values first, so
/// applying spec over the existing stream changes only what spec sets (never storage it left
/// out); the filled fields are written into spec.
async fn adopt_late_initialized<K: StreamBacked>(obj: &K, g: &Gathered) -> Result<Written, Stop> {
    let what = obj.what();
    let server = g.config.clone().unwrap_or(Value::Null);
    let li = K::spec_from_server(obj.spec(), &server)
        .map_err(|e| e.to_string())
        .and_then(|s| late_initialize(obj.spec(), &s).map_err(|e| e.to_string()))
        .map_err(|e| Stop::refused(reason::REJECTED, format!("{what}: {e}")))?;
    let applied = obj
        .desired(&li.spec, &obj.uid().unwrap_or_default())
        .map_err(|e| Stop::refused(refused_reason(&e), format!("{what}: {e}")))?;
    let reply = jsapi::update_stream(&g.client, &applied)
        .await
        .map_err(|e| Stop::unwritten(format!("adopting {what}: {e}"), &e))?;
    let patch = if li.filled.is_empty() {
        None
    } else {
        spec_patch(&li.spec, Some(&li.filled))
    };
    Ok(Written::in_sync(reply, &what).adopted(
        format!(
            "{what} existed unowned; adopted, spec applied and omitted fields filled from the server"
        ),
        patch,
    ))
}

/// The observe phase: the outcome of the write, with the placement move followed closely until
/// done, and the spec fields AdoptOrCreate fills from the server after each write.
async fn observe<K: StreamBacked>(
    ctx: &Context,
    obj: &K,
    previous: &SyncStatus,
    g: &Gathered,
    p: &Planned,
    written: Written,
) -> Outcome {
    let transfer = follow_transfer(obj, g, p, &written.reply).await;
    let moving = transfer.as_ref().is_some_and(Option::is_some);
    let late = late_initialized(obj, g, p).await;
    let server = server_state::of_stream(&written.reply);
    let recheck = server_state::recheck_after(moving, &written.reply, ctx.settings.resync);
    let leader = server.leader.clone();
    let mut outcome = written.outcome(p.action, previous.ownership.as_ref(), &obj.what(), server);
    outcome.requeue = Some(recheck);
    if let Some(Some(t)) = &transfer {
        let (ready, synced) = transfer::conditions(t, leader.as_deref());
        for c in outcome.conditions.iter_mut() {
            if c.type_ == ready.type_ {
                *c = ready.clone();
            } else if c.type_ == synced.type_ {
                *c = synced.clone();
            }
        }
    }
    outcome.transfer = transfer;
    if late.is_some() {
        outcome.spec_patch = late;
    }
    outcome
}

/// status.transfer of a NatsStream (None for the other kinds): a placement move runs on the
/// server after the update; while it runs, the consumers that have followed it are counted.
async fn follow_transfer<K: StreamBacked>(
    obj: &K,
    g: &Gathered,
    p: &Planned,
    reply: &Value,
) -> Option<Option<StreamTransfer>> {
    if K::KIND != Kind::Stream {
        return None;
    }
    let to = p
        .desired
        .get("placement")
        .and_then(|p| p.get("cluster"))
        .and_then(Value::as_str);
    let now = controller_kit::conditions::now();
    let mut observed = transfer::observe(to, reply, previous_transfer(obj).as_ref(), &now);
    if let Some(t) = observed.as_mut()
        && let Some(to) = t.to.clone()
        && let Ok(consumers) = jsapi::consumer_list(&g.client, &g.stream).await
    {
        let replicas = p
            .desired
            .get("num_replicas")
            .and_then(Value::as_u64)
            .unwrap_or(1);
        t.consumers = Some(transfer::consumers_moved(&to, &consumers, replicas));
    }
    Some(observed)
}

/// Under AdoptOrCreate, the spec fields spec omits, filled from the server's config after the
/// write (None when there are none, or the pass was the late-initializing adoption itself).
async fn late_initialized<K: StreamBacked>(obj: &K, g: &Gathered, p: &Planned) -> Option<Value> {
    if !lifecycle_policies::late_initializes(obj.policies().0) || p.action == Plan::LateInitialize {
        return None;
    }
    let reply = jsapi::stream_info(&g.client, &g.stream)
        .await
        .ok()
        .flatten()?;
    let from_server = K::spec_from_server(obj.spec(), &reply["config"]).ok()?;
    let li = late_initialize(obj.spec(), &from_server).ok()?;
    if li.filled.is_empty() {
        return None;
    }
    spec_patch(&li.spec, Some(&li.filled))
}

/// A Terminal refusal of a stream-backed resource: its Terminal condition names the
/// terminalPolicy.
fn terminal<K: StreamBacked>(obj: &K, reason: &'static str, message: String) -> Stop {
    let policy = obj.policies().2;
    let terminal_message = format!("{message} (terminalPolicy {policy:?})");
    Stop::terminal(reason, message, terminal_message)
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

/// The cleanup path: deletionPolicy × the connection's state × ownership decides; only Delete
/// over a usable connection reaches the server.
async fn cleanup<K: StreamBacked>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Cleanup, Error> {
    let obj = &*obj;
    let ns = obj.namespace().unwrap_or_default();
    let conn = references::absolute(obj.connection_ref(), &ns);
    let state = connection_state(&ctx, obj, &conn).await?;
    let policy = obj.policies().1;
    let cleanup = if lifecycle_policies::dials_on_deletion(policy, state) {
        match delete_on_server(&ctx, obj, &conn, policy, state).await {
            Ok((c, off_server)) => {
                // A Delete-policy consumer still bound to it learns that its consumer went too.
                if off_server && controller_kit::finalizer::has(obj, in_use::IN_USE_FINALIZER) {
                    super::write_status::write_deleted_on_server(&ctx, obj, &obj.what()).await?;
                }
                c
            }
            // Its servers torn down with their namespace: the data goes with them.
            Err(e) => match super::torn_down::with_servers(&ctx, &conn).await {
                Some(clusters) => {
                    super::torn_down::released(&ctx, obj, &obj.what(), &clusters).await;
                    lifecycle_policies::Cleanup::Release
                }
                None => return Err(e),
            },
        }
    } else {
        // Nothing on the server is touched: Retain, or a connection gone or no longer granted
        // (then said in a Warning Event when the policy was Delete).
        if let Some(why) = in_use::not_run(policy, state, &conn) {
            in_use::released_without_policy(&ctx, obj, &obj.what(), &why).await;
        }
        lifecycle_policies::on_deletion(policy, state, &Found::Absent)
    };
    tracing::info!(?cleanup, "{}: finalizer released", obj.what());
    ctx.shared
        .metrics
        .forget(&K::kind(&()), &ns, &obj.name_any());
    Ok(Cleanup::Done)
}

/// The stream deleted on the server when this resource owns it; with whether no stream of its
/// name is left there (deleted now, or found gone).
async fn delete_on_server<K: StreamBacked>(
    ctx: &Context,
    obj: &K,
    conn: &nats_api::common::ObjectReference,
    policy: DeletionPolicy,
    state: ConnectionState,
) -> Result<(lifecycle_policies::Cleanup, bool), Error> {
    let what = obj.what();
    let fail = |message: String| Error::Cleanup {
        object: describe(obj),
        message,
    };
    let client = reach(ctx, obj, conn, false)
        .await
        .map_err(|s| s.cleanup_error(obj))?;
    let stream = obj.stream_name();
    let info = jsapi::stream_info(&client, &stream)
        .await
        .map_err(|e| fail(format!("reading {what}: {e}")))?;
    let config = info.map(|i| i["config"].clone());
    let found = ownership::found(config.as_ref(), &obj.uid().unwrap_or_default());
    let c = lifecycle_policies::on_deletion(policy, state, &found);
    if c == lifecycle_policies::Cleanup::DeleteOnServer {
        jsapi::delete_stream(&client, &stream)
            .await
            .map_err(|e| fail(format!("deleting {what}: {e}")))?;
    }
    let off_server = c == lifecycle_policies::Cleanup::DeleteOnServer || found == Found::Absent;
    Ok((c, off_server))
}

/// One reconcile under the JetStream finalizer (every stream-backed resource wants it), within
/// its NatsConnection's share of the slots ([`super::share`]).
async fn reconcile<K: StreamBacked>(
    obj: Arc<K>,
    ctx: Arc<Context>,
    store: Store<K>,
) -> Result<Action, Error> {
    let conn = obj.connection_ref().clone();
    let (_slot, obj) = match super::share::turn(&ctx, obj, &conn, &store).await {
        Ok(turn) => turn,
        Err(then) => return Ok(then),
    };
    // Boxed: a pass waiting its turn holds only the few bytes above, however many wait.
    Box::pin(in_turn(obj, ctx)).await
}

/// [`reconcile`] once its turn came.
async fn in_turn<K: StreamBacked>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<K> = Api::namespaced(
        ctx.shared.client.clone(),
        &obj.namespace().unwrap_or_default(),
    );
    // A NatsStream a Delete-policy consumer still needs (`in_use`) stays after its own deletion.
    let deleting = obj.meta().deletion_timestamp.is_some();
    let in_use = controller_kit::finalizer::has(&*obj, in_use::IN_USE_FINALIZER);
    if deleting && in_use && !controller_kit::finalizer::has(&*obj, FINALIZER) {
        return Ok(match in_use::release_stream(&ctx, &*obj).await? {
            Some(wait) => Action::requeue(wait),
            None => Action::await_change(),
        });
    }
    let c = ctx.clone();
    let read_at = obj.meta().resource_version.clone();
    let action = finalizer::reconcile(
        &api,
        FINALIZER,
        obj,
        true,
        |o| {
            super::under_finalizer::finalizer_written(&c, read_at.as_deref(), &*o);
            live(o, c)
        },
        |o| cleanup(o, ctx),
    )
    .await?;
    Ok(if deleting && in_use {
        Action::requeue(in_use::recheck())
    } else {
        action
    })
}

/// The resources naming `conn` that are not Ready: a NatsConnection turning Ready wakes them at
/// once (they may be backing off after ConnectFailed or ReferenceNotFound).
fn waiting_on<K: StreamBacked>(store: &Store<K>, conn: &NatsConnection) -> Vec<Arc<K>> {
    let ready = conn
        .status
        .as_ref()
        .is_some_and(|s| controller_kit::conditions::is_true(&s.conditions, condition::READY));
    if !ready {
        return Vec::new();
    }
    let ns = conn.namespace().unwrap_or_default();
    let name = conn.name_any();
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
}

/// The controller of one stream-backed kind: its passes woken by their NatsConnection turning
/// Ready, its store the index's copy of the kind.
pub(super) async fn controller<K: StreamBacked>(ctx: Arc<Context>) {
    super::share::run_in_line(
        ctx,
        waiting_on::<K>,
        |ctx, store| ctx.index.register(store.clone()),
        reconcile::<K>,
    )
    .await;
}
