//! NatsClusterEvacuation: every stream group off `from.cluster`, one `ACCOUNT.STREAM.MOVE` at a
//! time, to servers carrying `to.serverTags` (design §6.6; the rules are
//! [`crate::evacuation_rules`]'s). A pass, phase by phase ([`live`]):
//!
//! 1. [`gather`] — the system connection reached, one JSZ ping across the NATS system (accounts,
//!    streams, configs) read as a [`SystemView`](crate::system_view::SystemView), and the
//!    NatsStream, NatsKeyValue and NatsObjectStore owning its stream groups read from the index
//!    ([`super::index`], no list) as their [`Owner`](crate::evacuation_rules::Owner)s.
//! 2. [`refuse`] — a server of the source carrying the target tags: no move, ever, until it
//!    does not (Event EvacuationRefused).
//! 3. [`hold`] — a server down or the meta group leaderless: no move made, none counted done
//!    (Holding ServersDown).
//! 4. [`judge`] — pure ([`crate::evacuation_rules::plan`]): moves requested earlier judged, the next
//!    one chosen (streams whose move was refused lately passed over).
//! 5. [`apply`] — the next move requested (Event MoveStarted; MoveRefused when the meta leader
//!    refuses it), each move found done announced (MoveDone).
//! 6. [`status`] — counts, requested, pinned, stale placements, Ready and Holding; the gauges
//!    of what remains.
//!
//! A pass that stopped short ([`Stopped`](gather::Stopped)) still writes Ready with its reason
//! and keeps the counts it had. Deletion ([`cleanup`]) cancels every move still requested with
//! CANCEL_MOVE; a connection gone or no longer granted releases the finalizer without it.

mod act;
mod cleanup;
mod gather;
mod status;

use std::sync::Arc;
use std::time::Duration;

use controller_kit::reconcile::Read;
use kube::runtime::controller::Action;
use nats_api::jetstream::NatsClusterEvacuation;

use super::context::{Context, controller_of};
use super::error::Error;
use act::{apply, hold, judge, refuse};
use cleanup::cleanup;
use gather::{Gathering, gather};
use status::{write_status, write_stopped};

/// How often a pass looks again while a move is on its way or groups remain: a move is
/// seen done (and the next one requested) at most this long after it is.
pub const MOVE_POLL: Duration = Duration::from_secs(1);

/// How long a stream whose move nats-server refused is passed over before it is asked again
/// (one request, and one MoveRefused Event, per stream per period instead of one a second).
pub const REFUSED_RETRY: Duration = Duration::from_secs(60);

const KIND: &str = "NatsClusterEvacuation";

async fn reconcile(obj: Arc<NatsClusterEvacuation>, ctx: Arc<Context>) -> Result<Action, Error> {
    super::under_finalizer::under_finalizer(obj, ctx, live, cleanup).await
}

/// One pass: gather → refuse → hold → judge → apply → status (see the module doc).
async fn live(obj: Arc<NatsClusterEvacuation>, ctx: Arc<Context>) -> Result<Action, Error> {
    let previous = obj.status.clone().unwrap_or_default();
    let g = match gather(&ctx, &obj).await? {
        Gathering::Gathered(g) => g,
        Gathering::Stopped(stopped) => return write_stopped(&ctx, &obj, &previous, stopped).await,
    };
    let held = refuse(&ctx, &obj, &g.view).await;
    if let Some(stopped) = held.or_else(|| hold(&ctx, &obj, &g.view)) {
        return write_stopped(&ctx, &obj, &previous, stopped).await;
    }
    let plan = judge(&ctx, &obj, &g, &previous);
    let moved = previous.moved + plan.done.len() as u32;
    let carried = apply(&ctx, &obj, &g.wire, plan).await;
    write_status(&ctx, &obj, &previous, carried, moved).await
}

/// The NatsClusterEvacuation controller. Each pass reads the object fresh: its status carries
/// the moves requested, which a stale copy would request again.
pub(super) async fn controller(ctx: Arc<Context>) {
    // The watch is the controller's; the passes run on a client counting their requests. The
    // watch leaves out the echoes of the passes' own finalizer and status writes: a pass runs
    // on its interval, or on a change by someone else.
    let passes = ctx.for_passes(KIND);
    let controller = controller_of::<NatsClusterEvacuation>(&ctx, passes.clone());
    controller_kit::reconcile::run(controller, passes, Read::Fresh, reconcile).await;
}
