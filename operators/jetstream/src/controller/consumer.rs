//! NatsConsumer: by `stream` it names its connection; by `streamRef` it waits for the NatsStream
//! to be Ready and inherits its connection.
//!
//! A pass over a live consumer ([`pass`]), phase by phase, each returning what the next takes:
//!
//! 1. `hold` — a Terminal consumer waits for an edit of its spec (its Terminal kept).
//! 2. [`gather`] — where it lives (its stream bound, or waited for), the NatsConnection reached
//!    and the consumer read → [`Gathered`].
//! 3. [`plan`] — adoptionPolicy × ownership → the lifecycle action, and the config spec asks for
//!    → [`Planned`] (a spec the server cannot take is refused).
//! 4. [`apply`] — the action on the server: create (or take over under AdoptOrCreate), adopt
//!    into spec, correct drift by update or, where allowed, recreate; or Terminal → [`Written`].
//! 5. [`observe`] — what the write left: status.server and ownership → [`Outcome`].
//!
//! then `write_status`. A phase that cannot go on returns a [`Stop`], which the pass turns into
//! its outcome or its error.
//!
//! Deletion ([`cleanup`]): a consumer whose stream is gone or was never bound is released at
//! once; otherwise as the stream-backed kinds: under deletionPolicy Delete over a usable
//! connection (kept usable by the in-use finalizer, [`in_use`]), the consumer deleted if this
//! resource owns it; a Delete released without reaching the server says so in an Event.

use std::sync::Arc;

use controller_kit::blocked::Blocked;
use controller_kit::conditions::Decided;
use controller_kit::finalizer::Cleanup;
use controller_kit::reconcile::describe;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use nats_api::jetstream::{NatsConsumer, NatsStream, SyncStatus, condition, reason};
use serde_json::{Map, Value};

use super::context::Context;
use super::error::{Error, kube_err};
use super::in_use;
use super::outcome::{
    Outcome, Stop, Written, hold, previous_status, spec_edited, terminal_message,
};
use super::reach::{connection_state, reach};
use super::write_status::write_status;
use crate::drift::{self, Decision};
use crate::lifecycle_policies::{self, Action as Plan, ConnectionState};
use crate::ownership::{self, Found};
use crate::references::{self, ConsumerTarget};
use crate::{consumer_config, jsapi, server_state};

/// What a pass works from: the server reached, and the consumer under its name on its stream.
pub(super) struct Gathered {
    client: async_nats::Client,
    /// The server-side stream name.
    stream: String,
    /// The consumer's name.
    name: String,
    /// "consumer <name> on stream <stream>", for messages.
    what: String,
    /// Its CONSUMER.INFO answer; None when there is no such consumer.
    info: Option<Value>,
    /// Its config.
    config: Option<Value>,
    /// Who owns it.
    found: Found,
}

/// What the pass is to do, and the config it writes.
pub(super) struct Planned {
    action: Plan,
    /// The consumer config spec asks for, with the ownership marker.
    desired: Map<String, Value>,
}

/// Where the consumer lives, or the outcome of waiting for it.
async fn target(ctx: &Context, obj: &NatsConsumer) -> Result<ConsumerTarget, Error> {
    Ok(target_and_stream(ctx, obj).await?.0)
}

/// [`target`], with the NatsStream a `streamRef` names as read (None by `stream`).
async fn target_and_stream(
    ctx: &Context,
    obj: &NatsConsumer,
) -> Result<(ConsumerTarget, Option<NatsStream>), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let Some(r) = &obj.spec.stream_ref else {
        return Ok((references::consumer_target(obj, None, &[]), None));
    };
    let target_ns = references::namespace_of(r, &ns).to_string();
    let namespaces = &ctx.shared.scope.namespaces;
    let grants = if target_ns == ns {
        Vec::new()
    } else {
        controller_kit::grants::grants_in(&ctx.shared.client, namespaces, &target_ns)
            .await
            .map_err(kube_err(obj))?
    };
    // A stream outside --watch-namespaces is never read: it reads as absent.
    let stream = if namespaces.watches(&target_ns) {
        let api: Api<NatsStream> = Api::namespaced(ctx.shared.client.clone(), &target_ns);
        api.get_opt(&r.name).await.map_err(kube_err(obj))?
    } else {
        None
    };
    let target = references::consumer_target(obj, stream.as_ref(), &grants);
    Ok((target, stream))
}

/// The live path: the pass, then its outcome written as status.
async fn live(obj: Arc<NatsConsumer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let outcome = pass(&obj, &ctx).await?;
    write_status(&ctx, &*obj, outcome).await
}

