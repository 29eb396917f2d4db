//! The steps on the host (kube-apiserver and controllers): a manifest applied, a NatsCluster
//! applied and waited for, an object annotated or waited on, a controller restarted or its leader
//! killed, a server's restart by the controller awaited.

use std::time::Duration;

use super::step_context::StepContext;
use super::{Action, manifest_path};
use crate::control_plane::{ControlPlane, ObjectRef};

/// A step on the host: a manifest applied, a NatsCluster applied and waited for, an object
/// annotated or waited on, a controller restarted, a server's restart by the controller awaited.
pub(super) async fn host_step(
    action: &Action,
    ctx: &mut StepContext,
) -> Result<Option<String>, String> {
    match action {
        Action::ApplyManifest { path } => {
            let applied = ctx
                .host()?
                .apply_manifest(&manifest_path(path), &ctx.vars)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Some(applied.join(", ")))
        }
        Action::ApplyNatsCluster { path, timeout } => {
            let p = manifest_path(path);
            let clusters = ctx.reserve(&p)?;
            if clusters.is_empty() {
                return Err(format!("{} holds no NatsCluster", p.display()));
            }
            let host = ctx.host()?.clone();
            host.apply_manifest(&p, &ctx.vars)
                .await
                .map_err(|e| e.to_string())?;
            for (ns, n) in &clusters {
                host.wait_servers(ns, n, *timeout).await?;
            }
            let names: Vec<String> = clusters.iter().map(|(ns, n)| format!("{ns}/{n}")).collect();
            Ok(Some(names.join(", ")))
        }
        Action::WaitServerRestarted { server, timeout } => {
            wait_server_restarted(ctx.host()?, server, *timeout).await?;
            Ok(Some(server.clone()))
        }
        Action::Annotate { object, annotation } => {
            let r = ObjectRef::parse(object).map_err(|e| e.to_string())?;
            ctx.host()?
                .annotate(&r, annotation)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Some(r.to_string()))
        }
        Action::WaitCondition {
            object,
            condition,
            message,
            timeout,
        } => {
            let r = ObjectRef::parse(object).map_err(|e| e.to_string())?;
            ctx.host()?
                .wait_condition_saying(&r, condition, message.as_deref(), *timeout)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Some(r.to_string()))
        }
        Action::RestartController { controller } => {
            ctx.host()?.restart_controller(controller).await?;
            Ok(Some(controller.clone()))
        }
        Action::KillLeader { controller } => ctx
            .host()?
            .kill_leader(controller)
            .await
            .map(Some)
            .map_err(|e| e.to_string()),
        _ => Err(format!("{} is not a step on the host", action.describe())),
    }
}

/// Waits until `server` was restarted (a rollout step the controller took).
async fn wait_server_restarted(
    host: &ControlPlane,
    server: &str,
    timeout: Duration,
) -> Result<(), String> {
    use crate::server::events::LocalEvent;
    crate::wait::poll(
        &format!("the controller restarting {server}"),
        timeout,
        || async {
            let done = host.server_events().iter().any(|e| {
                (server == super::ANY_SERVER || e.server == server)
                    && e.event == LocalEvent::Restarted
            });
            if done {
                Ok(Some(()))
            } else {
                Err(format!("{server} not restarted yet"))
            }
        },
    )
    .await
    .map_err(|e| e.to_string())
}
