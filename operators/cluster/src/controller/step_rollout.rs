//! Phase 6, step: at most one rollout step (design §4.4, §4.5). The rollout core chooses it
//! ([`choose`]: the gate, the step order, `force-step`, `restart-all` and `replace-server`
//! cleared once read) and the pass takes it ([`take`]): a reload or restart, every server at
//! once under `restart-all`, or one step of a scale-down or replacement; then rotated
//! certificates are reloaded where nothing else touches the server. After the servers are
//! observed again, [`report`] says what the rollout came to: `status.rollout` and Progressing.

use std::collections::{BTreeMap, BTreeSet};

use controller_kit::conditions::{self, Decided};
use controller_kit::reconcile::describe;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use nats_api::cluster::{
    ConfigAppliedBy, ConfigStatus, NatsCluster, RolloutStatus, ServerRemoval, annotation,
    condition, reason,
};

use super::apply::Applied;
use super::context::Context;
use super::error::Error;
use super::observe_servers::Seen;
use super::refuse::Holds;
use super::{push_rotated_certificates, remove_server, restart};
use crate::rollout::gate::{Gate, MetaObservation, gate_status};
use crate::rollout::next_step::{StepInput, next_step, reported_revisions, running, settled_view};
use crate::rollout::order::{self, Action, Decision, Member, StepKind};
use crate::rollout::removal::RemovalStep;
use crate::rollout::rollout_inputs::{
    Targets, gate_servers, members, meta_observation, volume_mismatches,
};
use crate::rollout::status::{progressing, removal_entry, rollout_status};
use crate::rollout::volume;
use crate::server_lifecycle::{DesiredServer, ObservedServer, ServerLifecycle};

/// The next step as the rollout core chose it, and what it was chosen from.
pub struct Chosen {
    pub gate: Gate,
    pub decision: Decision,
    /// Each server's target revision by ordinal.
    pub targets: Targets,
    /// The revision each answering server reports.
    pub reported: BTreeMap<String, String>,
    /// The servers that answered.
    pub answered: BTreeSet<String>,
    pub meta: MetaObservation,
    /// `status.removals`, with a replacement `replace-server` names recorded.
    pub removals: Vec<ServerRemoval>,
    /// When the choice was made (the gate's and the removals' `since`).
    pub now: Time,
}

impl Chosen {
    /// The servers with the revision each runs for the step order.
    fn running(&self, applied: &Applied) -> Vec<ObservedServer> {
        running(&applied.before, &self.reported)
    }
}

/// Chooses the next step over what was applied and what the servers said.
pub async fn choose<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    seen: &Seen,
    holds: &Holds,
    applied: &Applied,
) -> Result<Chosen, Error> {
    let spec = &cluster.spec;
    let now = conditions::now();
    let replicas = applied.desired.len() as u32;
    let targets: Targets = applied
        .desired
        .iter()
        .map(|d| (d.ordinal, d.revision.clone()))
        .collect();
    let reported = reported_revisions(&applied.desired, &seen.observation);
    let answered: BTreeSet<String> = seen.observation.answers.keys().cloned().collect();
    let meta = meta_observation(spec.jetstream.is_some(), &seen.observation);
    let members_now = members(&running(&applied.before, &reported), &targets);
    let removals = replace_server(ctx, cluster, replicas, &members_now, &now).await?;
    let volume_mismatch = volume_mismatches(volume::desired_shape(spec).as_ref(), &applied.before);
    let replace = order::replacements(replicas, &members_now, &removals, &volume_mismatch);
    let force_step = cluster.annotations().get(annotation::FORCE_STEP);
    let (gate, decision) = next_step(&StepInput {
        replicas,
        observed: &applied.before,
        targets: &targets,
        reported: &reported,
        answered: &answered,
        meta: &meta,
        settled: &settled_view(&seen.settled),
        paused: spec.rollout_paused(),
        force_step: force_step.map(String::as_str),
        // Without restart-all, adding or removing auth was held before any step.
        auth_change: holds.auth_change.clone(),
        restart_all: holds.restart_all,
        replace: &replace,
        removals: &removals,
    });
    if decision.clear_force_step {
        clear_annotation(ctx, cluster, annotation::FORCE_STEP).await?;
    }
    if decision.clear_restart_all {
        clear_annotation(ctx, cluster, annotation::RESTART_ALL).await?;
    }
    Ok(Chosen {
        gate,
        decision,
        targets,
        reported,
        answered,
        meta,
        removals,
        now,
    })
}

/// `replace-server`: recorded in `status.removals` (which carries it across controller
/// restarts) and cleared once read, a name that is no server of this cluster too. Returns
/// `status.removals` with the record.
async fn replace_server<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    replicas: u32,
    members_now: &[Member],
    now: &Time,
) -> Result<Vec<ServerRemoval>, Error> {
    let mut removals: Vec<ServerRemoval> = cluster
        .status
        .as_ref()
        .map(|s| s.removals.clone())
        .unwrap_or_default();
    let named = cluster.annotations().get(annotation::REPLACE_SERVER);
    let read = order::read_replace_server(
        named.map(String::as_str),
        replicas,
        members_now,
        &removals,
        now,
    );
    removals.extend(read.record);
    if read.clear {
        clear_annotation(ctx, cluster, annotation::REPLACE_SERVER).await?;
    }
    if let Some(unknown) = &read.unknown {
        ctx.shared
            .events
            .publish(
                cluster,
                true,
                "ReplaceServerUnknown",
                format!("replace-server names {unknown}, no server of this NatsCluster"),
            )
            .await;
    }
    Ok(removals)
}