/// One pass over a live consumer: its phases, or the outcome of the phase that stopped it.
async fn pass(obj: &NatsConsumer, ctx: &Context) -> Result<Outcome, Error> {
    match phases(obj, ctx).await {
        Ok(outcome) => Ok(outcome),
        Err(stop) => stop.outcome(ctx, obj),
    }
}

/// The phases of a pass, in order (see the module doc); a phase that cannot go on stops it.
async fn phases(obj: &NatsConsumer, ctx: &Context) -> Result<Outcome, Stop> {
    let previous = previous_status(obj);
    let edited = spec_edited(obj, &previous);
    hold(&previous, obj.spec.terminal_policy, edited)?;
    let gathered = gather(ctx, obj).await?;
    let planned = plan(obj, &gathered)?;
    let written = apply(ctx, obj, &gathered, &planned, edited).await?;
    Ok(observe(ctx, &previous, &gathered, &planned, written))
}

/// The gather phase: the stream bound, the connection reached, the consumer read.
async fn gather(ctx: &Context, obj: &NatsConsumer) -> Result<Gathered, Stop> {
    let ns = obj.namespace().unwrap_or_default();
    let (conn, stream) = match target(ctx, obj).await? {
        ConsumerTarget::Bound { connection, stream } => (connection, stream),
        ConsumerTarget::Waiting { reason, message } => {
            return Err(Stop::Waiting(Blocked::new(reason, message)));
        }
    };
    // By streamRef the connection is the stream's, already admitted to it; by stream the
    // consumer's own reference needs a grant when it crosses namespaces.
    let check_grant = obj.spec.stream.is_some() && conn.namespace.as_deref() != Some(ns.as_str());
    in_use::protect(ctx, obj, &conn, obj.spec.deletion_policy)
        .await
        .map_err(Stop::Failed)?;
    if let Some(r) = &obj.spec.stream_ref {
        let at = crate::references::absolute(r, &ns);
        in_use::protect_stream(ctx, obj, &at, obj.spec.deletion_policy)
            .await
            .map_err(Stop::Failed)?;
    }
    let client = reach(ctx, obj, &conn, check_grant).await?;
    let name = obj.consumer_name().to_string();
    let what = format!("consumer {name} on stream {stream}");
    let info = jsapi::consumer_info(&client, &stream, &name)
        .await
        .map_err(|e| {
            Stop::NotReady(Blocked::new(
                reason::OBSERVE_FAILED,
                format!("reading {what}: {e}"),
            ))
        })?;
    ctx.shared.settled(obj);
    let config = info.as_ref().map(|i| i["config"].clone());
    let found = ownership::found(config.as_ref(), &obj.uid().unwrap_or_default());
    Ok(Gathered {
        client,
        stream,
        name,
        what,
        info,
        config,
        found,
    })
}

/// The plan phase: the lifecycle action and the config spec asks for.
fn plan(obj: &NatsConsumer, g: &Gathered) -> Result<Planned, Stop> {
    let action = lifecycle_policies::plan(obj.spec.adoption_policy, &g.found);
    let desired = consumer_config::desired(&g.name, &obj.spec, &obj.uid().unwrap_or_default())
        .map_err(|e| Stop::refused(reason::REJECTED, format!("{}: {e}", g.what)))?;
    Ok(Planned { action, desired })
}

/// The apply phase: the planned action carried out on the server.
async fn apply(
    ctx: &Context,
    obj: &NatsConsumer,
    g: &Gathered,
    p: &Planned,
    spec_edited: bool,
) -> Result<Written, Stop> {
    match p.action {
        Plan::Terminal(t) => {
            let message = terminal_message(&g.what, t, &g.found);
            Err(Stop::terminal(t.reason(), message.clone(), message))
        }
        Plan::Create | Plan::LateInitialize => put(g, p).await,
        Plan::AdoptIntoSpec => adopt_into_spec(obj, g).await,
        Plan::Update => update(ctx, obj, g, p, spec_edited).await,
    }
}

/// Create, or under AdoptOrCreate take over an unowned consumer by updating it with spec.
async fn put(g: &Gathered, p: &Planned) -> Result<Written, Stop> {
    let update = p.action != Plan::Create;
    let reply = jsapi::put_consumer(&g.client, &g.stream, &p.desired, update)
        .await
        .map_err(|e| Stop::unwritten(format!("writing {}: {e}", g.what), &e))?;
    let written = Written::in_sync(reply, &g.what);
    Ok(if p.action == Plan::LateInitialize {
        written.adopted(format!("{} existed unowned; adopted", g.what), None)
    } else {
        written
    })
}

