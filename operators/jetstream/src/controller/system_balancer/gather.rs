//! The gather phase of a NatsSystemBalancer's pass: the system connection reached, one JSZ
//! ping of its NATS cluster read as a [`SystemView`] (and left for the account balancers'
//! Settled gate), the accounts whose stepdown exports the system account reaches, the streams
//! whose resource pins a NATS cluster ([`Gathered`]); or Ready=False saying why not.

use std::collections::BTreeSet;
use std::time::Instant;

use controller_kit::conditions::Decided;
use controller_kit::reconcile::describe;
use nats_api::jetstream::{NatsSystemBalancer, condition, reason};
use nats_wire::monitor::JszOptions;
use nats_wire::{ServerFilter, Wire, WireError};

use super::super::context::Context;
use super::super::error::Error;
use super::super::index::{self, NotFilled};
use super::super::moves::{Reached, ping, reached};
use super::super::reach::nats_cluster;
use super::super::replica_divergence;
use crate::balance::gate::Sighting;
use crate::balance::judge::SystemSeen;
use crate::balance::pools::StreamKey;
use crate::divergence::Found;
use crate::system_view::{SystemView, system_view};

/// The stream a capability probe steps down: a name no account has (a `$`-free, valid name).
const PROBE_STREAM: &str = "nats-operator-stepdown-probe";

/// What a pass works from.
pub(super) struct Gathered {
    pub wire: Wire,
    pub cluster: String,
    pub view: SystemView,
    /// Accounts with groups in the cluster, and those whose stepdown export is reached, of
    /// streams and of consumers.
    pub accounts: BTreeSet<String>,
    pub reached: BTreeSet<String>,
    pub reached_consumers: BTreeSet<String>,
    /// The stream groups whose replicas diverge in this pass's answers.
    pub diverged: Found,
    /// The streams whose resource sets `placement.cluster`, or why the index could not say.
    pub pinned: Result<BTreeSet<StreamKey>, String>,
}

impl Gathered {
    /// What the judge phase reads.
    pub fn seen(&self) -> SystemSeen<'_> {
        SystemSeen {
            cluster: &self.cluster,
            view: &self.view,
            reached: &self.reached,
            reached_consumers: &self.reached_consumers,
            pinned: self.pinned.as_ref().map_err(String::as_str),
        }
    }
}

/// What the gather phase came to.
pub(super) enum Gathering {
    /// Everything the pass judges from.
    Gathered(Box<Gathered>),
    /// The NATS cluster cannot be judged: Ready=False as this says.
    Stopped(Decided),
}

fn stopped(reason: &'static str, message: String) -> Result<Gathering, Error> {
    Ok(Gathering::Stopped(Decided::new(
        condition::READY,
        false,
        reason,
        message,
    )))
}

/// The gather phase; only a failure of the Kubernetes API is an error.
pub(super) async fn gather(ctx: &Context, obj: &NatsSystemBalancer) -> Result<Gathering, Error> {
    let client = match reached(ctx, obj, &obj.spec.connection_ref).await? {
        Reached::Client(c) => c,
        Reached::Not(reason, message) => return stopped(reason, message),
    };
    let cluster = match nats_cluster(&client) {
        Ok(c) => c,
        Err((reason, message)) => return stopped(reason, message),
    };
    let wire = Wire::new(client);
    let options = JszOptions {
        filter: ServerFilter {
            cluster: cluster.clone(),
            exact_match: true,
            ..Default::default()
        },
        accounts: true,
        streams: true,
        consumer: true,
        config: true,
        ..Default::default()
    };
    let conn = &obj.spec.connection_ref.name;
    let replies = match ping(ctx, &describe(obj), conn, &wire, &options).await {
        Ok(r) => r,
        Err(message) => return stopped(reason::PASS_FAILED, message),
    };
    ctx.shared.settled(obj);
    let view = system_view(&replies);
    let diverged = replica_divergence::found(&replies, &view, &cluster);
    // Left for the account balancers' Settled gate (crate::balance::gate).
    let seen = Sighting::of(
        describe(obj),
        Instant::now(),
        view.clone(),
        &replies.replies,
    );
    ctx.moving.sight([cluster.as_str()], seen);
    let accounts: BTreeSet<String> = view
        .groups
        .iter()
        .filter(|g| g.cluster == cluster)
        .map(|g| g.account.clone())
        .collect();
    let (reached, reached_consumers) = probe(&wire, &view, &cluster, &accounts).await;
    let pinned = pinned(ctx, &view, &cluster)
        .await
        .map_err(|e| e.to_string());
    Ok(Gathering::Gathered(Box::new(Gathered {
        wire,
        cluster,
        view,
        accounts,
        reached,
        reached_consumers,
        diverged,
        pinned,
    })))
}

/// The accounts whose stepdown export of streams, and of consumers, the system account
/// reaches: a stepdown of [`PROBE_STREAM`] through each answered by the account's JetStream.
async fn probe(
    wire: &Wire,
    view: &SystemView,
    cluster: &str,
    accounts: &BTreeSet<String>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    // Answered by the account's JetStream: the import leads there.
    let answered =
        |r: Result<(), WireError>| matches!(r, Ok(()) | Err(WireError::JetStream { .. }));
    let with_consumers: BTreeSet<&str> = view
        .groups
        .iter()
        .filter(|g| g.cluster == cluster && g.consumer.is_some())
        .map(|g| g.account.as_str())
        .collect();
    let (mut reached, mut reached_consumers) = (BTreeSet::new(), BTreeSet::new());
    for a in accounts {
        let through = wire.clone().with_js_domain(a);
        if answered(through.stream_leader_stepdown(PROBE_STREAM, None).await) {
            reached.insert(a.clone());
        }
        // An account without consumers in the NATS cluster lacks nothing for them.
        let probe = PROBE_STREAM;
        if !with_consumers.contains(a.as_str())
            || answered(through.consumer_leader_stepdown(probe, probe, None).await)
        {
            reached_consumers.insert(a.clone());
        }
    }
    (reached, reached_consumers)
}

/// Streams whose resource sets placement.cluster, by the ownership marker of their groups: the
/// owners of the groups on NATS cluster `cluster`, from the index ([`super::super::index`]).
async fn pinned(
    ctx: &Context,
    view: &SystemView,
    cluster: &str,
) -> Result<BTreeSet<StreamKey>, NotFilled> {
    let uids: BTreeSet<String> = ctx
        .index
        .owners_of(index::groups_on(view, Some(cluster)))
        .await?
        .into_iter()
        .filter(|o| o.owner.placement_cluster.is_some())
        .map(|o| o.owner.uid)
        .collect();
    Ok(view
        .groups
        .iter()
        .filter(|g| g.owner.as_ref().is_some_and(|o| uids.contains(o)))
        .map(|g| (g.account.clone(), g.stream.clone()))
        .collect())
}
