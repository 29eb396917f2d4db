//! One step of a server's removal (design §4.5): the rollout core decides it
//! ([`crate::rollout::removal::next`]) from what the servers said; this takes it — evacuate,
//! wait, step the meta leader down, `$JS.API.SERVER.REMOVE`, delete its workload, config and
//! labelled storage, recreate it (replacement) and wait until the meta leader lists it again.
//!
//! The server lifecycle reports whether the server's workload exists; the PVC and ConfigMap rules are
//! its `delete_server`'s (a PVC only when proven the claim of the server's own StatefulSet,
//! [`crate::objects::claims`]), whose leftovers are named. A PVC that only looks like the
//! server's claim (its labels under another name) is left and told in a
//! [`FOREIGN_CLAIM_KEPT`] Event.

use nats_api::cluster::NatsCluster;
use nats_wire::jsapi::PeerRef;
use nats_wire::monitor::Jsz;

use super::apply::Applied;
use super::context::Context;
use super::observe_servers::Seen;
use crate::nats::system_connection::dial_system;
use crate::rollout::gate::MetaObservation;
use crate::rollout::order::Step;
use crate::rollout::removal::{
    RemovalInput, RemovalKind, RemovalStep, ServerObjects, StreamReplicas, next,
};
use crate::rollout::rollout_inputs::{groups_on, not_current, stream_replicas};
use crate::server_lifecycle::ServerLifecycle;
use nats_api::cluster::ServerRemoval;

/// The Warning Event naming a PVC left at a server's removal because it only looks like the
/// server's claim and is not proven the controller's.
pub const FOREIGN_CLAIM_KEPT: &str = "ForeignClaimKept";

/// What the removal of one server is decided from, as read off the servers' answers.
struct Facts {
    streams: Vec<StreamReplicas>,
    groups: Vec<String>,
    not_current: Vec<String>,
    objects: ServerObjects,
}

impl Facts {
    fn of(s: &Step, applied: &Applied, seen: &Seen) -> Self {
        let answers: Vec<(String, Jsz)> = seen
            .observation
            .answers
            .values()
            .filter_map(|a| Some((a.name.clone(), a.jsz.clone()?)))
            .collect();
        let observed = applied.before.iter().find(|o| o.ordinal == s.ordinal);
        Facts {
            streams: stream_replicas(&answers),
            groups: groups_on(&answers, &s.server),
            not_current: not_current(&answers, Some(&s.server)),
            objects: ServerObjects {
                statefulset: observed.is_some_and(|o| o.present),
                pvc: observed.and_then(|o| o.claim.clone()),
                configmap: None,
            },
        }
    }
}

/// The server being removed: its step, how, and `status.removals` as the pass recorded it.
pub struct Removing<'a> {
    pub step: &'a Step,
    pub kind: RemovalKind,
    pub removals: &'a [ServerRemoval],
}

/// Decides and takes the next step of a server's removal. Returns the step and the objects the
/// server lifecycle left because the NatsCluster does not control them. A step that fails is
/// [`RemovalStep::Failed`]: asked again next pass, its phase unchanged.
pub async fn removal_step<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    removing: &Removing<'_>,
    applied: &Applied,
    meta: &MetaObservation,
    seen: &Seen,
) -> (RemovalStep, Vec<String>) {
    let (s, kind) = (removing.step, removing.kind);
    let facts = Facts::of(s, applied, seen);
    let (leader, peers) = match meta {
        MetaObservation::FromLeader { leader, peers } => {
            (Some(leader.as_str()), Some(peers.as_slice()))
        }
        _ => (None, None),
    };
    let observed = applied.before.iter().find(|o| o.ordinal == s.ordinal);
    let step = next(&RemovalInput {
        server: &s.server,
        kind,
        phase: removing
            .removals
            .iter()
            .find(|r| r.name == s.server)
            .map(|r| r.phase),
        jetstream: cluster.spec.jetstream.is_some(),
        system_credentials: seen.system.is_some(),
        new_size: cluster.spec.replicas.max(0) as u32,
        streams: &facts.streams,
        groups_on_server: &facts.groups,
        not_current_apart_from_server: &facts.not_current,
        meta_leader: leader,
        meta_peers: peers,
        objects: &facts.objects,
        server_ready: observed.is_some_and(|o| o.ready),
    });
    if let RemovalStep::Delete { .. } = &step {
        return match ctx
            .server_lifecycle
            .delete_server(cluster, s.ordinal, true)
            .await
        {
            Ok(a) => {
                for kept in &a.kept {
                    ctx.shared
                        .events
                        .publish(
                            cluster,
                            true,
                            FOREIGN_CLAIM_KEPT,
                            format!(
                                "{}: {kept}; it is not the controller's, so it is left as it is",
                                s.server
                            ),
                        )
                        .await;
                }
                (step, a.foreign)
            }
            Err(e) => failed(step, e.to_string()),
        };
    }
    match ask(ctx, cluster, s, &step, applied, seen).await {
        Ok(()) => {
            if !matches!(
                step,
                RemovalStep::WaitEvacuation { .. } | RemovalStep::WaitRejoin { .. }
            ) {
                ctx.shared
                    .events
                    .publish(
                        cluster,
                        false,
                        "RemovalStep",
                        format!("{}: {step:?}", s.server),
                    )
                    .await;
            }
            (step, vec![])
        }
        Err(e) => failed(step, e),
    }
}

/// The step is asked again next pass (its phase unchanged); meanwhile Progressing says what
/// failed.
fn failed(step: RemovalStep, error: String) -> (RemovalStep, Vec<String>) {
    (
        RemovalStep::Failed {
            step: Box::new(step),
            error,
        },
        vec![],
    )
}

/// Does what `step` asks of the servers (over the system user) or of the port; a wait asks
/// nothing.
async fn ask<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    s: &Step,
    step: &RemovalStep,
    applied: &Applied,
    seen: &Seen,
) -> Result<(), String> {
    let wire = || async {
        match &seen.system {
            Some(access) => dial_system(&seen.ready, access)
                .await
                .map_err(|e| format!("system connection: {e}")),
            None => Err("no system user".to_string()),
        }
    };
    let peer = PeerRef::name(&s.server);
    match step {
        RemovalStep::Evacuate => {
            let w = wire().await?;
            w.server_evacuate(&peer).await.map_err(|e| e.to_string())
        }
        RemovalStep::StepDownMetaLeader => {
            let w = wire().await?;
            w.meta_leader_stepdown(None)
                .await
                .map_err(|e| e.to_string())
        }
        RemovalStep::RemovePeer => {
            let w = wire().await?;
            w.server_remove(&peer).await.map_err(|e| e.to_string())
        }
        RemovalStep::Recreate => match applied.desired.iter().find(|d| d.ordinal == s.ordinal) {
            Some(d) => ctx
                .server_lifecycle
                .apply_server(cluster, d)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}