/// Removes `key` from the NatsCluster's annotations (force-step, restart-all and
/// replace-server, once read).
async fn clear_annotation<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    key: &str,
) -> Result<(), Error> {
    let api: Api<NatsCluster> = Api::namespaced(
        ctx.shared.client.clone(),
        &cluster.namespace().unwrap_or_default(),
    );
    let patch = serde_json::json!({"metadata": {"annotations": {key: null}}});
    api.patch(
        &cluster.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(Error::kube(format!(
        "{} annotation {key}",
        describe(cluster)
    )))?;
    Ok(())
}

/// What taking the step came to.
#[derive(Default)]
pub struct Taken {
    /// `status.config`: how this pass applied a new revision and why, if it stepped a server.
    pub config: Option<ConfigStatus>,
    /// Servers this pass restarted (a restart step, or every one under restart-all).
    pub restarted: Vec<String>,
    /// The removal step taken, when the step was a removal's.
    pub removal: Option<RemovalStep>,
    /// Objects the removal left because the NatsCluster does not control them.
    pub left: Vec<String>,
    /// `status.removals` after this pass.
    pub removals: Vec<ServerRemoval>,
    /// Progressing=True ReloadPending while servers still serve rotated-out certificates.
    pub certificates: Option<Decided>,
}

/// Takes the chosen step, then reloads rotated certificates where nothing else touches the
/// server, and remembers the plans this pass rendered.
pub async fn take<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    seen: &Seen,
    holds: &Holds,
    applied: &Applied,
    chosen: &Chosen,
) -> Result<Taken, Error> {
    let mut taken = Taken {
        removals: chosen.removals.clone(),
        ..Default::default()
    };
    let desired = |ordinal: u32| applied.desired.iter().find(|d| d.ordinal == ordinal);
    if let Action::Take(s) | Action::Forced(s) = &chosen.decision.action
        && s.kind == StepKind::Restart
        && let Some(d) = desired(s.ordinal)
    {
        let running = chosen.running(applied);
        let old =
            (running.iter().find(|o| o.ordinal == s.ordinal)).and_then(|o| o.revision.clone());
        let how = restart::restart_step(ctx, cluster, d, old.as_deref(), seen).await?;
        if how.applied_by == Some(ConfigAppliedBy::Restart) {
            taken.restarted.push(d.plan.server_name.clone());
        }
        taken.config = Some(how);
    }
    if let Action::RestartAll(steps) = &chosen.decision.action {
        let why = holds
            .auth_change
            .as_ref()
            .map_or_else(String::new, |r| r.message.clone());
        let all: Vec<&DesiredServer> = steps.iter().filter_map(|s| desired(s.ordinal)).collect();
        taken.config = restart::restart_all(ctx, cluster, &all, &why).await?;
        taken
            .restarted
            .extend(all.iter().map(|d| d.plan.server_name.clone()));
    }
    if let Action::Take(s) | Action::ContinueRemoval(s) = &chosen.decision.action
        && let Some(kind) = s.kind.removal()
    {
        let removing = remove_server::Removing {
            step: s,
            kind,
            removals: &taken.removals,
        };
        let (step, left) =
            remove_server::removal_step(ctx, cluster, &removing, applied, &chosen.meta, seen).await;
        taken.left.extend(left);
        let previous = taken.removals.iter().find(|r| r.name == s.server).cloned();
        if !matches!(step, RemovalStep::Failed { .. }) {
            taken.removals.retain(|r| r.name != s.server);
            let entry = removal_entry(&s.server, &step, kind, previous.as_ref(), &chosen.now);
            taken.removals.extend(entry);
        }
        taken.removal = Some(step);
    }
    taken.certificates = push_rotated_certificates::reload_rotated(
        ctx,
        cluster,
        seen,
        applied,
        &chosen.decision,
        &chosen.reported,
    )
    .await;
    for d in &applied.desired {
        ctx.remember(&d.revision, &d.plan);
    }
    Ok(taken)
}

/// What the rollout came to, once the servers were observed again.
pub struct RolloutReport {
    /// `status.rollout`.
    pub status: RolloutStatus,
    /// Progressing as the rollout says: creating, stepping, held by the gate, reloading rotated
    /// certificates; `None` when there is nothing to say beyond the revision.
    pub progressing: Option<Decided>,
}

/// `status.rollout` and Progressing of the step chosen and taken.
pub fn report(
    cluster: &NatsCluster,
    applied: &Applied,
    chosen: &Chosen,
    taken: &Taken,
) -> RolloutReport {
    let decision = &chosen.decision;
    let previous_gate = cluster
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.gate.as_ref());
    let gate = if decision.pending.is_empty() {
        None
    } else {
        gate_status(&chosen.gate, previous_gate, &chosen.now)
    };
    let servers = gate_servers(
        &chosen.running(applied),
        &chosen.targets,
        &chosen.reported,
        &chosen.answered,
    );
    let target = &applied.target;
    let progressing = if !applied.creating.is_empty() {
        Some(Decided::new(
            condition::PROGRESSING,
            true,
            reason::CREATING,
            format!("creating {}", applied.creating.join(", ")),
        ))
    } else if decision.action == Action::UpToDate {
        taken.certificates.clone()
    } else {
        let removal = taken.removal.as_ref();
        Some(progressing(
            target,
            decision,
            removal,
            gate.as_ref(),
            &chosen.now,
        ))
    };
    let status =
        rollout_status(target, &servers, decision, gate).unwrap_or_else(|| RolloutStatus {
            target_revision: Some(target.clone()),
            updated: servers.iter().map(|s| s.name.clone()).collect(),
            ..Default::default()
        });
    RolloutReport {
        status,
        progressing,
    }
}
