//! Carrying out one step: faults on servers, links, waits, and the controller steps on the
//! host; the steps on objects and clients of an auth plane are in `auth_steps`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use super::clients::ClientRun;
use super::{Action, manifest_path};
use crate::backend::{Deployment, Fault};
use crate::controlled;
use crate::host::{ControlPlane, ObjectRef};
use crate::topology::Topology;

/// The running topology: a sim topology on this machine (the steps on an auth plane read its
/// servers' directories), or any other deployment.
pub(super) enum Deployed {
    Local(Box<Topology>),
    Other(Box<dyn Deployment>),
}

impl Deployed {
    pub(super) fn dep(&self) -> &dyn Deployment {
        match self {
            Deployed::Local(t) => t.as_ref(),
            Deployed::Other(d) => d.as_ref(),
        }
    }

    pub(super) fn dep_mut(&mut self) -> &mut dyn Deployment {
        match self {
            Deployed::Local(t) => t.as_mut(),
            Deployed::Other(d) => d.as_mut(),
        }
    }

    pub(super) fn topology(&self) -> Option<&Topology> {
        match self {
            Deployed::Local(t) => Some(t),
            Deployed::Other(_) => None,
        }
    }

    /// Every hub server with its client URL, in the deployment's order.
    pub(super) fn client_urls_by_server(&self) -> Vec<(String, String)> {
        match self {
            Deployed::Local(t) => t
                .servers()
                .iter()
                .filter(|s| t.spec.leafs.iter().all(|l| l.name != s.cluster))
                .map(|s| (s.name().to_string(), s.client_url()))
                .collect(),
            Deployed::Other(d) => d.server_names().into_iter().zip(d.client_urls()).collect(),
        }
    }
}

/// What the steps share: the host, the manifests' variables, the NatsClusters applied, the
/// clients and the account keys recorded when the workload started.
#[derive(Default)]
pub(super) struct StepContext {
    pub(super) host: Option<ControlPlane>,
    pub(super) vars: BTreeMap<String, String>,
    /// (namespace, name) of every NatsCluster the scenario applied.
    pub(super) clusters: Vec<(String, String)>,
    /// The clients of `clients:`, by name, once the workload started.
    pub(super) clients: BTreeMap<String, ClientRun>,
    /// `Kind/namespace/name` of every NatsAccount of the auth plane → its public key.
    pub(super) account_keys: BTreeMap<String, String>,
    /// Per account key, the sim servers whose resolver directory held its JWT then.
    pub(super) resolver_held: BTreeMap<String, BTreeSet<String>>,
    /// The workload's streams: what `record_leader_spread` counts the leaders of.
    pub(super) streams: Vec<String>,
    /// What each `record_leader_spread` step counted, by its name: stream leaders per server.
    pub(super) leader_counts: BTreeMap<String, BTreeMap<String, u64>>,
    /// How the steps through the system account reach it, where the topology has one.
    pub(super) system: Option<super::hand_moves::SystemAccess>,
    /// Stops every publisher of `publishers` (`stop_publishers`).
    pub(super) publishers_stop: Option<tokio::sync::watch::Sender<bool>>,
    /// The ledger of each publisher, by the stream it publishes to (`audit_stream`).
    pub(super) ledgers: BTreeMap<String, crate::ledger::Ledger>,
    /// The creds the workload connects with, where the sim signed them (`audit_stream`).
    pub(super) workload_creds: Option<String>,
    /// What each publisher sends, by the stream it publishes to (`read_replicas`).
    pub(super) published: BTreeMap<String, crate::traffic::PublisherSpec>,
    /// What each `read_replicas` step found, replica by replica.
    pub(super) replica_reads: Vec<super::ReplicaRead>,
}

impl StepContext {
    pub(super) fn host(&self) -> Result<&ControlPlane, String> {
        self.host
            .as_ref()
            .ok_or_else(|| "the host is not running".to_string())
    }

    fn system_access(&self) -> Result<&super::hand_moves::SystemAccess, String> {
        self.system
            .as_ref()
            .ok_or_else(|| "this topology gives the steps no system account".to_string())
    }

    /// Reserves the ports of the manifest's NatsClusters and records them and their variables.
    pub(super) fn reserve(&mut self, path: &Path) -> Result<Vec<(String, String)>, String> {
        let found = match self.host()? {
            ControlPlane::Local(host) => {
                controlled::reserve(host, path).map_err(|e| e.to_string())?
            }
            ControlPlane::Node(_) => node_clusters(path)?,
        };
        let mut out = Vec::new();
        for (cluster, vars) in found {
            self.vars.extend(vars);
            if !self.clusters.contains(&cluster) {
                self.clusters.push(cluster.clone());
            }
            out.push(cluster);
        }
        Ok(out)
    }

