//! The deletion guard wired in (design §4.6), as the cleanup of the kit's finalizer path
//! ([`controller_kit::finalizer`], which alone adds and removes the finalizer): a NatsCluster
//! with JetStream carries the cluster controller's finalizer ([`wants_finalizer`]); deleting it
//! waits with Deleting=True, JetStreamDataRemains naming the stream groups still placed in its
//! NATS cluster, or ObservationFailed when the NATS cluster cannot be asked ([`guard`]) — unless
//! the servers' StatefulSets and labelled volume claims are gone, when it proceeds and says so
//! in a ServersGone Event; the
//! `force-delete` annotation (read only while deleting, never cleared) overrides both. A
//! NatsCluster without JetStream gets no finalizer, and one that loses JetStream loses it, so the
//! guard never holds a cluster with nothing to keep.

use std::time::Duration;

use controller_kit::conditions::{self, Decided};
use controller_kit::finalizer::Cleanup;
use controller_kit::reconcile::describe;
use kube::ResourceExt;
use kube::api::Api;
use nats_api::cluster::{NatsCluster, annotation, condition};
use nats_wire::{Reply, ServerInfo};

use super::context::Context;
use super::error::Error;
use super::observe_servers::system_access;
use crate::deletion_guard::{self, DataObservation, DeletionDecision};
use crate::nats::ask_observation;
use crate::nats::system_connection::dial_system;
use crate::server_lifecycle::ServerLifecycle;

/// The cluster controller's finalizer on a NatsCluster with JetStream.
pub const FINALIZER: &str = "cluster.nats.mikluko.io/deletion-guard";

/// The Event of a deletion that proceeds because the servers and their storage are gone.
pub const SERVERS_GONE: &str = "ServersGone";

/// How long the JSZ of a NatsCluster being deleted is waited for.
const OBSERVE_DEADLINE: Duration = Duration::from_secs(3);

/// Whether `cluster` should carry the finalizer: it has JetStream.
pub fn wants_finalizer(cluster: &NatsCluster) -> bool {
    cluster.spec.jetstream.is_some()
}

/// The cleanup of a NatsCluster being deleted that carries the finalizer: the guard, then
/// [`Cleanup::Done`] (the finalizer is removed) or, with Deleting=True saying what holds it,
/// [`Cleanup::Wait`] for the recheck pace.
pub async fn guard<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
) -> Result<Cleanup, Error> {
    let force = cluster.annotations().contains_key(annotation::FORCE_DELETE);
    let observed = if force {
        // force-delete overrides whatever the data is: nothing need be asked.
        DataObservation::NoJetStream
    } else {
        observe_data(ctx, cluster).await?
    };
    match deletion_guard::deletion_guard(force, &observed) {
        DeletionDecision::Proceed => {
            if observed == DataObservation::ServersGone {
                let message = "the servers' StatefulSets and volume claims are gone, and their \
                               JetStream data with them: the deletion proceeds without asking \
                               the NATS cluster"
                    .to_string();
                tracing::info!("{message}");
                ctx.shared
                    .events
                    .publish(cluster, false, SERVERS_GONE, message)
                    .await;
            }
            ctx.shared.settled(cluster);
            Ok(Cleanup::Done)
        }
        DeletionDecision::Hold { reason, message } => {
            deleting(ctx, cluster, reason, &message).await?;
            Ok(Cleanup::Wait {
                after: deletion_guard::recheck_after(reason, ctx.shared.deletion_wait(cluster)),
                reason: format!("{reason}: {message}"),
            })
        }
    }
}

/// Writes Deleting=True with what holds the deletion over the status as read (nothing else of
/// it changes while the NatsCluster is being deleted, save observedGeneration: the deletion
/// bumped the generation, and this pass observed it, as the Deleting condition says). The
/// condition gauge is left as the last pass set it: its series go with the NatsCluster.
async fn deleting<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    reason: &'static str,
    message: &str,
) -> Result<(), Error> {
    let mut status = cluster.status.clone().unwrap_or_default();
    status.observed_generation = cluster.metadata.generation;
    Decided::new(condition::DELETING, true, reason, message).upsert(
        &mut status.conditions,
        cluster.metadata.generation,
        &conditions::now(),
    );
    let api: Api<NatsCluster> = Api::namespaced(
        ctx.shared.client.clone(),
        &cluster.namespace().unwrap_or_default(),
    );
    let field_manager = ctx.shared.field_manager;
    controller_kit::status::apply(&api, &cluster.name_any(), field_manager, &status)
        .await
        .map_err(Error::kube(describe(cluster)))?;
    Ok(())
}

/// What the NatsCluster's NATS cluster still holds: over the system user when it has one and
/// it connects, else over each server's monitoring endpoint.
async fn observe_data<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
) -> Result<DataObservation, Error> {
    if cluster.spec.jetstream.is_none() {
        return Ok(DataObservation::NoJetStream);
    }
    let name = cluster.name_any();
    match ctx.server_lifecycle.servers_gone(cluster).await {
        Ok(true) => return Ok(DataObservation::ServersGone),
        Ok(false) => {}
        Err(e) => return Ok(DataObservation::Failed(e.to_string())),
    }
    let observed = match ctx.server_lifecycle.observe(cluster).await {
        Ok(o) => o,
        Err(e) => return Ok(DataObservation::Failed(e.to_string())),
    };
    let present: Vec<(String, crate::server_lifecycle::ServerAddress)> = observed
        .iter()
        .filter(|o| o.present && o.ready)
        .map(|o| {
            (
                o.server_name.clone(),
                ctx.server_lifecycle.address(cluster, o.ordinal),
            )
        })
        .collect();
    if present.is_empty() {
        return Ok(DataObservation::Failed("no server is Ready".into()));
    }
    // Over the system user when it connects; when it is refused (its NatsUser revoked in the
    // same teardown) the monitoring endpoints answer the same question, so the guard never waits
    // on the order in which the system user and the NatsCluster go (issue 43).
    let mut refused = None;
    if let Some(access) = system_access(&ctx.shared.client, cluster).await? {
        match dial_system(&present, &access).await {
            Ok(wire) => {
                return Ok(crate::nats::ask_remaining_data::observe(
                    &wire,
                    &name,
                    present.len(),
                    OBSERVE_DEADLINE,
                )
                .await);
            }
            Err(e) => refused = Some(format!("system connection: {e}")),
        }
    }
    let asks = ask_observation::Asks {
        jetstream: true,
        ..Default::default()
    };
    let obs = ask_observation::over_monitor(&present, asks).await;
    if obs.answers.is_empty() {
        let failure = obs.failure.unwrap_or_else(|| "no server answered".into());
        return Ok(DataObservation::Failed(match refused {
            Some(r) => format!("{r}; monitoring endpoints: {failure}"),
            None => failure,
        }));
    }
    let replies: Vec<Reply<nats_wire::monitor::Jsz>> = obs
        .answers
        .values()
        .filter_map(|a| {
            Some(Reply {
                server: ServerInfo {
                    name: a.name.clone(),
                    cluster: name.clone(),
                    ..Default::default()
                },
                data: a.jsz.clone()?,
            })
        })
        .collect();
    Ok(DataObservation::StreamGroups(
        deletion_guard::stream_groups(&replies, &name),
    ))
}
