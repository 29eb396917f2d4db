//! The phases of a run on the host (kube-apiserver and the controllers, feature `kube`): the host
//! started (in-process, or the node's as it is), the auth plane or the scenario's NatsClusters
//! deployed on it, the auth plane's accounts recorded, the clients started, the NatsClusters'
//! status watched and the controllers' Events read. Without the feature, `without_host.rs` holds
//! the same phases for a run that has no host.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{Deployment, Run};
use crate::control_plane::{ControlPlane, Host, NodeHost};
use crate::controlled::Controlled;
use crate::scenario::action::default_cluster_wait;
use crate::scenario::auth_plane::{self, Plane};
use crate::scenario::deployed::Deployed;
use crate::scenario::place::Place;
use crate::scenario::progress::line;
use crate::scenario::status_watch::StatusWatch;
use crate::scenario::step_context::StepContext;
use crate::scenario::system_access::{SystemAccess, system_urls};
use crate::scenario::timeline::{ControllerEvent, controller_events};
use crate::scenario::workload::TrafficCreds;
use crate::scenario::{ClientReport, ScenarioError, TrustDecl, client_run, manifest_path};
use crate::server::events::ServerLifecycleEvent;

impl Run<'_, '_> {
    /// The kube-apiserver and the controllers, when the scenario needs them: started in-process
    /// on the local backend, the node's as they are.
    pub(super) async fn start_host(
        &mut self,
        place: &Place<'_>,
    ) -> Result<Option<ControlPlane>, ScenarioError> {
        let scenario = self.scenario;
        if let Place::Node(host) = place {
            return self.node_host(host).await.map(Some);
        }
        if !scenario.needs_host() {
            return Ok(None);
        }
        let backend = place.name();
        if backend != "local" {
            return Err(self.host_err()(format!(
                "controller steps and NatsCluster topologies run on the local and node backends, not {backend}"
            )));
        }
        let namespaces: Vec<&str> = if scenario.namespaces.is_empty() {
            vec![crate::control_plane::DEFAULT_NAMESPACE]
        } else {
            scenario.namespaces.iter().map(String::as_str).collect()
        };
        let known = crate::control_plane::controllers();
        let mut controllers: Vec<&str> = match &scenario.controllers {
            Some(c) => c.iter().map(String::as_str).collect(),
            None => known.keys().copied().collect(),
        };
        if scenario.topology.trust == Some(TrustDecl::Auth) {
            // The auth plane starts its own, with the system connection.
            controllers.retain(|c| *c != "auth");
        }
        let mut named: Vec<&str> = controllers.clone();
        if scenario.topology.trust == Some(TrustDecl::Auth) {
            named.push("auth (with a system connection, once the servers run)");
        }
        self.say(&format!(
            "starting kube-apiserver and the {} controller(s) in-process",
            named.join(", ")
        ));
        let host = Host::start(&namespaces, &controllers)
            .await
            .map_err(|e| self.host_err()(e.to_string()))?;
        for (name, count) in &scenario.replicas {
            self.say(&format!(
                "running {count} replicas of {name} under leader election"
            ));
            host.elect(name, *count)
                .await
                .map_err(|e| self.host_err()(e.to_string()))?;
        }
        Ok(Some(ControlPlane::Local(Arc::new(host))))
    }

    /// The node's control plane, for a scenario it can run: NatsClusters as the topology, under
    /// no auth plane, the controllers one pod each.
    async fn node_host(&mut self, host: &Arc<NodeHost>) -> Result<ControlPlane, ScenarioError> {
        let scenario = self.scenario;
        let host_err = self.host_err();
        let refuse = |why: &str| {
            Err(host_err(format!(
                "scenario {} cannot run on the node backend: {why}",
                scenario.name
            )))
        };
        if scenario.topology.nats_clusters.is_empty() {
            return refuse(
                "its topology is not NatsClusters (the node runs what the cluster controller renders)",
            );
        }
        if scenario.topology.trust == Some(TrustDecl::Auth) {
            return refuse("an auth plane (trust: auth) runs the auth controller in-process");
        }
        for (name, count) in &scenario.replicas {
            let runs = host
                .controller_replicas(name)
                .await
                .map_err(|e| host_err(e.to_string()))?;
            if runs != *count {
                return refuse(&format!(
                    "it asks for {count} replicas of {name}, and the chart runs {runs}"
                ));
            }
            self.say(&format!(
                "the chart runs {runs} replicas of {name} under leader election"
            ));
        }
        let fit = host.fit().describe();
        self.say(&format!(
            "on the node: the controllers are the chart's pods; {fit}"
        ));
        Ok(ControlPlane::Node(host.clone()))
    }