    /// Per server of every NatsCluster applied, its restarts; per controller, its restarts.
    pub(super) async fn restarts(&self) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
        use cluster_controller::lifecycle::ServerLifecycle;
        let mut servers = BTreeMap::new();
        let mut controllers = BTreeMap::new();
        let Some(plane) = &self.host else {
            return (servers, controllers);
        };
        let host = match plane {
            ControlPlane::Local(host) => host,
            ControlPlane::Node(_) => {
                return (plane.server_restarts(), plane.controller_restarts().await);
            }
        };
        for (ns, name) in &self.clusters {
            let Ok(cluster) = controlled::read_cluster(host, ns, name).await else {
                continue;
            };
            if let Ok(observed) = host.lifecycle().observe(&cluster).await {
                for o in observed {
                    servers.insert(o.server_name, o.restarts);
                }
            }
        }
        for c in host.controller_names() {
            controllers.insert(c.clone(), host.controller_restarts(&c).unwrap_or(0));
        }
        (servers, controllers)
    }
}

/// Resolves a server selector against the deployment.
pub(super) async fn resolve(
    dep: &dyn Deployment,
    selector: &str,
    last_faulted: &Option<String>,
) -> Result<String, String> {
    if selector == "last-faulted" {
        return last_faulted
            .clone()
            .ok_or_else(|| "no server was faulted yet".to_string());
    }
    if selector == "meta-leader" {
        return dep
            .meta_leader(Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string());
    }
    if let Some(stream) = selector.strip_prefix("stream-leader:") {
        return dep
            .stream_leader(stream, Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string());
    }
    if let Some(cluster) = selector.strip_prefix("meta-follower:") {
        let leader = dep
            .meta_leader(Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string())?;
        return super::placement::meta_follower(&dep.server_names(), cluster, &leader);
    }
    if let Some(stream) = selector.strip_prefix("stream-follower:") {
        let leader = dep
            .stream_leader(stream, Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string())?;
        return dep
            .server_names()
            .into_iter()
            .find(|n| *n != leader)
            .ok_or_else(|| format!("stream {stream} has no follower"));
    }
    if dep.server_names().iter().any(|n| n == selector) {
        return Ok(selector.to_string());
    }
    Err(format!("no server matches {selector:?}"))
}

/// What a step did: the server or object it acted on, when what it waited for happened
/// (ms since the run began), where it can tell, and the value it read (`wait_status`).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Done {
    pub(super) target: Option<String>,
    pub(super) observed_at_ms: Option<u64>,
    pub(super) value: Option<u64>,
}

/// Carries out one step.
pub(super) async fn run_step(
    deployed: &mut Deployed,
    action: &Action,
    last_faulted: &mut Option<String>,
    ctx: &mut StepContext,
) -> Result<Done, String> {
    match action {
        Action::Delete { .. }
        | Action::WaitGone { .. }
        | Action::WipeStatus { .. }
        | Action::WaitDisconnected { .. }
        | Action::ExpectRefused { .. }
        | Action::ExpectJwtRevokes { .. }
        | Action::WaitAccountAbsent { .. } => {
            super::auth_steps::run(deployed, action, last_faulted, ctx).await
        }
        Action::WaitStatus { .. } => super::status_steps::run(action, ctx).await,
        Action::MoveByHand { from, to, timeout } => {
            let access = ctx.system_access()?;
            super::hand_moves::move_by_hand(access, from, to, *timeout).await
        }
        Action::WaitGroupsSettled { cluster, timeout } => {
            let access = ctx.system_access()?;
            super::hand_moves::wait_groups_settled(access, cluster, *timeout).await
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

/// A step on the host: a manifest applied, a NatsCluster applied and waited for, an object
/// annotated or waited on, a controller restarted, a server's restart by the controller awaited.
async fn host_step(action: &Action, ctx: &mut StepContext) -> Result<Option<String>, String> {
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
        _ => not_a_server_step(action),
    }
}

/// Waits until `server` was restarted (a rollout step the controller took).
async fn wait_server_restarted(
    host: &ControlPlane,
    server: &str,
    timeout: Duration,
) -> Result<(), String> {
    use crate::local::LocalEvent;
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

/// The NatsClusters of the manifest at `path` on the node, with the variable naming each one's
/// client Service (`<name>.client`, `<name>.clients`): the node's servers have no ports to
/// reserve, and a gateway or leaf URL is not named (topologies of several NatsClusters run on the
/// local backend).
fn node_clusters(path: &Path) -> Result<Vec<crate::controlled::Reserved>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(controlled::nats_clusters_in(&text)
        .into_iter()
        .map(|(ns, name, _)| {
            let url = format!("nats://{name}.{ns}.svc:4222");
            let vars = vec![
                (format!("{name}.client"), url.clone()),
                (
                    format!("{name}.clients"),
                    serde_json::to_string(&[&url]).unwrap_or_default(),
                ),
            ];
            ((ns, name), vars)
        })
        .collect())
}
