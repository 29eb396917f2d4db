//! NatsSystemBalancer: evens leaders (and, opted in, copies) over every account of the NATS
//! cluster its system connection reaches (design §6.5; the rules are [`crate::balance`]'s, the
//! lease [`crate::lease`]'s). A pass, phase by phase ([`live`]):
//!
//! 1. [`gather`] — the system connection reached; the NATS cluster it reaches (the server it is
//!    connected to says); one JSZ ping filtered to that NATS cluster, asked for consumers too →
//!    [`SystemView`](crate::system_view::SystemView), stream and consumer groups; which
//!    accounts' jetstream-stepdown exports (of streams, of consumers) the system account
//!    reaches (a stepdown of a stream no account has is answered 404 through the import, and
//!    by nobody without it); the streams whose resource sets `placement.cluster`, from the
//!    index ([`super::index`]).
//! 2. [`refuse`] — a second NatsSystemBalancer for the same NATS cluster (the older wins):
//!    DuplicateBalancer; a NATS cluster of one server: NotClustered.
//! 3. [`observe`] — moves pending judged done ([`crate::balance::move_done`]: the leader of the
//!    stream's or consumer's group left `from`; the copy left `from` and the group is as its
//!    config asks), MoveDone; a leader move found undone (led by `from` again) in
//!    [`crate::lease::abandon_after`] passes in a row given up
//!    ([`crate::lease::judge_pending`]): MoveAbandoned, and no move this pass, so another
//!    balancer of the NATS cluster may take the lease first.
//! 4. judge — pure ([`crate::balance::judge::system_verdict`]): Unsettled; the next move
//!    ([`crate::balance::next_move`], streams under evacuation skipped), or Settled.
//! 5. [`act`] — the lease renewed while a move is pending (MovePending), released otherwise;
//!    else taken (MoveLeaseHeld while another holds it) and the move requested: a leader move
//!    as a stepdown through the account's export toward the chosen member
//!    (`$JS.<account>.API.STREAM.LEADER.STEPDOWN.<stream>`, or
//!    `CONSUMER.LEADER.STEPDOWN.<stream>.<consumer>` for a consumer's group), a placement move
//!    as ACCOUNT.STREAM.MOVE off the server within the NATS cluster (MoveStarted,
//!    MoveRefused).
//! 6. [`status`] — capabilities, servers, skew, lastMove, pending, Ready, Holding and the
//!    replicas' consistency; the skew and pending gauges. The next pass comes after
//!    `interval`.

mod act;
mod gather;
mod observe;
mod refuse;
mod status;

use std::sync::Arc;
use std::time::Duration;

use controller_kit::finalizer::Cleanup;
use controller_kit::reconcile::{Read, describe};
use kube::runtime::controller::Action;
use nats_api::jetstream::{GoDuration, NatsSystemBalancer};

use super::context::{Context, controller_of};
use super::error::Error;
use super::lock::lock;
use super::replica_divergence;
use crate::balance::judge::system_verdict;
use act::{Written, act, balancing};
use gather::{Gathering, gather};
use observe::observe;
use refuse::refuse;
use status::{forget_gauges, write_status, write_stopped};

const KIND: &str = "NatsSystemBalancer";
/// How soon a pass with a move pending looks again.
const PENDING_POLL: Duration = Duration::from_secs(2);

async fn reconcile(obj: Arc<NatsSystemBalancer>, ctx: Arc<Context>) -> Result<Action, Error> {
    super::under_finalizer::under_finalizer(obj, ctx, live, cleanup).await
}

/// The pace of passes ([`super::balancer::pace`]).
fn interval(obj: &NatsSystemBalancer) -> Duration {
    super::balancer::pace(&obj.spec.interval)
}

/// One pass: gather → refuse → observe → judge → act → status (see the module doc).
async fn live(obj: Arc<NatsSystemBalancer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let previous = obj.status.clone().unwrap_or_default();
    let g = match gather(&ctx, &obj).await? {
        Gathering::Gathered(g) => g,
        Gathering::Stopped(ready) => return write_stopped(&ctx, &obj, &previous, ready).await,
    };
    let written = match refuse(&ctx, &obj, &g) {
        Some(refusal) => Written::refused(refusal, &previous, interval(&obj)),
        None => {
            let observed = observe(&ctx, &obj, &g, &previous).await;
            let ready = balancing(&ctx, &obj, &g, &previous).await;
            let every = GoDuration::from(interval(&obj)).0;
            let skip = ctx.moving.under_evacuation();
            let verdict = system_verdict(&g.seen(), skip, &obj.spec.moves, &every);
            act(&ctx, &obj, &g, &previous, ready, observed, verdict).await
        }
    };
    write_status(&ctx, &obj, &g, &previous, written).await
}

/// Deletion: its claim and lease dropped, its gauges removed. A pending move is left to finish
/// (a leader move cannot be undone; a placement move within the cluster is harmless).
async fn cleanup(obj: Arc<NatsSystemBalancer>, ctx: Arc<Context>) -> Result<Cleanup, Error> {
    let me = describe(&*obj);
    let claim = lock(&ctx.moving.system_balancers).remove(&me);
    ctx.census.forget(&me);
    ctx.moving.unsight(&me);
    if let Some(c) = claim {
        ctx.leases.release(&c.cluster, &me);
    }
    ctx.leases.keep_undone(&me, &[]);
    replica_divergence::forget(&ctx, &obj);
    forget_gauges(&ctx, &obj, KIND);
    Ok(Cleanup::Done)
}

/// The NatsSystemBalancer controller; each pass reads the object fresh (its status carries the
/// moves pending).
pub(super) async fn controller(ctx: Arc<Context>) {
    // The watch is the controller's; the passes run on a client counting their requests. The
    // watch leaves out the echoes of the passes' own finalizer and status writes: a pass runs
    // on its interval, or on a change by someone else.
    let passes = ctx.for_passes(KIND);
    let controller = controller_of::<NatsSystemBalancer>(&ctx, passes.clone());
    controller_kit::reconcile::run(controller, passes, Read::Fresh, reconcile).await;
}
