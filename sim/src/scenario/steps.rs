//! Carrying out one step: faults on servers, links, waits, and the controller steps on the
//! host; the steps on objects and clients of an auth plane are in `auth_steps`.

use std::time::Duration;

use super::Action;
use crate::backend::{Deployment, Fault};

use super::deployed::{Deployed, Done};
#[cfg(feature = "kube")]
use super::host_steps::host_step;
use super::step_context::{StepContext, resolve};

/// Carries out one step.
pub(super) async fn run_step(
    deployed: &mut Deployed,
    action: &Action,
    last_faulted: &mut Option<String>,
    ctx: &mut StepContext,
) -> Result<Done, String> {
    match action {
        #[cfg(feature = "kube")]
        Action::Delete { .. }
        | Action::WaitGone { .. }
        | Action::WipeStatus { .. }
        | Action::WaitDisconnected { .. }
        | Action::ExpectRefused { .. }
        | Action::ExpectJwtRevokes { .. }
        | Action::WaitAccountAbsent { .. } => {
            super::auth_steps::run(deployed, action, last_faulted, ctx).await
        }
        #[cfg(feature = "kube")]
        Action::WaitStatus { .. } => super::status_steps::run(action, ctx).await,
        #[cfg(feature = "kube")]
        Action::MoveByHand { from, to, timeout } => {
            let access = ctx.system_access()?;
            super::hand_moves::move_by_hand(access, from, to, *timeout).await
        }
        #[cfg(feature = "kube")]
        Action::WaitGroupsSettled { cluster, timeout } => {
            let access = ctx.system_access()?;
            super::hand_moves::wait_groups_settled(access, cluster, *timeout).await
        }
        #[cfg(not(feature = "kube"))]
        a if a.needs_controllers() || a.client().is_some() || a.reads_as_the_controller() => {
            Err(super::without_harnesses(&a.describe()))
        }
        Action::StopPublishers {} => {
            let stop = ctx
                .publishers_stop
                .as_ref()
                .ok_or("the workload has no publishers to stop")?;
            stop.send_replace(true);
            Ok(Done::default())
        }
        Action::LoseUnsynced { .. } | Action::Corrupt { .. } => {
            super::store_faults::run(deployed, action, last_faulted).await
        }
        Action::CutRoutes { .. } | Action::RestoreRoutes { .. } => {
            super::route_steps::run(deployed, action, last_faulted).await
        }
        Action::AuditStream {
            stream, timeout, ..
        } => super::store_faults::audit_stream(deployed, ctx, stream, *timeout).await,
        Action::ReadReplicas { stream, timeout } => {
            super::replica_reads::read_replicas(deployed, ctx, stream, *timeout).await
        }
        Action::WaitStreamsSettled {
            cluster,
            streams,
            timeout,
        } => {
            super::placement::wait_streams_settled(deployed.dep(), cluster, streams, *timeout).await
        }
        _ => run_server_step(deployed.dep_mut(), action, last_faulted, ctx)
            .await
            .map(|target| Done {
                target,
                ..Done::default()
            }),
    }
}

/// The steps on servers, links and the host's controllers.
async fn run_server_step(
    dep: &mut dyn Deployment,
    action: &Action,
    last_faulted: &mut Option<String>,
    ctx: &mut StepContext,
) -> Result<Option<String>, String> {
    match action {
        Action::Kill9 { .. }
        | Action::Sigterm { .. }
        | Action::LameDuck { .. }
        | Action::Pause { .. }
        | Action::Resume { .. }
        | Action::Restart { .. }
        | Action::WipeStore { .. } => fault_step(dep, action, last_faulted).await,
        Action::Reload { .. }
        | Action::CutGateway { .. }
        | Action::RestoreGateway { .. }
        | Action::CutLeaf { .. }
        | Action::RestoreLeaf { .. }
        | Action::WaitMetaLeader { .. }
        | Action::WaitStreamLeader { .. }
        | Action::WaitHealthz { .. }
        | Action::WaitExited { .. } => deployment_step(dep, action, last_faulted).await,
        Action::RecordLeaderSpread { name } => {
            let counted = super::leaders::count_stream_leaders(dep, &ctx.streams).await?;
            let said = super::LeaderCount::new(name, 0, counted.clone()).describe();
            ctx.leader_counts.insert(name.clone(), counted);
            Ok(Some(said))
        }
        Action::ApplyManifest { .. }
        | Action::ApplyNatsCluster { .. }
        | Action::WaitServerRestarted { .. }
        | Action::Annotate { .. }
        | Action::WaitCondition { .. }
        | Action::RestartController { .. }
        | Action::KillLeader { .. } => host_step(action, ctx).await,
        Action::Delete { .. }
        | Action::WaitGone { .. }
        | Action::WipeStatus { .. }
        | Action::WaitDisconnected { .. }
        | Action::ExpectRefused { .. }
        | Action::ExpectJwtRevokes { .. }
        | Action::WaitAccountAbsent { .. }
        | Action::WaitStatus { .. }
        | Action::WaitStreamsSettled { .. }
        | Action::MoveByHand { .. }
        | Action::WaitGroupsSettled { .. }
        | Action::LoseUnsynced { .. }
        | Action::Corrupt { .. }
        | Action::CutRoutes { .. }
        | Action::RestoreRoutes { .. }
        | Action::AuditStream { .. }
        | Action::ReadReplicas { .. }
        | Action::StopPublishers {} => not_a_server_step(action),
    }
}

