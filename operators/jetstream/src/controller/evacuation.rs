//! NatsClusterEvacuation: every stream group off `from.cluster`, one `ACCOUNT.STREAM.MOVE` at a
//! time, to servers carrying `to.serverTags` (design §6.6; the rules are
//! [`crate::evacuation`]'s). A pass, phase by phase:
//!
//! 1. [`gather`] — the system connection reached, one JSZ ping across the NATS system (accounts,
//!    streams, configs) read as a [`SystemView`], and the NatsStream, NatsKeyValue and
//!    NatsObjectStore owning its stream groups read from the index ([`super::index`], no list)
//!    as their [`Owner`]s → [`Gathered`].
//! 2. [`refuse`] — a server of the source carrying the target tags: no move, ever, until it
//!    does not (Event EvacuationRefused).
//! 3. [`hold`] — a server down or the meta group leaderless: no move made, none counted done
//!    (Holding ServersDown).
//! 4. plan — [`evacuation::plan`]: moves requested earlier judged, the next one chosen.
//! 5. [`apply`] — the next move requested (Event MoveStarted; MoveRefused when the meta leader
//!    refuses it), each move found done announced (MoveDone).
//! 6. [`write`] — status: counts, requested, pinned, stale placements, Ready and Holding; the
//!    gauges of what remains.
//!
//! A pass that stopped short ([`Stopped`]) still writes Ready with its reason and keeps the
//! counts it had. Deletion ([`cleanup`]) cancels every move still requested with CANCEL_MOVE;
//! a connection gone or no longer granted releases the finalizer without it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_kit::conditions::{self, Decided};
use controller_kit::finalizer::{self, Cleanup};
use controller_kit::reconcile::{Read, describe};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use nats_api::jetstream::{
    FINALIZER, NatsClusterEvacuation, NatsClusterEvacuationStatus, condition, event, metric, reason,
};
use nats_wire::jsapi::StreamMove;
use nats_wire::monitor::JszOptions;
use nats_wire::{Wire, WireError};

use super::context::{Context, lock, watch_config};
use super::error::{Error, kube_err};
use super::reach::{connection_state, reach, reach_or_why};
use crate::balance::gate::Sighting;
use crate::evacuation::{self, EvacuationPlan, Owner};
use crate::lifecycle::ConnectionState;
use crate::references;
use crate::system_view::{SystemView, system_view};

/// How often a pass looks again while a move is on its way or groups remain: a move is
/// seen done (and the next one requested) at most this long after it is.
pub const MOVE_POLL: Duration = Duration::from_secs(1);

/// How long a stream whose move nats-server refused is passed over before it is asked again
/// (one request, and one MoveRefused Event, per stream per period instead of one a second).
pub const REFUSED_RETRY: Duration = Duration::from_secs(60);

const KIND: &str = "NatsClusterEvacuation";

/// What a pass works from.
struct Gathered {
    wire: Wire,
    view: SystemView,
    owners: Vec<Owner>,
}

/// How a pass stopped before moving anything: Ready (and Holding) as they are to read.
struct Stopped {
    ready: Decided,
    /// Whether it holds (Holding True, with Ready's reason and message).
    held: bool,
    /// When to look again.
    after: Duration,
}

async fn reconcile(obj: Arc<NatsClusterEvacuation>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<NatsClusterEvacuation> = Api::namespaced(
        ctx.shared.client.clone(),
        &obj.namespace().unwrap_or_default(),
    );
    let c = ctx.clone();
    finalizer::reconcile(
        &api,
        FINALIZER,
        obj,
        true,
        |o| live(o, c),
        |o| cleanup(o, ctx),
    )
    .await
}

