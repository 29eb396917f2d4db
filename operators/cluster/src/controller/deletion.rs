//! The deletion guard wired in (design §4.6): a NatsCluster with JetStream carries the cluster
//! controller's finalizer; deleting it waits with Deleting=True, JetStreamDataRemains naming the
//! stream groups still placed in its NATS cluster, or ObservationFailed when the NATS cluster
//! cannot be asked; the `force-delete` annotation (read only while deleting, never cleared)
//! overrides both. A NatsCluster without JetStream gets no finalizer, and one that loses
//! JetStream loses it, so the guard never holds a cluster with nothing to keep.

use std::time::Duration;

use controller_kit::conditions::{self, Desired};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use nats_api::cluster::{NatsCluster, annotation, condition};
use nats_wire::{Reply, ServerInfo};

use super::context::Context;
use super::error::Error;
use super::observe::system_access;
use crate::deletion_guard::{self, DataObservation, DeletionDecision};
use crate::lifecycle::ServerLifecycle;
use crate::nats::observe;
use crate::nats::system_connection::dial_system;
use crate::objects::apply::FIELD_MANAGER;
use controller_kit::reconcile::describe;

/// The cluster controller's finalizer on a NatsCluster with JetStream.
pub const FINALIZER: &str = "cluster.nats.mikluko.io/deletion-guard";

/// How long the JSZ of a NatsCluster being deleted is waited for.
const OBSERVE_DEADLINE: Duration = Duration::from_secs(3);

/// Whether `cluster` should carry the finalizer: it has JetStream and is not being deleted.
pub fn wants_finalizer(cluster: &NatsCluster) -> bool {
    cluster.spec.jetstream.is_some()
}

fn has_finalizer(cluster: &NatsCluster) -> bool {
    cluster.finalizers().iter().any(|f| f == FINALIZER)
}

async fn set_finalizers<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    finalizers: Vec<String>,
) -> Result<(), Error> {
    let api: Api<NatsCluster> = Api::namespaced(
        ctx.shared.client.clone(),
        &cluster.namespace().unwrap_or_default(),
    );
    // A JSON merge patch replaces the list whole; the resourceVersion guards against dropping
    // a finalizer another controller added meanwhile (a conflict retries the pass).
    let patch = serde_json::json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": cluster.resource_version(),
        }
    });
    api.patch(
        &cluster.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|source| Error::Kube {
        object: format!("{} finalizers", describe(cluster)),
        source,
    })?;
    Ok(())
}

/// Adds the finalizer to a NatsCluster with JetStream, removes it from one without.
pub async fn keep_finalizer<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
) -> Result<(), Error> {
    let has = has_finalizer(cluster);
    let wants = wants_finalizer(cluster);
    if has == wants {
        return Ok(());
    }
    let mut f: Vec<String> = cluster
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    if wants {
        f.push(FINALIZER.to_string());
    }
    set_finalizers(ctx, cluster, f).await
}

/// What the NatsCluster's NATS cluster still holds: over the system user when it has one, else
/// over each server's monitoring endpoint.
async fn observe_data<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
) -> Result<DataObservation, Error> {
    if cluster.spec.jetstream.is_none() {
        return Ok(DataObservation::NoJetStream);
    }
    let name = cluster.name_any();
    let observed = match ctx.lifecycle.observe(cluster).await {
        Ok(o) => o,
        Err(e) => return Ok(DataObservation::Failed(e.to_string())),
    };
    let present: Vec<(String, crate::lifecycle::ServerAddress)> = observed
        .iter()
        .filter(|o| o.present && o.ready)
        .map(|o| {
            (
                o.server_name.clone(),
                ctx.lifecycle.address(cluster, o.ordinal),
            )
        })
        .collect();
    if present.is_empty() {
        return Ok(DataObservation::Failed("no server is Ready".into()));
    }
    if let Some(access) = system_access(&ctx.shared.client, cluster).await? {
        return Ok(match dial_system(&present, &access).await {
            Ok(wire) => {
                crate::nats::deletion_guard::observe(&wire, &name, present.len(), OBSERVE_DEADLINE)
                    .await
            }
            Err(e) => DataObservation::Failed(format!("system connection: {e}")),
        });
    }
    let asks = observe::Asks {
        jetstream: true,
        ..Default::default()
    };
    let obs = observe::over_monitor(&present, asks).await;
    if obs.answers.is_empty() {
        return Ok(DataObservation::Failed(
            obs.failure.unwrap_or_else(|| "no server answered".into()),
        ));
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

/// One pass over a NatsCluster being deleted: the guard, then the finalizer's removal, or
/// Deleting=True saying what holds it. Returns when to look again (`None`: it is gone).
pub async fn on_delete<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
) -> Result<Option<Duration>, Error> {
    if !has_finalizer(cluster) {
        return Ok(None);
    }
    let force = cluster.annotations().contains_key(annotation::FORCE_DELETE);
    let observed = if force {
        // force-delete overrides whatever the data is: nothing need be asked.
        DataObservation::NoJetStream
    } else {
        observe_data(ctx, cluster).await?
    };
    match deletion_guard::deletion_guard(force, &observed) {
        DeletionDecision::Proceed => {
            let f: Vec<String> = cluster
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER)
                .cloned()
                .collect();
            set_finalizers(ctx, cluster, f).await?;
            Ok(None)
        }
        DeletionDecision::Hold { reason, message } => {
            let mut status = cluster.status.clone().unwrap_or_default();
            conditions::upsert(
                &mut status.conditions,
                &Desired::new(condition::DELETING, true, reason, message),
                cluster.metadata.generation,
                &conditions::now(),
            );
            let api: Api<NatsCluster> = Api::namespaced(
                ctx.shared.client.clone(),
                &cluster.namespace().unwrap_or_default(),
            );
            controller_kit::status::apply(&api, &cluster.name_any(), FIELD_MANAGER, &status)
                .await
                .map_err(|source| Error::Kube {
                    object: describe(cluster),
                    source,
                })?;
            Ok(Some(ctx.settings.recheck))
        }
    }
}
