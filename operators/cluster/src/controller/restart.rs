//! A restart step (design §4.2, §4.4): a reload where every changed field reloads and a system
//! user can ask for it (confirmed by the `/varz` digest), a restart otherwise or when the reload
//! fails; and `restart-all`, every server at once. Each returns `status.config`: how the
//! revision was applied and why.

use nats_api::cluster::{ConfigAppliedBy, ConfigStatus, NatsCluster};

use super::context::Context;
use super::error::Error;
use super::observe_servers::Seen;
use crate::apply_mode::{ApplyMode, apply_mode};
use crate::nats::ask_reload::reload_server;
use crate::nats::system_connection::{SystemAccess, dial_system};
use crate::reload::{ReloadDecision, ReloadTiming, Route, config_digest, route};
use crate::render::render_block;
use crate::rollout::status::config_status;
use crate::server_lifecycle::{DesiredServer, ServerLifecycle};

/// Takes one restart step on `d`, running `old`.
///
/// The plan the server runs comes from the plans this controller process rendered (by
/// revision), else from what the server lifecycle stored beside the running config (a controller that
/// restarted mid-rollout still reloads what reloads); one found in neither (a revision from
/// before it started) counts as a restart with that reason, since nothing says which fields
/// changed.
pub async fn restart_step<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    d: &DesiredServer,
    old: Option<&str>,
    seen: &Seen,
) -> Result<ConfigStatus, Error> {
    let old_plan = match old {
        Some(r) => match ctx.recall(r) {
            Some(p) => Some(p),
            None => {
                ctx.server_lifecycle
                    .stored_plan(cluster, d.ordinal, r)
                    .await
            }
        },
        None => None,
    };
    let mode = old_plan
        .as_ref()
        .map(|p| apply_mode(p, &d.plan, &cluster.spec.version));
    let route = route_of(d, old, mode.as_ref(), seen.system.is_some());
    let mut reload_failed: Option<String> = None;
    if route == Route::Reload
        && let Some(access) = &seen.system
    {
        match reload(ctx, cluster, d, access, seen).await {
            Ok(()) => {
                let message = format!(
                    "reloaded {} onto revision {}",
                    d.plan.server_name, d.revision
                );
                ctx.shared
                    .events
                    .publish(cluster, false, "RolloutStep", message)
                    .await;
                let mode = mode.as_ref().unwrap_or(&ApplyMode::Unchanged);
                return Ok(config_status(&d.revision, mode, None, None));
            }
            Err(why) => {
                tracing::warn!(server = %d.plan.server_name, reason = %why, "reload failed; restarting");
                reload_failed = Some(why);
            }
        }
    }
    let written = ctx.server_lifecycle.apply_server(cluster, d).await;
    let message = match &reload_failed {
        None => format!(
            "restarting {} for revision {}",
            d.plan.server_name, d.revision
        ),
        Some(why) => format!(
            "restarting {} for revision {}: its reload failed ({why})",
            d.plan.server_name, d.revision
        ),
    };
    ctx.shared
        .events
        .publish(cluster, false, "RolloutStep", message)
        .await;
    written?;
    Ok(restarted(
        d,
        &route,
        mode.as_ref(),
        reload_failed.as_deref(),
    ))
}

/// How `d` reaches its new revision from `old`: by `mode` when the old plan is known, a restart
/// saying why not otherwise.
fn route_of(d: &DesiredServer, old: Option<&str>, mode: Option<&ApplyMode>, system: bool) -> Route {
    let workload_changed = !old.is_some_and(|o| crate::revision::same_workload(o, &d.revision));
    match mode {
        Some(m) => route(m, system, workload_changed),
        None => Route::Restart {
            reason: format!(
                "the config {} runs (revision {}) was rendered before this controller started; \
                 its changed fields are unknown",
                d.plan.server_name,
                old.unwrap_or("unknown")
            ),
        },
    }
}

/// `status.config` of a restarted server: the route's reason, or the reload's failure.
fn restarted(
    d: &DesiredServer,
    route: &Route,
    mode: Option<&ApplyMode>,
    reload_failed: Option<&str>,
) -> ConfigStatus {
    let restart = |reason: String| ConfigStatus {
        revision: Some(d.revision.clone()),
        applied_by: Some(ConfigAppliedBy::Restart),
        restart_reason: Some(reason),
    };
    match (route, mode) {
        (Route::Restart { reason }, _) => restart(reason.clone()),
        (Route::Reload, Some(m)) => config_status(&d.revision, m, reload_failed, None),
        _ => restart(format!(
            "the rendered config of {} changed outside the fields compared for reload",
            d.plan.server_name
        )),
    }
}

/// Writes `d`'s config, asks its server to reload it over the system user and confirms it by
/// the digest of what was rendered; any error is the reason to restart instead.
async fn reload<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    d: &DesiredServer,
    access: &SystemAccess,
    seen: &Seen,
) -> Result<(), String> {
    ctx.server_lifecycle
        .write_config(cluster, d)
        .await
        .map_err(|e| format!("writing the config of {}: {e}", d.plan.server_name))?;
    let wire = dial_system(&seen.ready, access)
        .await
        .map_err(|e| format!("system connection: {e}"))?;
    let digest = config_digest(&render_block(&d.plan));
    let timing = ReloadTiming::for_projection(ctx.server_lifecycle.config_projection());
    match reload_server(&wire, &d.plan.server_name, &digest, timing).await {
        ReloadDecision::Reloaded | ReloadDecision::AlreadyCurrent => Ok(()),
        ReloadDecision::Restart { reason } => Err(reason),
    }
}

/// `restart-all`: restarts every server in `all` now, one write after the other and no gate
/// between (on Kubernetes every StatefulSet is written, so their pods restart together), since
/// servers with and without an auth plane do not route to each other. No reload is tried: an
/// auth plane is restart-only. Returns `status.config` for the last server written.
pub async fn restart_all<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    all: &[&DesiredServer],
    why: &str,
) -> Result<Option<ConfigStatus>, Error> {
    let names: Vec<&str> = all.iter().map(|d| d.plan.server_name.as_str()).collect();
    let message = format!(
        "restarting {} at once (restart-all): {why}",
        names.join(", ")
    );
    ctx.shared
        .events
        .publish(cluster, false, "RolloutStep", message)
        .await;
    let mut how = None;
    for d in all {
        ctx.server_lifecycle.apply_server(cluster, d).await?;
        how = Some(ConfigStatus {
            revision: Some(d.revision.clone()),
            applied_by: Some(ConfigAppliedBy::Restart),
            restart_reason: Some(format!("restart-all: {why}")),
        });
    }
    Ok(how)
}