/// Adopt: the server's config written into spec, then the consumer marked as owned.
async fn adopt_into_spec(obj: &NatsConsumer, g: &Gathered) -> Result<Written, Stop> {
    let what = &g.what;
    let refused = |e: String| Stop::refused(reason::REJECTED, e);
    let server = g.config.clone().unwrap_or(Value::Null);
    let adopted = consumer_config::spec_from_server(&obj.spec, &server)
        .map_err(|e| refused(format!("{what}: {e}")))?;
    let marked = consumer_config::desired(&g.name, &adopted, &obj.uid().unwrap_or_default())
        .map_err(|e| refused(format!("{what}: {e}")))?;
    let reply = jsapi::put_consumer(&g.client, &g.stream, &marked, true)
        .await
        .map_err(|e| Stop::unwritten(format!("adopting {what}: {e}"), &e))?;
    Ok(Written::in_sync(reply, what).adopted(
        format!("{what} existed unowned; adopted and its config written into spec"),
        serde_json::to_value(&adopted).ok(),
    ))
}

/// Update: spec compared with the server's config; drift corrected by an update, or by a
/// recreate where recreateOnImmutableChange allows it, and reported when spec did not change.
async fn update(
    ctx: &Context,
    obj: &NatsConsumer,
    g: &Gathered,
    p: &Planned,
    spec_edited: bool,
) -> Result<Written, Stop> {
    let what = &g.what;
    let server = g.config.clone().unwrap_or(Value::Null);
    let drift = drift::drifted(consumer_config::CONSUMER_FIELDS, &p.desired, &server);
    let decision = drift::decide(&drift, obj.spec.recreate_on_immutable_change);
    let report = lifecycle_policies::synced(&decision, spec_edited);
    let reply = match &decision {
        Decision::InSync => Ok(g.info.clone().unwrap_or(Value::Null)),
        Decision::Update(_) => jsapi::put_consumer(&g.client, &g.stream, &p.desired, true).await,
        Decision::Recreate(_) => recreate(g, p).await,
        Decision::Refused(fields) => {
            return Err(Stop::refused(
                reason::SYNC_FAILED,
                format!(
                    "{what}: nats-server cannot change {}; set recreateOnImmutableChange",
                    fields.join(", ")
                ),
            ));
        }
    }
    .map_err(|e| Stop::unwritten(format!("updating {what}: {e}"), &e))?;
    let mut written = Written::in_sync(reply, what);
    if report.drift_corrected_event {
        let m = format!(
            "{what} was changed out of band; corrected {}",
            report.fields.join(", ")
        );
        ctx.shared
            .events
            .publish(obj, true, reason::DRIFT_CORRECTED, m.clone())
            .await;
        written.synced = Decided::new(condition::SYNCED, report.status, report.reason, m);
    }
    Ok(written)
}

/// The consumer deleted and created again from spec (an immutable field changed).
async fn recreate(g: &Gathered, p: &Planned) -> Result<Value, jsapi::JsApiError> {
    jsapi::delete_consumer(&g.client, &g.stream, &g.name).await?;
    jsapi::put_consumer(&g.client, &g.stream, &p.desired, false).await
}

/// The observe phase: the outcome of the write.
fn observe(
    ctx: &Context,
    previous: &SyncStatus,
    g: &Gathered,
    p: &Planned,
    written: Written,
) -> Outcome {
    let server = server_state::of_consumer(&written.reply);
    // A consumer just made is still electing: its status.server is looked at again soon, as
    // a stream's is, not left showing a replica behind until the resync.
    let recheck = server_state::recheck_after(false, &written.reply, ctx.settings.resync);
    let mut outcome = written.outcome(p.action, previous.ownership.as_ref(), &g.what, server);
    outcome.requeue = Some(recheck);
    outcome
}