/// The live path: the phases, then status.
async fn live(obj: Arc<NatsClusterEvacuation>, ctx: Arc<Context>) -> Result<Action, Error> {
    let previous = obj.status.clone().unwrap_or_default();
    match phases(&obj, &ctx, &previous).await {
        Ok((plan, moved)) => {
            let after = if plan.in_flight.is_empty() && plan.remaining == 0 {
                ctx.settings.resync
            } else {
                MOVE_POLL
            };
            let ready = evacuation::ready(&plan, moved, &obj.spec.from.cluster);
            let moving = plan
                .in_flight
                .iter()
                .map(|r| (r.account.clone(), r.stream.clone()))
                .collect();
            lock(&ctx.moving.evacuations).insert(describe(&*obj), moving);
            let status = NatsClusterEvacuationStatus {
                observed_generation: obj.metadata.generation,
                conditions: merged(&previous, obj.metadata.generation, &ready, false),
                moved,
                in_flight: plan.in_flight.len() as u32,
                remaining: plan.remaining,
                requested: plan.in_flight,
                pinned: plan.pinned,
                stale_placement: plan.stale,
            };
            write(&ctx, &obj, status).await?;
            Ok(Action::requeue(after))
        }
        Err(Ok(stopped)) => {
            let status = NatsClusterEvacuationStatus {
                observed_generation: obj.metadata.generation,
                conditions: merged(
                    &previous,
                    obj.metadata.generation,
                    &stopped.ready,
                    stopped.held,
                ),
                ..previous.clone()
            };
            write(&ctx, &obj, status).await?;
            Ok(Action::requeue(stopped.after))
        }
        Err(Err(e)) => Err(e),
    }
}

/// The phases of a live pass (see the module doc): the plan as carried out and the total moved,
/// or how the pass stopped.
async fn phases(
    obj: &NatsClusterEvacuation,
    ctx: &Context,
    previous: &NatsClusterEvacuationStatus,
) -> Result<(EvacuationPlan, u32), Result<Stopped, Error>> {
    let g = gather(ctx, obj).await?;
    refuse(ctx, obj, &g.view).await.map_err(Ok)?;
    hold(ctx, obj, &g.view).map_err(Ok)?;
    let refused = refused_lately(ctx, obj);
    let plan = evacuation::plan(
        &g.view,
        &obj.spec.from.cluster,
        &g.owners,
        &previous.requested,
        &refused,
    );
    let moved = previous.moved + plan.done.len() as u32;
    Ok((apply(ctx, obj, &g.wire, plan).await, moved))
}

/// The streams of this evacuation whose move nats-server refused within [`REFUSED_RETRY`];
/// older refusals forgotten.
fn refused_lately(ctx: &Context, obj: &NatsClusterEvacuation) -> BTreeSet<(String, String)> {
    let mut all = lock(&ctx.moving.refused);
    let mine = all.entry(describe(obj)).or_default();
    mine.retain(|_, at| at.elapsed() < REFUSED_RETRY);
    mine.keys().cloned().collect()
}

/// The gather phase: the connection reached, the JSZ ping read, the owners listed.
async fn gather(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
) -> Result<Gathered, Result<Stopped, Error>> {
    let client = reach_or_why(ctx, obj, &obj.spec.connection_ref)
        .await
        .map_err(|why| why.map(|(reason, message)| not_reached(ctx, obj, reason, message)))?;
    let wire = Wire::new(client);
    let options = JszOptions {
        accounts: true,
        streams: true,
        config: true,
        ..Default::default()
    };
    let replies = match ctx.census.ping(&describe(obj), &wire, &options).await {
        Ok(r) if !r.replies.is_empty() => r,
        Ok(_) | Err(WireError::NoResponders { .. }) | Err(WireError::Timeout { .. }) => {
            return Err(Ok(observe_failed(
                ctx,
                obj,
                format!(
                    "no server answered $SYS.REQ.SERVER.PING.JSZ over NatsConnection {}: \
                     spec.connectionRef must name a connection with system account credentials",
                    obj.spec.connection_ref.name
                ),
            )));
        }
        Err(e) => return Err(Ok(observe_failed(ctx, obj, format!("the JSZ ping: {e}")))),
    };
    ctx.shared.settled(obj);
    let view = system_view(&replies);
    // The owners of every group the view holds (a group off the source with no owner is a
    // stale placement), from the index: no list of the three kinds per pass.
    let owners = match ctx
        .index
        .owners_of(super::index::groups_on(&view, None))
        .await
    {
        Ok(o) => o.into_iter().map(|i| i.owner).collect(),
        Err(e) => {
            return Err(Ok(Stopped {
                ready: Decided::new(condition::READY, false, reason::PASS_FAILED, e.to_string()),
                held: false,
                after: super::index::FILL_WAIT,
            }));
        }
    };
    // Left for the account balancers' Settled gate (crate::balance::gate), for every NATS
    // cluster that answered.
    let clusters: BTreeSet<String> = view.servers.iter().map(|s| s.cluster.clone()).collect();
    let seen = Sighting::of(
        describe(obj),
        Instant::now(),
        view.clone(),
        &replies.replies,
    );
    ctx.moving.sight(clusters.iter().map(String::as_str), seen);
    Ok(Gathered { wire, view, owners })
}

