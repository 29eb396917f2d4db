//! The phases of a run on the host, in a sim built without the Kubernetes harnesses (feature
//! `kube`): there is no host, so a scenario that needs one is refused before anything starts, and
//! what a host would have added to the report (clients, the NatsClusters' status, the controllers'
//! Events, the server lifecycle's log) is empty. `host.rs` holds the phases with the feature.

use super::{Deployment, Run};
use crate::scenario::deployed::Deployed;
use crate::scenario::place::Place;
use crate::scenario::status_watch::StatusWatch;
use crate::scenario::step_context::StepContext;
use crate::scenario::timeline::ControllerEvent;
use crate::scenario::{ClientReport, HostPlane, ScenarioError, without_harnesses};
use crate::server::events::ServerLifecycleEvent;

/// No auth plane boots without a host.
pub(super) type Plane = std::convert::Infallible;

impl Run<'_, '_> {
    /// No host: a scenario that needs one is refused here, before its topology starts.
    pub(super) async fn start_host(
        &mut self,
        _place: &Place<'_>,
    ) -> Result<Option<HostPlane>, ScenarioError> {
        if self.scenario.needs_harnesses() {
            return Err(self.host_err()(without_harnesses(&format!(
                "scenario {}",
                self.scenario.name
            ))));
        }
        Ok(None)
    }

    /// The auth plane and NatsClusters are deployed on a host, which there is not.
    pub(super) async fn deploy_on_host(
        &mut self,
        _ctx: &mut StepContext,
    ) -> Result<Deployment, ScenarioError> {
        Err(self.host_err()(without_harnesses(
            "an auth plane or NatsCluster topology",
        )))
    }

    pub(super) async fn record_plane(
        &mut self,
        plane: &Plane,
        _deployed: &Deployed,
        _ctx: &mut StepContext,
    ) -> Result<(), ScenarioError> {
        match *plane {}
    }

    /// Clients connect with creds the auth controller wrote: none without a host.
    pub(super) async fn start_clients(
        &mut self,
        _deployed: &Deployed,
        _ctx: &mut StepContext,
    ) -> Result<(), ScenarioError> {
        match self.scenario.clients.first() {
            Some(c) => Err(self.workload_err()(without_harnesses(&format!(
                "client {}",
                c.name
            )))),
            None => Ok(()),
        }
    }

    /// The system account is reached by the steps built with the harnesses (the moves by hand,
    /// the manifests' `${sys_servers}`): nothing to record.
    pub(super) fn record_system_access(
        &self,
        _deployed: &Deployed,
        _system_creds: Option<String>,
        _ctx: &mut StepContext,
    ) {
    }

    /// The controllers' Events: none without a host.
    pub(super) async fn controller_events(
        &mut self,
        ctx: &StepContext,
        _run_start: chrono::DateTime<chrono::Utc>,
    ) -> Vec<ControllerEvent> {
        no_host(ctx)
    }

    /// The NatsClusters' status: none without a host.
    pub(super) fn watch_status(&self, ctx: &StepContext) -> Option<StatusWatch> {
        no_host(ctx)
    }
}

/// The clients: none start without a host.
pub(super) async fn client_reports(_ctx: &mut StepContext) -> Vec<ClientReport> {
    Vec::new()
}

/// The server lifecycle's log: the host's, so none.
pub(super) fn server_events(ctx: &StepContext) -> Vec<ServerLifecycleEvent> {
    no_host(ctx)
}

/// What a host would have given: there is none, as its type says (it has no values).
fn no_host<T: Default>(ctx: &StepContext) -> T {
    match &ctx.host {
        Some(host) => match *host {},
        None => T::default(),
    }
}