/// The cleanup path: a consumer whose stream resource is gone, or never bound, has nothing to
/// run its policy on, nor one whose NatsStream's deletion left no stream on the server (it says
/// so, Deleting=True DeletedOnServer: the consumer went with the stream); otherwise
/// deletionPolicy × the connection's state × ownership decides.
async fn cleanup(obj: Arc<NatsConsumer>, ctx: Arc<Context>) -> Result<Cleanup, Error> {
    let obj = &*obj;
    let ns = obj.namespace().unwrap_or_default();
    let (bound, resource) = target_and_stream(&ctx, obj).await?;
    if let ConsumerTarget::Bound { connection, stream } = bound {
        let state = connection_state(&ctx, obj, &connection).await?;
        if resource.as_ref().is_some_and(in_use::went_with_stream) {
            // Its NatsStream's Delete removed the stream, and the consumer with it, from the
            // server: nothing is left to reach (the servers may be gone since, issue 43).
            tracing::info!(
                "consumer {} on stream {stream}: went with its stream",
                obj.consumer_name()
            );
        } else if lifecycle_policies::dials_on_deletion(obj.spec.deletion_policy, state) {
            if let Err(e) = delete_on_server(&ctx, obj, &connection, &stream, state).await {
                // Its servers torn down with their namespace: the consumer goes with them.
                let conn = references::absolute(&connection, &ns);
                let Some(clusters) = super::torn_down::with_servers(&ctx, &conn).await else {
                    return Err(e);
                };
                let what = format!("consumer {} on stream {stream}", obj.consumer_name());
                super::torn_down::released(&ctx, obj, &what, &clusters).await;
            }
        } else if let Some(why) = in_use::not_run(obj.spec.deletion_policy, state, &connection) {
            let what = format!("consumer {} on stream {stream}", obj.consumer_name());
            in_use::released_without_policy(&ctx, obj, &what, &why).await;
        }
    }
    ctx.shared
        .metrics
        .forget("NatsConsumer", &ns, &obj.name_any());
    Ok(Cleanup::Done)
}

/// The consumer deleted on the server when this resource owns it.
async fn delete_on_server(
    ctx: &Context,
    obj: &NatsConsumer,
    conn: &nats_api::common::ObjectReference,
    stream: &str,
    state: ConnectionState,
) -> Result<(), Error> {
    let fail = |message: String| Error::Cleanup {
        object: describe(obj),
        message,
    };
    let client = reach(ctx, obj, conn, false)
        .await
        .map_err(|s| s.cleanup_error(obj))?;
    let name = obj.consumer_name().to_string();
    let info = jsapi::consumer_info(&client, stream, &name)
        .await
        .map_err(|e| fail(format!("reading consumer {name}: {e}")))?;
    let config = info.map(|i| i["config"].clone());
    let found = ownership::found(config.as_ref(), &obj.uid().unwrap_or_default());
    if lifecycle_policies::on_deletion(obj.spec.deletion_policy, state, &found)
        == lifecycle_policies::Cleanup::DeleteOnServer
    {
        jsapi::delete_consumer(&client, stream, &name)
            .await
            .map_err(|e| fail(format!("deleting consumer {name}: {e}")))?;
    }
    Ok(())
}

/// One reconcile under the JetStream finalizer (every consumer wants it).
async fn reconcile(
    obj: Arc<NatsConsumer>,
    ctx: Arc<Context>,
    store: Store<NatsConsumer>,
) -> Result<Action, Error> {
    // Within its NatsConnection's share of the slots ([`super::share`]): its own, or by
    // streamRef its stream's (from the index; the stream itself while the index lacks it).
    let conn = super::share::consumer_connection(&ctx, &obj);
    let (_slot, obj) = match super::share::turn(&ctx, obj, &conn, &store).await {
        Ok(turn) => turn,
        Err(then) => return Ok(then),
    };
    // Boxed: a pass waiting its turn holds only the few bytes above, however many wait.
    Box::pin(super::under_finalizer::under_finalizer(
        obj, ctx, live, cleanup,
    ))
    .await
}

/// The consumers waiting for `stream` by streamRef (not Ready): a NatsStream turning Ready binds
/// them at once.
fn waiting_for(store: &Store<NatsConsumer>, stream: &NatsStream) -> Vec<Arc<NatsConsumer>> {
    let ready = stream
        .status
        .as_ref()
        .is_some_and(|s| controller_kit::conditions::is_true(&s.conditions, condition::READY));
    if !ready {
        return Vec::new();
    }
    let ns = stream.namespace().unwrap_or_default();
    let name = stream.name_any();
    store
        .state()
        .into_iter()
        .filter(|o| {
            let own = o.namespace().unwrap_or_default();
            o.spec
                .stream_ref
                .as_ref()
                .is_some_and(|r| r.name == name && references::namespace_of(r, &own) == ns)
                && !controller_kit::conditions::is_true(
                    &previous_status(&**o).conditions,
                    condition::READY,
                )
        })
        .collect()
}

/// The NatsConsumer controller: its passes woken by their NatsStream turning Ready.
pub(super) async fn controller(ctx: Arc<Context>) {
    super::share::run_in_line(ctx, waiting_for, |_, _| (), reconcile).await;
}
