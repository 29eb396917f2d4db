//! The gather phase of a NatsClusterEvacuation's pass: the system connection reached, the JSZ
//! ping read (and left for the account balancers' Settled gate), the owners of its stream
//! groups read from the index ([`Gathered`]); or how the pass stopped ([`Stopped`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use controller_kit::conditions::Decided;
use controller_kit::reconcile::describe;
use nats_api::jetstream::{NatsClusterEvacuation, condition, reason};
use nats_wire::Wire;
use nats_wire::monitor::JszOptions;

use super::super::context::Context;
use super::super::error::Error;
use super::super::index;
use super::super::moves::{Reached, ping, reached};
use crate::balance::gate::Sighting;
use crate::evacuation_rules::Owner;
use crate::system_view::{SystemView, system_view};

/// What a pass works from.
pub(super) struct Gathered {
    pub wire: Wire,
    pub view: SystemView,
    pub owners: Vec<Owner>,
}

/// How a pass stopped before moving anything: Ready (and Holding) as they are to read.
pub(super) struct Stopped {
    pub ready: Decided,
    /// Whether it holds (Holding True, with Ready's reason and message).
    pub held: bool,
    /// When to look again.
    pub after: Duration,
}

impl Stopped {
    /// Ready=False with `reason` and `message`, not held, looked at again after `after`.
    pub fn ready_false(reason: &'static str, message: String, after: Duration) -> Self {
        Stopped {
            ready: Decided::new(condition::READY, false, reason, message),
            held: false,
            after,
        }
    }
}

/// What the gather phase came to.
pub(super) enum Gathering {
    /// Everything the pass judges from.
    Gathered(Box<Gathered>),
    /// Nothing to judge.
    Stopped(Stopped),
}

/// The gather phase; only a failure of the Kubernetes API is an error.
pub(super) async fn gather(ctx: &Context, obj: &NatsClusterEvacuation) -> Result<Gathering, Error> {
    // A backoff, counted only when the pass stops short.
    let stopped = |reason, message| {
        let after = ctx.shared.retry_later(obj);
        Ok(Gathering::Stopped(Stopped::ready_false(
            reason, message, after,
        )))
    };
    let client = match reached(ctx, obj, &obj.spec.connection_ref).await? {
        Reached::Client(c) => c,
        Reached::Not(reason, message) => return stopped(reason, message),
    };
    let wire = Wire::new(client);
    let options = JszOptions {
        accounts: true,
        streams: true,
        config: true,
        ..Default::default()
    };
    let conn = &obj.spec.connection_ref.name;
    let replies = match ping(ctx, &describe(obj), conn, &wire, &options).await {
        Ok(r) => r,
        Err(message) => return stopped(reason::OBSERVE_FAILED, message),
    };
    ctx.shared.settled(obj);
    let view = system_view(&replies);
    // The owners of every group the view holds (a group off the source with no owner is a
    // stale placement), from the index: no list of the three kinds per pass.
    let owners = match ctx.index.owners_of(index::groups_on(&view, None)).await {
        Ok(o) => o.into_iter().map(|i| i.owner).collect(),
        Err(e) => {
            let stopped =
                Stopped::ready_false(reason::PASS_FAILED, e.to_string(), index::FILL_WAIT);
            return Ok(Gathering::Stopped(stopped));
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
    Ok(Gathering::Gathered(Box::new(Gathered {
        wire,
        view,
        owners,
    })))
}
