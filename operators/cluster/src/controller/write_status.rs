//! Phase 9, write status: the pass as `NatsCluster.status`, by server-side apply on the status
//! subresource under the controller's field manager; the condition and rollout gauges follow.
//! `status.rollout.gate.since` and `status.removals` carry the rollout across controller
//! restarts. Returns when to look again: after a backoff while failing, at the gate pace while a
//! rollout holds at its gate, at the recheck pace while anything else is not as it should be (the
//! idle pace while no server is Ready to ask and a watch delivers their readiness,
//! [`crate::pace`]), at the resync pace once all is.

use std::time::Duration;

use controller_kit::conditions;
use controller_kit::reconcile::describe;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use nats_api::cluster::{
    ConfigStatus, JetStreamLimits, JetStreamStatus, NatsCluster, NatsClusterStatus, ServerStatus,
    condition, names,
};

use super::context::Context;
use super::error::Error;
use super::gauges;
use super::judge::{Verdicts, revision};
use super::observe_servers::Seen;
use super::plan_servers::Planned;
use super::written::Written;
use crate::conditions::ready::ready_count;
use crate::observation::{meta_leader, oldest_version};
use crate::pace::{Left, Paces, gate_held, look_again};
use crate::quantity;
use crate::server_lifecycle::ServerLifecycle;

/// Writes the pass as status and returns when to look again.
pub async fn write_status<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    seen: &Seen,
    planned: &Planned,
    written: &Written,
    verdicts: &Verdicts,
) -> Result<Duration, Error> {
    let (ns, name) = (cluster.namespace().unwrap_or_default(), cluster.name_any());
    let prev = cluster.status.clone().unwrap_or_default();
    let replicas = cluster.spec.replicas.max(0) as u32;
    let expected: Vec<String> = (0..replicas).map(|i| names::server(&name, i)).collect();
    let rolled = written.rolled();
    let status = NatsClusterStatus {
        observed_generation: cluster.metadata.generation,
        conditions: conditions_of(cluster, &prev.conditions, verdicts),
        version: oldest_version(&seen.observation, &expected),
        replicas: Some(cluster.spec.replicas),
        ready_replicas: Some(ready_count(replicas, written.observed()) as i32),
        endpoints: planned
            .plans
            .first()
            .map(|p| ctx.server_lifecycle.endpoints(cluster, p)),
        config: config(
            &prev,
            revision(planned, written),
            rolled.and_then(|r| r.taken.config.clone()),
        ),
        rollout: rolled.map(|r| r.report.status.clone()),
        removals: rolled.map_or_else(|| prev.removals.clone(), |r| r.taken.removals.clone()),
        jetstream: jetstream(cluster, seen, planned),
        gateways: verdicts.gateways.clone().map(|g| g.0).unwrap_or_default(),
        leaf_remotes: verdicts.leafnodes.clone().map(|l| l.0).unwrap_or_default(),
        servers: servers(seen, written),
    };
    ctx.shared
        .write_status(cluster, &status)
        .await
        .map_err(Error::kube(describe(cluster)))?;
    gauges::export_rollout(&ctx.shared.metrics, &ns, &name, status.rollout.as_ref());
    if written.failure().is_some() {
        return Ok(ctx.shared.retry_later(cluster));
    }
    ctx.shared.settled(cluster);
    let any_ready = !seen.ready.is_empty() || written.observed().iter().any(|o| o.ready);
    let paces = Paces {
        recheck: ctx.settings.recheck,
        idle: ctx.settings.idle_recheck,
        resync: ctx.settings.resync,
        gate: ctx.settings.gate_recheck,
    };
    let left = Left {
        busy: verdicts.busy(),
        any_ready,
        readiness_watched: L::READINESS_WATCHED,
        gate_held: status
            .rollout
            .as_ref()
            .and_then(|r| gate_held(r, &conditions::now())),
    };
    Ok(look_again(paces, left))
}

/// The conditions after this pass: `previous` with each verdict set; GatewaysConnected and
/// LeafnodesConnected removed when the spec has no gateway or leaf remotes.
fn conditions_of(cluster: &NatsCluster, previous: &[Condition], v: &Verdicts) -> Vec<Condition> {
    let mut set = vec![v.ready.clone(), v.settled.clone(), v.progressing.clone()];
    set.extend(v.gateways.as_ref().map(|(_, g)| g.clone()));
    set.extend(v.leafnodes.as_ref().map(|(_, l)| l.clone()));
    let optional = [
        condition::GATEWAYS_CONNECTED,
        condition::LEAFNODES_CONNECTED,
    ];
    conditions::merge(
        previous,
        cluster.metadata.generation,
        &set,
        &optional,
        &conditions::now(),
    )
}

/// `status.config`: the revision, and how this pass applied it; when it stepped no server, how
/// the previous revision was applied.
fn config(
    prev: &NatsClusterStatus,
    revision: Option<String>,
    applied: Option<ConfigStatus>,
) -> Option<ConfigStatus> {
    let revision = revision?;
    Some(match applied {
        Some(a) => ConfigStatus {
            revision: Some(revision),
            ..a
        },
        None => ConfigStatus {
            revision: Some(revision),
            applied_by: prev.config.as_ref().and_then(|c| c.applied_by),
            restart_reason: prev.config.as_ref().and_then(|c| c.restart_reason.clone()),
        },
    })
}

/// `status.jetstream`: the meta leader and the limits the servers run with.
fn jetstream(cluster: &NatsCluster, seen: &Seen, planned: &Planned) -> Option<JetStreamStatus> {
    cluster.spec.jetstream.as_ref()?;
    let limits = planned
        .plans
        .first()
        .and_then(|p| p.jetstream.as_ref())
        .map(|j| JetStreamLimits {
            max_memory_store: j.max_memory_store.map(|b| Quantity(quantity::of_bytes(b))),
            max_file_store: j.max_file_store.map(|b| Quantity(quantity::of_bytes(b))),
        });
    Some(JetStreamStatus {
        meta_leader: meta_leader(&seen.observation),
        limits,
    })
}

/// `status.servers`: each server as the port observed it last, with the version it reported.
fn servers(seen: &Seen, written: &Written) -> Vec<ServerStatus> {
    (written.observed().iter())
        .map(|o| ServerStatus {
            name: o.server_name.clone(),
            version: seen
                .observation
                .answers
                .get(&o.server_name)
                .and_then(|a| a.version.clone()),
            ready: o.ready,
            config_revision: o.revision.clone(),
        })
        .collect()
}