fn not_a_server_step(action: &Action) -> Result<Option<String>, String> {
    Err(format!("{} is not a step on servers", action.describe()))
}

/// A fault on one server (the one the selector names); it becomes the last faulted server.
async fn fault_step(
    dep: &mut dyn Deployment,
    action: &Action,
    last_faulted: &mut Option<String>,
) -> Result<Option<String>, String> {
    let (selector, f) = match action {
        Action::Kill9 { server } => (server, Fault::Kill9),
        Action::Sigterm { server } => (server, Fault::Sigterm),
        Action::LameDuck { server } => (server, Fault::LameDuck),
        Action::Pause { server } => (server, Fault::Pause),
        Action::Resume { server } => (server, Fault::Resume),
        Action::Restart { server } => (server, Fault::Restart),
        Action::WipeStore { server } => (server, Fault::WipeStore),
        _ => return not_a_server_step(action),
    };
    let s = resolve(dep, selector, last_faulted).await?;
    dep.fault(&s, f).await.map_err(|e| e.to_string())?;
    *last_faulted = Some(s.clone());
    Ok(Some(s))
}

/// A reload, a link cut or restored, or a wait on the deployment's servers.
async fn deployment_step(
    dep: &mut dyn Deployment,
    action: &Action,
    last_faulted: &mut Option<String>,
) -> Result<Option<String>, String> {
    match action {
        Action::Reload { server, append } => {
            let s = resolve(dep, server, last_faulted).await?;
            dep.reload_with(&s, append)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Some(s))
        }
        Action::CutGateway { a, b } => {
            dep.gateway_link(a, b, true)
                .await
                .map_err(|e| e.to_string())?;
            Ok(None)
        }
        Action::RestoreGateway { a, b } => {
            dep.gateway_link(a, b, false)
                .await
                .map_err(|e| e.to_string())?;
            Ok(None)
        }
        Action::CutLeaf { leaf } => {
            dep.leaf_link(leaf, true).await.map_err(|e| e.to_string())?;
            Ok(None)
        }
        Action::RestoreLeaf { leaf } => {
            dep.leaf_link(leaf, false)
                .await
                .map_err(|e| e.to_string())?;
            Ok(None)
        }
        Action::WaitMetaLeader { timeout } => dep
            .meta_leader(*timeout)
            .await
            .map(Some)
            .map_err(|e| e.to_string()),
        Action::WaitStreamLeader {
            stream,
            other_than,
            timeout,
        } => {
            let avoid = match other_than {
                Some(sel) => Some(resolve(dep, sel, last_faulted).await?),
                None => None,
            };
            wait_stream_leader(dep, stream, avoid.as_deref(), *timeout)
                .await
                .map(Some)
        }
        Action::WaitHealthz { timeout } => {
            dep.wait_healthz(*timeout)
                .await
                .map_err(|e| e.to_string())?;
            Ok(None)
        }
        Action::WaitExited { server, timeout } => {
            let s = resolve(dep, server, last_faulted).await?;
            dep.wait_exited(&s, *timeout)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Some(s))
        }
        _ => not_a_server_step(action),
    }
}

/// Waits until `stream` has a leader other than `avoid`; returns it.
async fn wait_stream_leader(
    dep: &mut dyn Deployment,
    stream: &str,
    avoid: Option<&str>,
    timeout: Duration,
) -> Result<String, String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let leader = dep
            .stream_leader(stream, left)
            .await
            .map_err(|e| e.to_string())?;
        if avoid != Some(leader.as_str()) {
            return Ok(leader);
        }
        if left.is_zero() {
            return Err(format!("{stream} is still led by {leader}"));
        }
        tokio::time::sleep(crate::wait::POLL_INTERVAL).await;
    }
}

/// Without the Kubernetes harnesses there is no host to take a step on.
#[cfg(not(feature = "kube"))]
async fn host_step(action: &Action, _: &mut StepContext) -> Result<Option<String>, String> {
    Err(super::without_harnesses(&action.describe()))
}
