//! NatsBalancer: evens one account's stream leaders (and, opted in, copies) within pools, over
//! the account's own connection (design §6.5; the pools are [`crate::balance::pools`]'s, the
//! account's view, Settled gate and yielding [`crate::balance::account`]'s, the move itself
//! [`crate::balance::next_move`]'s, the lease [`crate::lease`]'s). A pass, phase by phase
//! ([`live`]):
//!
//! 1. [`gather`] — the pools' selectors checked (one Kubernetes would refuse stops the pass:
//!    Ready=False PassFailed naming `spec.pools[i].selector…`; nothing moved); the connection
//!    reached (the reference reasons when not); the NATS cluster the connected server is in; the
//!    account (`$SYS.REQ.USER.INFO`, else its creds); the account's streams with their leader
//!    and copies (`$JS.API.STREAM.LIST`: an account cannot ping JSZ), and the consumers of
//!    those of the NATS cluster that have some (`$JS.API.CONSUMER.LIST.<stream>`); the
//!    NatsStreams, NatsKeyValues and NatsObjectStores owning them, from the index
//!    ([`super::index`]), assigned to pools: the first matching pool wins, Overlapping names
//!    resources matched by several; the rest, and streams with no resource, the default pool.
//! 2. [`observe`] — its own move (the last one, while it holds the NATS cluster's lease) judged
//!    done: MoveDone, the lease released; else Holding MovePending, and no judging.
//! 3. [`judge`] — pure ([`crate::balance::judge::account_verdict`]): Unsettled while a stream
//!    is leaderless, behind, offline or mid-move: the account's own, and, where a
//!    NatsSystemBalancer's or NatsClusterEvacuation's pass saw the NATS cluster lately, any
//!    account's placed there (the gate's scope is [`crate::balance::gate`]'s; judged from the
//!    account's own streams alone, its Holding message says so); streams under evacuation and
//!    those a NatsSystemBalancer has a move pending on skipped, and YieldingToSystemBalancer
//!    when the move it wants next is on one of the latter; else the first pool with a move, or
//!    Settled. A system balancer covering the same NATS cluster does not stop it otherwise:
//!    both balance, one move at a time (stories 07 and 09).
//! 4. [`act`] — the lease taken (MoveLeaseHeld while another, the system balancer included,
//!    holds it); a leader move as `$JS.API.STREAM.LEADER.STEPDOWN` (or
//!    `CONSUMER.LEADER.STEPDOWN` for a consumer's group) toward the chosen member, a placement
//!    move as `$JS.API.STREAM.PEER.REMOVE` of the copy on the busiest server (the meta leader
//!    places the new copy within the stream's NATS cluster and placement; never a stream whose
//!    resource or config sets `placement.cluster`, never an R1 stream's only copy). One move
//!    per pass; `interval` paces them.
//! 5. [`status`] — pools, lastMove, Ready, Holding and Overlapping; the skew and pending gauges.

mod act;
mod gather;
mod observe;
mod status;

use std::sync::Arc;
use std::time::Duration;

use controller_kit::finalizer::Cleanup;
use controller_kit::reconcile::{Read, describe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::jetstream::{GoDuration, NatsBalancer, condition, event, metric};

use super::context::{Context, controller_of};
use super::error::Error;
use act::act;
use gather::{Gathering, gather};
use observe::{Observed, judge, observe};
use status::{Stepped, write_status, write_stopped};

const KIND: &str = "NatsBalancer";

/// The pace of passes: `interval`, never below the floor ([`crate::pace`]).
pub(super) fn pace(interval: &GoDuration) -> Duration {
    crate::pace::pace(interval).every
}

/// The note of a pace not as the spec asks (below the floor, unreadable): `Some` for the
/// Ready message; published as an IntervalRaised Event when `previous_ready` does not carry it
/// yet (once per change, not once per pass).
pub(super) async fn note_pace<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    interval: &GoDuration,
    previous: &[Condition],
) -> Option<String> {
    let note = crate::pace::pace(interval).raised?;
    let told = previous
        .iter()
        .any(|c| c.type_ == condition::READY && c.message.contains(&note));
    if !told {
        ctx.shared
            .events
            .publish(obj, true, event::INTERVAL_RAISED, note.clone())
            .await;
    }
    Some(note)
}

/// `message`, with the pace's note when there is one.
pub(super) fn with_note(message: String, note: Option<&str>) -> String {
    match note {
        Some(n) => format!("{message}; {n}"),
        None => message,
    }
}

async fn reconcile(obj: Arc<NatsBalancer>, ctx: Arc<Context>) -> Result<Action, Error> {
    super::under_finalizer::under_finalizer(obj, ctx, live, cleanup).await
}

/// One pass: gather → observe → judge → act → status (see the module doc).
async fn live(obj: Arc<NatsBalancer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let previous = obj.status.clone().unwrap_or_default();
    let g = match gather(&ctx, &obj).await? {
        Gathering::Gathered(g) => g,
        Gathering::Stopped(stopped) => return write_stopped(&ctx, &obj, &previous, stopped).await,
    };
    let stepped = match observe(&ctx, &obj, &g, &previous).await {
        Observed::Pending(m) => Stepped::pending(m),
        Observed::Clear => act(&ctx, &obj, &g, judge(&ctx, &obj, &g), &previous).await,
    };
    write_status(&ctx, &obj, &g, &previous, stepped).await
}

/// Deletion: its leases released, its gauges removed. A pending move is left to finish (a
/// leader move cannot be undone; a replaced copy is placed within the NATS cluster anyway).
async fn cleanup(obj: Arc<NatsBalancer>, ctx: Arc<Context>) -> Result<Cleanup, Error> {
    ctx.leases.release_all(&describe(&*obj));
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let m = &ctx.shared.metrics;
    for p in obj.status.iter().flat_map(|s| &s.pools) {
        for gauge in [metric::BALANCER_LEADER_SKEW, metric::BALANCER_REPLICA_SKEW] {
            m.remove_gauge(
                gauge,
                &[("namespace", &ns), ("name", &name), ("pool", &p.name)],
            );
        }
    }
    for label in ["leader", "placement"] {
        m.remove_gauge(
            metric::BALANCER_PENDING_MOVES,
            &[("namespace", &ns), ("name", &name), ("move_kind", label)],
        );
    }
    m.forget(KIND, &ns, &name);
    Ok(Cleanup::Done)
}

/// The NatsBalancer controller; each pass reads the object fresh (its status carries the last
/// move, pending while it holds the lease).
pub(super) async fn controller(ctx: Arc<Context>) {
    // The watch is the controller's; the passes run on a client counting their requests. The
    // watch leaves out the echoes of the passes' own finalizer and status writes: a pass runs
    // on its interval, or on a change by someone else.
    let passes = ctx.for_passes(KIND);
    let controller = controller_of::<NatsBalancer>(&ctx, passes.clone());
    controller_kit::reconcile::run(controller, passes, Read::Fresh, reconcile).await;
}