    /// The scenario's NatsClusters, under trust roots the sim signs when it asks for them: every
    /// one's ports reserved first (so one manifest can name another's), then each applied, then
    /// each waited for until every server runs.
    async fn deploy_nats_clusters(
        &mut self,
        ctx: &mut StepContext,
    ) -> Result<Deployment, ScenarioError> {
        let host_err = self.host_err();
        let host = ctx.host.clone().ok_or_else(|| host_err("no host".into()))?;
        let mut creds = TrafficCreds::default();
        if self.scenario.topology.trust == Some(TrustDecl::Generated) {
            let trust = crate::trust::generate().map_err(&host_err)?;
            ctx.vars.extend(trust.vars.clone());
            creds.default = Some(trust.workload_creds);
            self.say("trust roots signed: operator, system account, workload account APP");
        }
        let mut applied = Vec::new();
        let paths: Vec<PathBuf> = self
            .scenario
            .topology
            .nats_clusters
            .iter()
            .map(|p| manifest_path(p))
            .collect();
        for p in &paths {
            applied.extend(ctx.reserve(p).map_err(|e| host_err(e.to_string()))?);
        }
        for p in &paths {
            self.say(&format!("applying NatsCluster manifest {}", p.display()));
            host.apply_manifest(p, &ctx.vars)
                .await
                .map_err(|e| host_err(e.to_string()))?;
        }
        for (ns, n) in &applied {
            host.wait_servers(ns, n, default_cluster_wait())
                .await
                .map_err(&host_err)?;
            self.say(&format!("NatsCluster {ns}/{n}: every server running"));
        }
        let servers: Box<dyn crate::backend::Deployment> = match host {
            ControlPlane::Local(h) => {
                Box::new(Controlled::new(h, &applied).await.map_err(&host_err)?)
            }
            ControlPlane::Node(h) => Box::new(
                crate::node::servers::PodServers::new(
                    h.client(),
                    &applied,
                    h.containers().cloned(),
                )
                .await
                .map_err(&host_err)?,
            ),
        };
        Ok(Deployment {
            deployed: Deployed::Other(servers),
            plane: None,
            creds,
            system_creds: None,
        })
    }

    /// Every client of the scenario, publishing to its server (or to every server).
    pub(super) async fn start_clients(
        &mut self,
        deployed: &Deployed,
        ctx: &mut StepContext,
    ) -> Result<(), ScenarioError> {
        let workload_err = self.workload_err();
        for c in &self.scenario.clients {
            let host = ctx.host().map_err(&workload_err)?.clone();
            let urls = match &c.server {
                Some(s) => vec![
                    deployed
                        .client_urls_by_server()
                        .into_iter()
                        .find(|(n, _)| n == s)
                        .map(|(_, u)| u)
                        .ok_or_else(|| workload_err(format!("client {}: no server {s}", c.name)))?,
                ],
                None => deployed.dep().client_urls(),
            };
            let run = client_run::start(c, &host, urls, &self.ledger, Duration::from_secs(60))
                .await
                .map_err(&workload_err)?;
            self.say(&format!(
                "client {} ({}) publishing {} msg/s to {}",
                c.name, run.user_key, c.rate, c.subject
            ));
            ctx.clients.insert(c.name.clone(), run);
        }
        Ok(())
    }

