//! NatsSystemBalancer: evens leaders (and, opted in, copies) over every account of the NATS
//! cluster its system connection reaches (design §6.5; the rules are [`crate::balance`]'s, the
//! lease [`crate::lease`]'s). A pass, phase by phase:
//!
//! 1. [`gather`] — the system connection reached; the NATS cluster it reaches (the server it is
//!    connected to says); one JSZ ping filtered to that NATS cluster, asked for consumers too →
//!    [`SystemView`], stream and consumer groups; which accounts' jetstream-stepdown exports
//!    (of streams, of consumers) the system account reaches (a stepdown of a stream no account
//!    has is answered 404 through the import, and by nobody without it).
//! 2. [`refuse`] — a second NatsSystemBalancer for the same NATS cluster (the older wins):
//!    DuplicateBalancer; a NATS cluster of one server: NotClustered.
//! 3. observe — moves pending judged done ([`balance::move_done`]: the leader of the stream's or
//!    consumer's group left `from`; the copy left `from` and the group is as its config asks),
//!    MoveDone, the lease released; a leader move found undone (led by `from` again) in
//!    [`crate::lease::abandon_after`] passes in a row given up ([`crate::lease::judge_pending`]):
//!    MoveAbandoned, the lease released, and no move this pass, so another balancer of the NATS
//!    cluster may take the lease first.
//! 4. hold — Unsettled, MovePending, MoveLeaseHeld (Holding True, no move).
//! 5. plan and apply — [`balance::next_move`]; the lease taken; a leader move as a stepdown
//!    through the account's export toward the chosen member (`$JS.<account>.API.STREAM.LEADER.
//!    STEPDOWN.<stream>`, or `CONSUMER.LEADER.STEPDOWN.<stream>.<consumer>` for a consumer's
//!    group), a placement move as ACCOUNT.STREAM.MOVE off the server within the NATS cluster
//!    (MoveStarted, MoveRefused).
//! 6. write status — capabilities, servers, skew, lastMove, pending, Ready and Holding; the
//!    skew and pending gauges. The next pass comes after `interval`.

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
    FINALIZER, Move, MoveKind, NatsSystemBalancer, NatsSystemBalancerStatus, condition, event,
    metric, reason,
};
use nats_wire::jsapi::StreamMove;
use nats_wire::monitor::{JszOptions, Placement};
use nats_wire::{ServerFilter, Wire, WireError};

use super::context::{Context, SystemClaim, claim_winner, lock, watch_config};
use super::error::Error;
use super::reach::{Why, nats_cluster, reach_or_why};
use super::replica_divergence;
use super::system_balancer_status::{forget_gauges, merged, write};
use crate::balance::gate::Sighting;
use crate::balance::{self, PlannedMove, Scope};
use crate::divergence::{self, Divergence};
use crate::lease;
use crate::system_view::{SystemView, system_view};

const KIND: &str = "NatsSystemBalancer";
/// The stream a capability probe steps down: a name no account has (a `$`-free, valid name).
const PROBE_STREAM: &str = "nats-operator-stepdown-probe";
/// How soon a pass with a move pending looks again.
const PENDING_POLL: Duration = Duration::from_secs(2);

/// Whether a pending move is undone: a leader move whose group is led by `from` again. A
/// placement move is never judged undone (the copy's way back is a move of its own).
fn undone(view: &SystemView, m: &Move) -> bool {
    m.kind == MoveKind::Leader
        && view.groups.iter().any(|g| {
            m.account.as_deref().is_none_or(|a| a == g.account)
                && g.stream == m.stream
                && g.consumer == m.consumer
                && Some(g.leader.as_str()) == m.from.as_deref()
        })
}

/// The key a pending move's undone passes are counted under.
fn undone_key(me: &str, m: &Move) -> String {
    format!(
        "{me}|{}|{}|{}|{}",
        m.account.as_deref().unwrap_or_default(),
        m.stream,
        m.consumer.as_deref().unwrap_or_default(),
        m.from.as_deref().unwrap_or_default()
    )
}

/// What a pass works from.
struct Gathered {
    wire: Wire,
    cluster: String,
    view: SystemView,
    /// Accounts with groups in the cluster, and those whose stepdown export is reached, of
    /// streams and of consumers.
    accounts: BTreeSet<String>,
    reached: BTreeSet<String>,
    reached_consumers: BTreeSet<String>,
    /// The stream groups whose replicas diverge in this pass's answers.
    diverged: Vec<(String, String, Divergence)>,
}

/// The parts of status every pass writes, from what it found.
struct Written {
    ready: Decided,
    holding: Option<Decided>,
    pending: Vec<Move>,
    last_move: Option<Move>,
    after: Duration,
}

