//! NatsBalancer: evens one account's stream leaders (and, opted in, copies) within pools, over
//! the account's own connection (design §6.5; the pools are [`crate::balance::pools`]'s, the
//! account's view, Settled gate and yielding [`crate::balance::account`]'s, the move itself
//! [`crate::balance::next_move`]'s, the lease [`crate::lease`]'s). A pass, phase by phase:
//!
//! 1. refuse bad input — a pool whose selector Kubernetes would refuse: Ready=False PassFailed
//!    naming `spec.pools[i].selector…`; nothing moved.
//! 2. [`gather`] — the connection reached (the reference reasons when not); the NATS cluster the
//!    connected server is in; the account (`$SYS.REQ.USER.INFO`); the account's streams with
//!    their leader and copies (`$JS.API.STREAM.LIST`: an account cannot ping JSZ), and the
//!    consumers of those of the NATS cluster that have some (`$JS.API.CONSUMER.LIST.<stream>`,
//!    [`account::consumer_streams`]).
//! 3. pools — every NatsStream, NatsKeyValue and NatsObjectStore of the namespace by label; the
//!    first matching pool wins, Overlapping names resources matched by several; the rest, and
//!    streams with no resource, the default pool.
//! 4. observe — its own move (the last one, while it holds the NATS cluster's lease) judged done:
//!    MoveDone, the lease released; else Holding MovePending.
//! 5. hold — Unsettled while a stream is leaderless, behind, offline or mid-move: the
//!    account's own, and, where a NatsSystemBalancer's or NatsClusterEvacuation's pass saw the
//!    NATS cluster lately, any account's placed there (the gate's scope is
//!    [`crate::balance::gate`]'s; judged from the account's own streams alone, its Holding
//!    message says so); streams under evacuation and those a NatsSystemBalancer has a move
//!    pending on skipped, and YieldingToSystemBalancer when the move it wants next is on one of
//!    the latter; MoveLeaseHeld while another (the system balancer included) holds the lease. A
//!    system balancer covering the same NATS cluster does not stop it otherwise: both balance,
//!    one move at a time (stories 07 and 09).
//! 6. plan and apply — the first pool with a move ([`balance::next_move`] with the pool as
//!    scope); the lease taken; a leader move as `$JS.API.STREAM.LEADER.STEPDOWN` (or
//!    `CONSUMER.LEADER.STEPDOWN` for a consumer's group) toward the chosen member, a placement move as `$JS.API.STREAM.PEER.REMOVE` of the copy on the
//!    busiest server (the meta leader places the new copy within the stream's NATS cluster and
//!    placement; never a stream whose resource or config sets `placement.cluster`, never an R1
//!    stream's only copy). One move per pass; `interval` paces them.
//! 7. write status — pools, lastMove, Ready, Holding and Overlapping; the skew and pending gauges.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_kit::conditions::{self, Decided};
use controller_kit::finalizer::{self, Cleanup};
use controller_kit::reconcile::{Read, describe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nats_api::jetstream::{
    FINALIZER, GoDuration, Move, MoveKind, NatsBalancer, NatsBalancerStatus, PoolStatus, condition,
    event, metric, reason,
};
use nats_wire::Wire;
use nats_wire::monitor::Placement;

use super::context::{Context, watch_config};
use super::error::{Error, kube_err};
use super::reach::{Why, nats_cluster, reach_or_why};
use crate::balance::account::{self, Listed, ListedConsumers};
use crate::balance::gate;
use crate::balance::pools::{self, Assignment, Labeled, Owned, PoolDef, StreamKey};
use crate::balance::{self, PlannedMove, Scope};
use crate::jsapi;
use crate::system_view::SystemView;

const KIND: &str = "NatsBalancer";
/// How soon a pass with its move pending looks again.
const PENDING_POLL: Duration = Duration::from_secs(2);
/// How long a pass waits for `$SYS.REQ.USER.INFO` (a refused publish is never answered).
const USER_INFO_DEADLINE: Duration = Duration::from_secs(2);

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

/// What a pass works from.
struct Gathered {
    client: async_nats::Client,
    cluster: String,
    /// The account's name; `None` when USER.INFO did not say.
    account: Option<String>,
    listed: Vec<Listed>,
    missing: Vec<String>,
    /// The consumers of the streams of `cluster` that have some.
    consumers: Vec<ListedConsumers>,
    view: SystemView,
}

/// What the hold, plan and apply phases decided.
struct Stepped {
    holding: Option<Decided>,
    last_move: Option<Move>,
    pending: bool,
    after: Duration,
}

async fn reconcile(obj: Arc<NatsBalancer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<NatsBalancer> = Api::namespaced(
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

fn pool_defs(obj: &NatsBalancer) -> Vec<PoolDef> {
    obj.spec
        .pools
        .iter()
        .map(|p| PoolDef {
            name: p.name.clone(),
            selector: p.selector.clone(),
        })
        .collect()
}

/// The live path: the phases, then status.
async fn live(obj: Arc<NatsBalancer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let previous = obj.status.clone().unwrap_or_default();
    let stopped = |why: &'static str, message: String| NatsBalancerStatus {
        observed_generation: obj.metadata.generation,
        conditions: merged(
            &previous.conditions,
            obj.metadata.generation,
            &[Decided::new(condition::READY, false, why, message)],
        ),
        ..previous.clone()
    };
    let defs = pool_defs(&obj);
    if let Err(e) = pools::check_pools(&defs) {
        let status = stopped(reason::PASS_FAILED, format!("{e}; nothing is moved"));
        write(&ctx, &obj, &status, &previous).await?;
        return Ok(Action::requeue(pace(&obj.spec.interval)));
    }
    let g = match gather(&ctx, &obj).await {
        Ok(g) => g,
        Err(Ok((why, message))) => {
            write(&ctx, &obj, &stopped(why, message), &previous).await?;
            return Ok(Action::requeue(ctx.shared.retry_later(&*obj)));
        }
        Err(Err(e)) => return Err(e),
    };
    let ns = obj.namespace().unwrap_or_default();
    let (labeled, pinned_uids) = match resources(&ctx, &ns, &g.view).await {
        Ok(r) => r,
        Err(e) => {
            let status = stopped(reason::PASS_FAILED, format!("{e}; nothing is moved"));
            write(&ctx, &obj, &status, &previous).await?;
            return Ok(Action::requeue(super::index::FILL_WAIT));
        }
    };
    let in_cluster: Vec<Owned> = g
        .view
        .groups
        .iter()
        .filter(|gr| gr.cluster == g.cluster && gr.consumer.is_none())
        .map(|gr| Owned {
            key: (gr.account.clone(), gr.stream.clone()),
            owner: gr.owner.clone(),
        })
        .collect();
    let assignment = pools::assign(&defs, &labeled, &in_cluster);
    let pool_status: Vec<PoolStatus> = assignment
        .pools
        .iter()
        .map(|(name, streams)| PoolStatus {
            name: name.clone(),
            streams: u32::try_from(streams.len()).unwrap_or(u32::MAX),
            leader_skew: pools::pool_skew(&g.view, &g.cluster, streams),
        })
        .collect();
    let s = step(&ctx, &obj, &g, &assignment, &pinned_uids, &previous).await;
    let note = note_pace(&ctx, &*obj, &obj.spec.interval, &previous.conditions).await;
    let ready = Decided::new(
        condition::READY,
        true,
        reason::BALANCING,
        with_note(
            format!(
                "{} pools over NATS cluster {}",
                assignment.pools.len(),
                g.cluster
            ),
            note.as_deref(),
        ),
    );
    let overlapping = pools::overlap_message(&assignment.overlapping)
        .map(|m| Decided::new(condition::OVERLAPPING, true, reason::OVERLAPPING, m));
    let set: Vec<Decided> = std::iter::once(ready)
        .chain(s.holding)
        .chain(overlapping)
        .collect();
    let status = NatsBalancerStatus {
        observed_generation: obj.metadata.generation,
        conditions: merged(&previous.conditions, obj.metadata.generation, &set),
        pools: pool_status,
        last_move: s.last_move,
    };
    write(&ctx, &obj, &status, &previous).await?;
    let pending = s.pending.then_some(status.last_move.as_ref()).flatten();
    set_pending_gauge(&ctx, &obj, pending);
    Ok(Action::requeue(s.after))
}

/// The gather phase; `Err(Ok((reason, message)))` when the account cannot be judged.
async fn gather(ctx: &Context, obj: &NatsBalancer) -> Result<Gathered, Why> {
    let client = reach_or_why(ctx, obj, &obj.spec.connection_ref).await?;
    let cluster = nats_cluster(&client).map_err(Ok)?;
    // Yielding judges by account; one that cannot be told (a user whose permissions refuse
    // USER.INFO: no answer) yields to any system balancer of the NATS cluster.
    let account = match tokio::time::timeout(USER_INFO_DEADLINE, jsapi::user_account(&client))
        .await
        .ok()
        .and_then(Result::ok)
        .flatten()
    {
        Some(a) => Some(a),
        None => creds_account(ctx, obj).await,
    };
    let (values, missing) = match jsapi::stream_list(&client).await {
        Ok(l) => l,
        Err(e) => {
            return Err(Ok((
                reason::PASS_FAILED,
                format!(
                    "listing the account's streams over NatsConnection {}: {e}",
                    obj.spec.connection_ref.name
                ),
            )));
        }
    };
    ctx.shared.settled(obj);
    let consumers = list_consumers(&client, account::consumer_streams(&values, &cluster)).await;
    let listed: Vec<Listed> = values
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    let view = account::account_view(account.as_deref().unwrap_or_default(), &listed);
    let view = account::with_consumers(view, &consumers);
    Ok(Gathered {
        client,
        cluster,
        account,
        listed,
        missing,
        consumers,
        view,
    })
}

/// The account of the user `obj`'s connection dials as, read from its creds Secret (a user
/// whose permissions refuse USER.INFO is still its account's); `None` without creds or when
/// unread.
async fn creds_account(ctx: &Context, obj: &NatsBalancer) -> Option<String> {
    let ns = obj.namespace().unwrap_or_default();
    let conn = crate::references::absolute(&obj.spec.connection_ref, &ns);
    let conn_ns = conn.namespace.clone().unwrap_or(ns);
    let spec =
        Api::<nats_api::nats::NatsConnection>::namespaced(ctx.shared.client.clone(), &conn_ns)
            .get_opt(&conn.name)
            .await
            .ok()??
            .spec;
    let r = spec.credentials?.secret_key_ref;
    let key = r
        .key
        .clone()
        .unwrap_or_else(|| crate::connection::DEFAULT_CREDS_KEY.into());
    let secret =
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(ctx.shared.client.clone(), &conn_ns)
            .get_opt(&r.name)
            .await
            .ok()??;
    let bytes = secret.data?.remove(&key)?.0;
    crate::connection::creds_account(&String::from_utf8_lossy(&bytes))
}

/// The consumers of each stream named, one CONSUMER.LIST each; a listing that fails holds the
/// pass Unsettled ([`account::consumers_settled`]) rather than failing it.
async fn list_consumers(client: &async_nats::Client, streams: Vec<String>) -> Vec<ListedConsumers> {
    let mut out = Vec::with_capacity(streams.len());
    for stream in streams {
        let mut l = ListedConsumers::default();
        match jsapi::consumer_infos(client, &stream).await {
            Ok((values, missing)) => {
                l.consumers = values
                    .into_iter()
                    .filter_map(|v| serde_json::from_value(v).ok())
                    .collect();
                l.missing = missing;
            }
            Err(e) => l.unlisted = Some(e.to_string()),
        }
        l.stream = stream;
        out.push(l);
    }
    out
}

/// The NatsStreams, NatsKeyValues and NatsObjectStores of `ns` owning a group of `view` (the
/// account's streams), with their labels (the pools' candidates), and the UIDs of those owners,
/// of any namespace, whose spec sets `placement.cluster`: from the index, not the apiserver
/// ([`super::index`]). An index not filled yet (the controller just started) stops the pass.
async fn resources(
    ctx: &Context,
    ns: &str,
    view: &SystemView,
) -> Result<(Vec<Labeled>, BTreeSet<String>), super::index::NotFilled> {
    let owners = ctx
        .index
        .owners_of(super::index::groups_on(view, None))
        .await?;
    let (mut labeled, mut pinned) = (Vec::new(), BTreeSet::new());
    for o in owners {
        if o.owner.placement_cluster.is_some() {
            pinned.insert(o.owner.uid.clone());
        }
        if o.owner.namespace == ns {
            labeled.push(Labeled {
                kind: o.owner.kind,
                namespace: o.owner.namespace,
                name: o.owner.name,
                uid: o.owner.uid,
                labels: o.labels,
            });
        }
    }
    Ok((labeled, pinned))
}

/// Observe, hold, plan and apply.
async fn step(
    ctx: &Context,
    obj: &NatsBalancer,
    g: &Gathered,
    assignment: &Assignment,
    pinned_uids: &BTreeSet<String>,
    previous: &NatsBalancerStatus,
) -> Stepped {
    let me = describe(obj);
    let now = Instant::now();
    let interval = pace(&obj.spec.interval);
    let holding = |why: &'static str, message: String| {
        Some(Decided::new(condition::HOLDING, true, why, message))
    };
    let quiet = |holding| Stepped {
        holding,
        last_move: previous.last_move.clone(),
        pending: false,
        after: interval,
    };
    // Observe: its own move, pending while it holds the lease.
    if let Some(m) = previous
        .last_move
        .as_ref()
        .filter(|_| ctx.leases.holds(&g.cluster, &me, now))
    {
        if !account::move_done(&g.view, m) {
            ctx.leases.renew(&g.cluster, &me, now);
            return Stepped {
                holding: holding(
                    reason::MOVE_PENDING,
                    format!(
                        "the move of {} is pending",
                        balance::moved(&m.stream, m.consumer.as_deref())
                    ),
                ),
                last_move: Some(m.clone()),
                pending: true,
                after: PENDING_POLL,
            };
        }
        ctx.leases.release(&g.cluster, &me);
        let message = format!(
            "{:?} move of {} off {} done",
            m.kind,
            balance::moved(&m.stream, m.consumer.as_deref()),
            m.from.as_deref().unwrap_or_default()
        );
        ctx.shared
            .events
            .publish(obj, false, event::MOVE_DONE, message)
            .await;
    }
    let (leader, placement) = (obj.spec.moves.leader, obj.spec.moves.placement);
    // The gate reads the whole NATS cluster where a system-credentials pass saw it lately.
    let sighting = ctx.moving.sighting(&g.cluster);
    let from = gate::gate_from(sighting.as_deref(), &g.cluster, now);
    if let Err(why) = gate::account_gate(&from, &g.listed, &g.missing, &g.cluster) {
        return quiet(holding(reason::UNSETTLED, why));
    }
    if let Err(why) = account::consumers_settled(&g.consumers) {
        return quiet(holding(reason::UNSETTLED, why));
    }
    let account = g.account.clone().unwrap_or_default();
    let pinned = account::placement_pinned(&g.view, pinned_uids);
    let system_pending =
        account::system_pending(&ctx.moving.system_covers(std::time::Instant::now()));
    let evacuating = ctx.moving.under_evacuation();
    let plan = |skip: &BTreeSet<StreamKey>| {
        assignment.pools.iter().find_map(|(_, streams)| {
            let scope = Scope {
                leader,
                placement,
                leader_accounts: [account.clone()].into(),
                consumer_accounts: [account.clone()].into(),
                skip: skip.clone(),
                pinned: pinned.clone(),
                only: Some(streams.clone()),
            };
            balance::next_move(&g.view, &g.cluster, &scope)
        })
    };
    let mut skip = evacuating.clone();
    skip.extend(system_pending.keys().cloned());
    let planned = plan(&skip);
    // Yields: the move it wants next is on a stream the system balancer is moving.
    if let Some(why) =
        account::yielded(plan(&evacuating).as_ref(), &system_pending).filter(|_| planned.is_none())
    {
        return quiet(holding(reason::YIELDING_TO_SYSTEM_BALANCER, why));
    }
    let Some(planned) = planned else {
        return quiet(Some(Decided::new(
            condition::HOLDING,
            false,
            reason::SETTLED,
            gate::settled_message(&from, &g.cluster, &GoDuration::from(interval).0),
        )));
    };
    if let Err(holder) = ctx.leases.take(&g.cluster, &me, now) {
        return quiet(holding(
            reason::MOVE_LEASE_HELD,
            format!(
                "{holder} holds the move lease of NATS cluster {}",
                g.cluster
            ),
        ));
    }
    let about = format!(
        "{:?} move of {} off {}{}",
        planned.kind,
        balance::moved(&planned.stream, planned.consumer.as_deref()),
        planned.from,
        planned
            .to
            .as_deref()
            .map(|t| format!(" to {t}"))
            .unwrap_or_default()
    );
    match request(g, &planned).await {
        Ok(()) => {
            ctx.shared
                .events
                .publish(obj, false, event::MOVE_STARTED, about)
                .await;
            let m = Move {
                kind: planned.kind,
                account: g.account.clone(),
                stream: planned.stream.clone(),
                consumer: planned.consumer.clone(),
                from: Some(planned.from.clone()),
                to: planned.to.clone(),
                time: Some(conditions::now()),
            };
            Stepped {
                holding: holding(
                    reason::MOVE_PENDING,
                    format!(
                        "the move of {} is pending",
                        balance::moved(&m.stream, m.consumer.as_deref())
                    ),
                ),
                last_move: Some(m),
                pending: true,
                after: PENDING_POLL,
            }
        }
        Err(e) => {
            ctx.leases.release(&g.cluster, &me);
            ctx.shared
                .events
                .publish(obj, true, event::MOVE_REFUSED, format!("{about}: {e}"))
                .await;
            quiet(None)
        }
    }
}

/// The move on the server, over the account's own connection: a stepdown of the stream's or
/// the consumer's group toward the chosen member (nats-server 2.11 and later honour the
/// preferred server; an older one picks any), or the copy on `from` removed from the stream's
/// peers for the meta leader to place anew.
async fn request(g: &Gathered, m: &PlannedMove) -> Result<(), String> {
    match m.kind {
        MoveKind::Leader => {
            let placement = Placement {
                preferred: m.to.clone().unwrap_or_default(),
                ..Default::default()
            };
            let wire = Wire::new(g.client.clone());
            match &m.consumer {
                Some(c) => {
                    wire.consumer_leader_stepdown(&m.stream, c, Some(&placement))
                        .await
                }
                None => {
                    wire.stream_leader_stepdown(&m.stream, Some(&placement))
                        .await
                }
            }
            .map_err(|e| e.to_string())
        }
        MoveKind::Placement => jsapi::stream_peer_remove(&g.client, &m.stream, &m.from)
            .await
            .map_err(|e| e.to_string()),
    }
}

fn merged(previous: &[Condition], generation: Option<i64>, set: &[Decided]) -> Vec<Condition> {
    conditions::merge(
        previous,
        generation,
        set,
        &[condition::HOLDING, condition::OVERLAPPING],
        &conditions::now(),
    )
}

/// The write-status phase: status applied, each pool's skew gauge set (those of pools gone
/// removed).
async fn write(
    ctx: &Context,
    obj: &NatsBalancer,
    status: &NatsBalancerStatus,
    previous: &NatsBalancerStatus,
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let m = &ctx.shared.metrics;
    for p in previous
        .pools
        .iter()
        .filter(|p| status.pools.iter().all(|q| q.name != p.name))
    {
        m.remove_gauge(
            metric::BALANCER_LEADER_SKEW,
            &[("namespace", &ns), ("name", &name), ("pool", &p.name)],
        );
    }
    for p in &status.pools {
        m.set_gauge(
            metric::BALANCER_LEADER_SKEW,
            "The difference between the most and fewest group leaders a server holds, per pool.",
            &[("namespace", &ns), ("name", &name), ("pool", &p.name)],
            f64::from(p.leader_skew),
        );
    }
    super::status::count_held(ctx, obj, &status.conditions);
    ctx.shared
        .write_status(obj, status)
        .await
        .map_err(kube_err(obj))?;
    Ok(())
}

/// The pending gauge: one move of its kind while `pending` is its move pending.
fn set_pending_gauge(ctx: &Context, obj: &NatsBalancer, pending: Option<&Move>) {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    for (kind, label) in [
        (MoveKind::Leader, "leader"),
        (MoveKind::Placement, "placement"),
    ] {
        let n = pending.filter(|m| m.kind == kind).map_or(0.0, |_| 1.0);
        ctx.shared.metrics.set_gauge(
            metric::BALANCER_PENDING_MOVES,
            "Moves a balancer requested and has not seen done, per kind of move.",
            &[("namespace", &ns), ("name", &name), ("move_kind", label)],
            n,
        );
    }
}

/// Deletion: its leases released, its gauges removed. A pending move is left to finish (a
/// leader move cannot be undone; a replaced copy is placed within the NATS cluster anyway).
async fn cleanup(obj: Arc<NatsBalancer>, ctx: Arc<Context>) -> Result<Cleanup, Error> {
    ctx.leases.release_all(&describe(&*obj));
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let m = &ctx.shared.metrics;
    for p in obj.status.iter().flat_map(|s| &s.pools) {
        m.remove_gauge(
            metric::BALANCER_LEADER_SKEW,
            &[("namespace", &ns), ("name", &name), ("pool", &p.name)],
        );
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
    let client = ctx.shared.client.clone();
    let controller = controller_kit::watch::controller::<NatsBalancer>(
        &client,
        &ctx.shared.scope,
        watch_config(),
    );
    // The watch is the controller's; the passes run on a client counting their requests.
    let passes = ctx.for_passes(KIND);
    controller_kit::reconcile::run(controller, passes, Read::Fresh, reconcile).await;
}