    /// The Events the controllers published during the run, when there is a host.
    pub(super) async fn controller_events(
        &mut self,
        ctx: &StepContext,
        run_start: chrono::DateTime<chrono::Utc>,
    ) -> Vec<ControllerEvent> {
        let Some(host) = &ctx.host else {
            return Vec::new();
        };
        let api: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::all(host.client());
        match api.list(&Default::default()).await {
            Ok(list) => {
                let json: Vec<serde_json::Value> = list
                    .items
                    .iter()
                    .filter_map(|e| serde_json::to_value(e).ok())
                    .collect();
                controller_events(&json, run_start)
            }
            Err(e) => {
                self.say(&format!("the controllers' Events could not be listed: {e}"));
                Vec::new()
            }
        }
    }

    /// The auth plane's NATS cluster, or the scenario's NatsClusters applied to the host.
    pub(super) async fn deploy_on_host(
        &mut self,
        ctx: &mut StepContext,
    ) -> Result<Deployment, ScenarioError> {
        let topology = &self.scenario.topology;
        if topology.trust != Some(TrustDecl::Auth) {
            return self.deploy_nats_clusters(ctx).await;
        }
        let host = ctx
            .host()
            .and_then(|h| h.local("an auth plane (trust: auth)"))
            .map_err(self.host_err())?
            .clone();
        let host_err = self.host_err();
        let ledger = self.ledger.clone();
        let progress = &mut *self.progress;
        let mut say = |text: &str| progress(&line(ledger.now_ms(), text));
        let (topology, plane) = auth_plane::boot(&host, topology, &ctx.vars, &mut say)
            .await
            .map_err(host_err)?;
        Ok(Deployment {
            deployed: Deployed::Local(Box::new(topology)),
            plane: Some(plane),
            creds: TrafficCreds::default(),
            system_creds: None,
        })
    }

    /// What the auth plane's accounts are: their keys, and which servers' resolvers held them.
    pub(super) async fn record_plane(
        &mut self,
        plane: &Plane,
        deployed: &Deployed,
        ctx: &mut StepContext,
    ) -> Result<(), ScenarioError> {
        let host = ctx
            .host()
            .and_then(|h| h.local("an auth plane"))
            .map_err(self.workload_err())?
            .clone();
        ctx.account_keys = auth_plane::account_keys(&host, plane).await;
        if let Some(topo) = deployed.topology() {
            ctx.resolver_held = auth_plane::resolver_held(topo, &ctx.account_keys);
        }
        Ok(())
    }

    /// How the steps reach the system account (`${sys_servers}` and the moves by hand), where
    /// the topology gives them one: the system user's creds the sim signed, or a config
    /// account's user.
    pub(super) fn record_system_access(
        &self,
        deployed: &Deployed,
        system_creds: Option<String>,
        ctx: &mut StepContext,
    ) {
        let servers = deployed.dep().server_names().len();
        if let Some(creds) = system_creds {
            ctx.system = Some(SystemAccess {
                urls: deployed.dep().client_urls(),
                creds: Some(creds),
                servers,
            });
        }
        if let Some(urls) = system_urls(self.scenario, deployed) {
            ctx.vars.insert(
                "sys_servers".into(),
                serde_json::to_string(&urls).unwrap_or_default(),
            );
            ctx.system = Some(SystemAccess {
                urls,
                creds: None,
                servers,
            });
        }
    }

    /// Samples every NatsCluster's status while the run goes, when there is a host.
    pub(super) fn watch_status(&self, ctx: &StepContext) -> Option<StatusWatch> {
        ctx.host
            .as_ref()
            .map(|h| StatusWatch::start(h.client(), self.ledger.clone()))
    }
}

/// What every client did, each stopped.
pub(super) async fn client_reports(ctx: &mut StepContext) -> Vec<ClientReport> {
    let mut out = Vec::new();
    for (_, c) in std::mem::take(&mut ctx.clients) {
        out.push(c.stop().await);
    }
    out
}

/// What the host's server lifecycle logged (nothing without a host).
pub(super) fn server_events(ctx: &StepContext) -> Vec<ServerLifecycleEvent> {
    ctx.host
        .as_ref()
        .map(|h| h.server_events())
        .unwrap_or_default()
}