async fn reconcile(obj: Arc<NatsSystemBalancer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<NatsSystemBalancer> = Api::namespaced(
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

/// The pace of passes ([`super::balancer::pace`]).
fn interval(obj: &NatsSystemBalancer) -> Duration {
    super::balancer::pace(&obj.spec.interval)
}

/// The live path: the phases, then status.
async fn live(obj: Arc<NatsSystemBalancer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let previous = obj.status.clone().unwrap_or_default();
    let g = match gather(&ctx, &obj).await {
        Ok(g) => g,
        Err(Ok((why, message))) => {
            let status = NatsSystemBalancerStatus {
                observed_generation: obj.metadata.generation,
                conditions: merged(
                    &previous,
                    obj.metadata.generation,
                    &Decided::new(condition::READY, false, why, message),
                    None,
                    None,
                ),
                ..previous.clone()
            };
            write(&ctx, &obj, &status, "").await?;
            return Ok(Action::requeue(ctx.shared.retry_later(&*obj)));
        }
        Err(Err(e)) => return Err(e),
    };
    let loads = balance::loads(&g.view, &g.cluster);
    let skew = balance::judged_skew(&g.view, &g.cluster);
    let capabilities = balance::capabilities(&g.accounts, &g.reached, &g.reached_consumers);
    let w = match refuse(&ctx, &obj, &g) {
        Some(ready) => Written {
            ready,
            holding: None,
            pending: previous.pending.clone(),
            last_move: previous.last_move.clone(),
            after: interval(&obj),
        },
        None => step(&ctx, &obj, &g, &previous).await,
    };
    let diverged = divergence::carried(&previous.diverged, &g.diverged);
    let consistent = divergence::consistency(&diverged);
    replica_divergence::tell(&ctx, &obj, &diverged).await;
    let status = NatsSystemBalancerStatus {
        observed_generation: obj.metadata.generation,
        conditions: merged(
            &previous,
            obj.metadata.generation,
            &w.ready,
            w.holding.as_ref(),
            Some(&consistent),
        ),
        capabilities: Some(capabilities),
        servers: loads,
        skew: Some(skew),
        last_move: w.last_move,
        pending: w.pending,
        diverged,
    };
    write(&ctx, &obj, &status, &g.cluster).await?;
    Ok(Action::requeue(w.after))
}

/// The gather phase; `Err(Ok((reason, message)))` when the NATS cluster cannot be judged.
async fn gather(ctx: &Context, obj: &NatsSystemBalancer) -> Result<Gathered, Why> {
    let client = reach_or_why(ctx, obj, &obj.spec.connection_ref).await?;
    let cluster = nats_cluster(&client).map_err(Ok)?;
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
    let replies = match ctx.census.ping(&describe(obj), &wire, &options).await {
        Ok(r) if !r.replies.is_empty() => r,
        Ok(_) | Err(WireError::NoResponders { .. }) | Err(WireError::Timeout { .. }) => {
            return Err(Ok((
                reason::PASS_FAILED,
                format!(
                    "no server answered $SYS.REQ.SERVER.PING.JSZ over NatsConnection {}: \
                     spec.connectionRef must name a connection with system account credentials",
                    obj.spec.connection_ref.name
                ),
            )));
        }
        Err(e) => return Err(Ok((reason::PASS_FAILED, format!("the JSZ ping: {e}")))),
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
    for a in &accounts {
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
    Ok(Gathered {
        wire,
        cluster,
        view,
        accounts,
        reached,
        reached_consumers,
        diverged,
    })
}

/// The refuse phase: a second NatsSystemBalancer of the same NATS cluster (the older wins), or
/// a NATS cluster of one server.
fn refuse(ctx: &Context, obj: &NatsSystemBalancer, g: &Gathered) -> Option<Decided> {
    let me = describe(obj);
    let age = (
        obj.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        me.clone(),
    );
    let now = std::time::Instant::now();
    let winner = {
        let mut claims = lock(&ctx.moving.system_balancers);
        let pending = claims
            .get(&me)
            .map(|c| c.pending.clone())
            .unwrap_or_default();
        claims.insert(
            me.clone(),
            SystemClaim {
                cluster: g.cluster.clone(),
                age,
                pending,
                leader_accounts: if obj.spec.moves.leader {
                    g.reached.clone()
                } else {
                    BTreeSet::new()
                },
                placement: obj.spec.moves.placement,
                last_pass: now,
            },
        );
        claim_winner(&claims, &g.cluster, now)
    };
    if let Some(w) = winner.filter(|w| *w != me) {
        return Some(Decided::new(
            condition::READY,
            false,
            reason::DUPLICATE_BALANCER,
            format!(
                "{w} already balances NATS cluster {}: at most one NatsSystemBalancer per NATS \
                 cluster",
                g.cluster
            ),
        ));
    }
    if g.view.servers_of(&g.cluster).count() < 2 {
        return Some(Decided::new(
            condition::READY,
            false,
            reason::NOT_CLUSTERED,
            format!(
                "NATS cluster {} has one server: there is nothing to balance",
                g.cluster
            ),
        ));
    }
    None
}

/// Observe, hold, plan and apply: what this pass writes.
async fn step(
    ctx: &Context,
    obj: &NatsSystemBalancer,
    g: &Gathered,
    previous: &NatsSystemBalancerStatus,
) -> Written {
    let me = describe(obj);
    let now = Instant::now();
    let balancing =
        |message: String| Decided::new(condition::READY, true, reason::BALANCING, message);
    let holding = |why: &'static str, message: String| {
        Some(Decided::new(condition::HOLDING, true, why, message))
    };
    // Observe: the moves pending.
    let mut pending = Vec::new();
    let mut abandoned = false;
    let bound = lease::abandon_after(PENDING_POLL);
    for m in &previous.pending {
        let key = undone_key(&me, m);
        let what = |verb: &str| {
            format!(
                "{:?} move of {} of account {} off {} {verb}",
                m.kind,
                balance::moved(&m.stream, m.consumer.as_deref()),
                m.account.as_deref().unwrap_or_default(),
                m.from.as_deref().unwrap_or_default()
            )
        };
        match lease::judge_pending(
            balance::move_done(&g.view, m),
            undone(&g.view, m),
            ctx.leases.undone(&key),
            bound,
        ) {
            lease::Pending::Done => {
                ctx.shared
                    .events
                    .publish(obj, false, event::MOVE_DONE, what("done"))
                    .await;
            }
            lease::Pending::Abandoned => {
                abandoned = true;
                let message = what(&format!(
                    "given up: led by {} again in {bound} passes in a row; the move lease is released",
                    m.from.as_deref().unwrap_or_default()
                ));
                ctx.shared
                    .events
                    .publish(obj, true, event::MOVE_ABANDONED, message)
                    .await;
                ctx.shared.metrics.add_counter(
                    metric::BALANCER_MOVES_ABANDONED,
                    "Pending moves a balancer gave up, found undone pass after pass.",
                    &[
                        ("namespace", &obj.namespace().unwrap_or_default()),
                        ("name", &obj.name_any()),
                    ],
                    1.0,
                );
            }
            lease::Pending::Waiting { undone } => {
                ctx.leases.set_undone(&key, undone);
                pending.push(m.clone());
            }
        }
    }
    let counted: Vec<String> = pending.iter().map(|m| undone_key(&me, m)).collect();
    ctx.leases.keep_undone(&me, &counted);
    record_pending(ctx, &me, &pending);
    let servers = g.view.servers_of(&g.cluster).count();
    let what = if obj.spec.moves.placement {
        "leaders and replicas"
    } else {
        "leaders"
    };
    let note = super::balancer::note_pace(ctx, obj, &obj.spec.interval, &previous.conditions).await;
    let ready = balancing(super::balancer::with_note(
        format!(
            "balancing {what} across {servers} servers of NATS cluster {}",
            g.cluster
        ),
        note.as_deref(),
    ));
    if !pending.is_empty() {
        ctx.leases.renew(&g.cluster, &me, now);
        return Written {
            ready,
            holding: holding(
                reason::MOVE_PENDING,
                format!(
                    "a move of {} is pending",
                    balance::moved(&pending[0].stream, pending[0].consumer.as_deref())
                ),
            ),
            pending,
            last_move: previous.last_move.clone(),
            after: PENDING_POLL,
        };
    }
    ctx.leases.release(&g.cluster, &me);
    let quiet = |holding, last_move| Written {
        ready: ready.clone(),
        holding,
        pending: Vec::new(),
        last_move,
        after: interval(obj),
    };
    if abandoned {
        // No move this pass, and none before the interval (not even on this pass's own status
        // write): the lease just released is another balancer's to take first.
        ctx.shared.due.schedule(obj, interval(obj));
        return quiet(None, previous.last_move.clone());
    }
    if let Err(why) = balance::settled(&g.view, &g.cluster) {
        return quiet(holding(reason::UNSETTLED, why), previous.last_move.clone());
    }
    let pinned = match pinned(ctx, &g.view, &g.cluster).await {
        Ok(p) => p,
        Err(e) => {
            return quiet(
                holding(reason::PASS_FAILED, format!("{e}; nothing is moved")),
                previous.last_move.clone(),
            );
        }
    };
    let scope = Scope {
        leader: obj.spec.moves.leader,
        placement: obj.spec.moves.placement,
        leader_accounts: g.reached.clone(),
        consumer_accounts: g.reached_consumers.clone(),
        skip: ctx.moving.under_evacuation(),
        pinned,
        only: None,
    };
    let Some(planned) = balance::next_move(&g.view, &g.cluster, &scope) else {
        return quiet(
            Some(Decided::new(
                condition::HOLDING,
                false,
                reason::SETTLED,
                format!(
                    "NATS cluster {} is Settled; next pass in {}",
                    g.cluster,
                    nats_api::jetstream::GoDuration::from(interval(obj)).0
                ),
            )),
            previous.last_move.clone(),
        );
    };
    if let Err(holder) = ctx.leases.take(&g.cluster, &me, now) {
        return quiet(
            holding(
                reason::MOVE_LEASE_HELD,
                format!("{holder} holds the move lease of {}", g.cluster),
            ),
            previous.last_move.clone(),
        );
    }
    match request(g, &planned).await {
        Ok(()) => {
            let m = Move {
                kind: planned.kind,
                account: Some(planned.account.clone()),
                stream: planned.stream.clone(),
                consumer: planned.consumer.clone(),
                from: Some(planned.from.clone()),
                to: planned.to.clone(),
                time: Some(conditions::now()),
            };
            let message = format!(
                "{:?} move of {} of account {} off {}{}",
                m.kind,
                balance::moved(&m.stream, m.consumer.as_deref()),
                planned.account,
                planned.from,
                planned
                    .to
                    .as_deref()
                    .map(|t| format!(" to {t}"))
                    .unwrap_or_default()
            );
            ctx.shared
                .events
                .publish(obj, false, event::MOVE_STARTED, message)
                .await;
            record_pending(ctx, &me, std::slice::from_ref(&m));
            Written {
                ready,
                holding: holding(
                    reason::MOVE_PENDING,
                    format!(
                        "the move of {} is pending",
                        balance::moved(&m.stream, m.consumer.as_deref())
                    ),
                ),
                pending: vec![m.clone()],
                last_move: Some(m),
                after: PENDING_POLL,
            }
        }
        Err(e) => {
            ctx.leases.release(&g.cluster, &me);
            let message = format!(
                "{:?} move of {} of account {}: {e}",
                planned.kind,
                balance::moved(&planned.stream, planned.consumer.as_deref()),
                planned.account
            );
            ctx.shared
                .events
                .publish(obj, true, event::MOVE_REFUSED, message)
                .await;
            quiet(None, previous.last_move.clone())
        }
    }
}

/// The move on the server: a stepdown of the stream's or the consumer's group through the
/// account's export toward the chosen member, or ACCOUNT.STREAM.MOVE of the copy on `from`
/// within the NATS cluster.
async fn request(g: &Gathered, m: &PlannedMove) -> Result<(), WireError> {
    match m.kind {
        MoveKind::Leader => {
            let placement = Placement {
                preferred: m.to.clone().unwrap_or_default(),
                ..Default::default()
            };
            let through = g.wire.clone().with_js_domain(&m.account);
            match &m.consumer {
                Some(c) => {
                    through
                        .consumer_leader_stepdown(&m.stream, c, Some(&placement))
                        .await
                }
                None => {
                    through
                        .stream_leader_stepdown(&m.stream, Some(&placement))
                        .await
                }
            }
        }
        MoveKind::Placement => {
            let request = StreamMove {
                server: m.from.clone(),
                cluster: g.cluster.clone(),
                ..Default::default()
            };
            g.wire
                .account_stream_move(&m.account, &m.stream, &request)
                .await
                .map(|_| ())
        }
    }
}

fn record_pending(ctx: &Context, me: &str, pending: &[Move]) {
    if let Some(c) = lock(&ctx.moving.system_balancers).get_mut(me) {
        c.pending = pending
            .iter()
            .map(|m| (m.account.clone().unwrap_or_default(), m.stream.clone()))
            .collect();
    }
}

/// Streams whose resource sets placement.cluster, by the ownership marker of their groups: the
/// owners of the groups on NATS cluster `cluster`, from the index ([`super::index`]).
async fn pinned(
    ctx: &Context,
    view: &SystemView,
    cluster: &str,
) -> Result<BTreeSet<(String, String)>, super::index::NotFilled> {
    let uids: BTreeSet<String> = ctx
        .index
        .owners_of(super::index::groups_on(view, Some(cluster)))
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
    let client = ctx.shared.client.clone();
    let controller = controller_kit::watch::controller::<NatsSystemBalancer>(
        &client,
        &ctx.shared.scope,
        watch_config(),
    );
    // The watch is the controller's; the passes run on a client counting their requests.
    let passes = ctx.for_passes(KIND);
    controller_kit::reconcile::run(controller, passes, Read::Fresh, reconcile).await;
}