/// The connection not reached: Ready False with its reason, looked at again after a backoff.
fn not_reached(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    why: &'static str,
    message: String,
) -> Stopped {
    Stopped {
        ready: Decided::new(condition::READY, false, why, message),
        held: false,
        after: ctx.shared.retry_later(obj),
    }
}

fn observe_failed(ctx: &Context, obj: &NatsClusterEvacuation, message: String) -> Stopped {
    Stopped {
        ready: Decided::new(condition::READY, false, reason::OBSERVE_FAILED, message),
        held: false,
        after: ctx.shared.retry_later(obj),
    }
}

/// The refuse phase: a source server carrying the target tags refuses the evacuation.
async fn refuse(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    view: &SystemView,
) -> Result<(), Stopped> {
    let Some(message) = evacuation::refusal(view, &obj.spec.from.cluster, &obj.spec.to.server_tags)
    else {
        return Ok(());
    };
    ctx.shared
        .events
        .publish(obj, true, event::EVACUATION_REFUSED, message.clone())
        .await;
    Err(Stopped {
        ready: Decided::new(
            condition::READY,
            false,
            reason::SOURCE_CARRIES_TARGET_TAGS,
            message,
        ),
        held: false,
        after: ctx.settings.resync,
    })
}

/// The hold phase: while servers are down no move is made and none counted done.
fn hold(ctx: &Context, obj: &NatsClusterEvacuation, view: &SystemView) -> Result<(), Stopped> {
    let Some(why) = evacuation::servers_down(view, &obj.spec.from.cluster) else {
        return Ok(());
    };
    let message = format!("no move while servers are down: {why}");
    Err(Stopped {
        ready: Decided::new(condition::READY, false, reason::SERVERS_DOWN, message),
        held: true,
        after: ctx.shared.retry_later(obj),
    })
}

/// The apply phase: moves found done announced, the next move requested.
async fn apply(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    wire: &Wire,
    plan: EvacuationPlan,
) -> EvacuationPlan {
    let from = &obj.spec.from.cluster;
    for done in &plan.done {
        let message = format!(
            "stream {} of account {} moved off {from}",
            done.stream, done.account
        );
        ctx.shared
            .events
            .publish(obj, false, event::MOVE_DONE, message)
            .await;
    }
    let Some((account, stream)) = plan.next.clone() else {
        return plan;
    };
    let request = StreamMove::to_tags(obj.spec.to.server_tags.iter().cloned());
    match wire.account_stream_move(&account, &stream, &request).await {
        Ok(_) => {
            let message = format!(
                "ACCOUNT.STREAM.MOVE of stream {stream} of account {account} off {from} to \
                 servers tagged {}",
                obj.spec.to.server_tags.join(", ")
            );
            ctx.shared
                .events
                .publish(obj, false, event::MOVE_STARTED, message)
                .await;
            plan.requested(conditions::now())
        }
        Err(e) => {
            let message =
                format!("ACCOUNT.STREAM.MOVE of stream {stream} of account {account}: {e}");
            tracing::warn!(object = %describe(obj), "{message}");
            ctx.shared
                .events
                .publish(obj, true, event::MOVE_REFUSED, message)
                .await;
            lock(&ctx.moving.refused)
                .entry(describe(obj))
                .or_default()
                .insert((account.clone(), stream.clone()), Instant::now());
            let mut refused = plan.refused.clone();
            refused.push((account, stream));
            EvacuationPlan {
                next: None,
                refused,
                ..plan
            }
        }
    }
}

/// Ready (and Holding, when held, with Ready's reason and message) over the previous
/// conditions; Holding removed otherwise.
fn merged(
    previous: &NatsClusterEvacuationStatus,
    generation: Option<i64>,
    ready: &Decided,
    held: bool,
) -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    let holding = held.then(|| Decided {
        type_: condition::HOLDING,
        status: true,
        ..ready.clone()
    });
    let set: Vec<Decided> = std::iter::once(ready.clone()).chain(holding).collect();
    conditions::merge(
        &previous.conditions,
        generation,
        &set,
        &[condition::HOLDING],
        &conditions::now(),
    )
}

/// The write-status phase: the status applied and the gauges of what remains set.
async fn write(
    ctx: &Context,
    obj: &NatsClusterEvacuation,
    status: NatsClusterEvacuationStatus,
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let labels = [("namespace", ns.as_str()), ("name", name.as_str())];
    let m = &ctx.shared.metrics;
    m.set_gauge(
        metric::EVACUATION_REMAINING,
        "Stream groups an evacuation has still to move off its source (in flight included).",
        &labels,
        f64::from(status.remaining + status.in_flight),
    );
    m.set_gauge(
        metric::EVACUATION_STALE_PLACEMENTS,
        "Moved stream groups with no resource whose config still names the evacuated cluster.",
        &labels,
        status.stale_placement.len() as f64,
    );
    ctx.shared
        .write_status(obj, &status)
        .await
        .map_err(kube_err(obj))?;
    Ok(())
}

/// Deletion: every move still requested cancelled (CANCEL_MOVE), then the finalizer released.
/// A connection gone or no longer granted releases it without; one that cannot be reached, or
/// a cancellation that gets no answer, keeps it and is retried.
async fn cleanup(obj: Arc<NatsClusterEvacuation>, ctx: Arc<Context>) -> Result<Cleanup, Error> {
    let obj = &*obj;
    let ns = obj.namespace().unwrap_or_default();
    let requested = obj
        .status
        .as_ref()
        .map(|s| s.requested.clone())
        .unwrap_or_default();
    let conn = references::absolute(&obj.spec.connection_ref, &ns);
    if !requested.is_empty() && connection_state(&ctx, obj, &conn).await? == ConnectionState::Usable
    {
        let client = reach(&ctx, obj, &conn, false)
            .await
            .map_err(|s| s.cleanup_error(obj))?;
        let wire = Wire::new(client);
        for r in &requested {
            match wire.account_stream_cancel_move(&r.account, &r.stream).await {
                Ok(_) => {
                    let message = format!(
                        "CANCEL_MOVE of stream {} of account {}: the evacuation was deleted",
                        r.stream, r.account
                    );
                    ctx.shared
                        .events
                        .publish(obj, false, event::MOVE_CANCELLED, message)
                        .await;
                }
                // Answered with an error: no move pending any more (done, or the stream gone).
                Err(WireError::JetStream { description, .. }) => {
                    tracing::info!(object = %describe(obj), stream = %r.stream,
                        "nothing to cancel: {description}");
                }
                Err(e) => {
                    return Err(Error::Cleanup {
                        object: describe(obj),
                        message: format!("CANCEL_MOVE of stream {}: {e}", r.stream),
                    });
                }
            }
        }
    }
    let m = &ctx.shared.metrics;
    let name = obj.name_any();
    let labels = [("namespace", ns.as_str()), ("name", name.as_str())];
    m.remove_gauge(metric::EVACUATION_REMAINING, &labels);
    m.remove_gauge(metric::EVACUATION_STALE_PLACEMENTS, &labels);
    m.forget(KIND, &ns, &name);
    lock(&ctx.moving.evacuations).remove(&describe(obj));
    lock(&ctx.moving.refused).remove(&describe(obj));
    ctx.moving.unsight(&describe(obj));
    ctx.census.forget(&describe(obj));
    Ok(Cleanup::Done)
}

/// The NatsClusterEvacuation controller. Each pass reads the object fresh: its status carries
/// the moves requested, which a stale copy would request again.
pub(super) async fn controller(ctx: Arc<Context>) {
    let client = ctx.shared.client.clone();
    let controller = controller_kit::watch::controller::<NatsClusterEvacuation>(
        &client,
        &ctx.shared.scope,
        watch_config(),
    );
    // The watch is the controller's; the passes run on a client counting their requests.
    let passes = ctx.for_passes(KIND);
    controller_kit::reconcile::run(controller, passes, Read::Fresh, reconcile).await;
}
