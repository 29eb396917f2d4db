//! Running a scenario, phase by phase: the host when it needs one, the topology, the workload
//! (JetStream traffic and clients), the steps in time order, then the report.

use std::time::Duration;

#[cfg(feature = "kube")]
use self::host::{client_reports, server_events};
#[cfg(not(feature = "kube"))]
use self::without_host::{Plane, client_reports, server_events};
#[cfg(feature = "kube")]
use super::auth_plane::Plane;
use super::deployed::Deployed;
use super::leaders::{END_SPREAD, count_stream_leaders, judge_leader_expectations};
use super::place::Place;
use super::progress::{Progress, line};
use super::report::ratios;
use super::report::{finish, judge_rollout_expectations, judge_step_figures};
use super::status_steps::{judge_counts, status_figures};
use super::step_context::StepContext;
use super::steps::run_step;
use super::timeline::{ServerChange, ServerEvent, server_events_of_steps, server_timeline};
use super::workload::{Traffic, TrafficCreds};
use super::{
    Action, LeaderCount, Report, Scenario, ScenarioError, Step, StepOutcome, TrustDecl,
    judges_timings, rollout_steps, step_figures,
};
use crate::backend::Backend;
#[cfg(feature = "kube")]
use crate::control_plane::NodeHost;
use crate::ledger::Ledger;

#[cfg(feature = "kube")]
mod host;
#[cfg(not(feature = "kube"))]
mod without_host;

/// What every phase of one run shares: the scenario, its ledger (whose clock the progress lines
/// read) and where those lines go.
struct Run<'a, 'p> {
    scenario: &'a Scenario,
    ledger: Ledger,
    progress: Progress<'p>,
}

/// The topology a run deployed, and what deploying it signed.
struct Deployment {
    deployed: Deployed,
    /// The auth plane the sim booted (`trust: auth`).
    plane: Option<Plane>,
    /// The workload users' creds when the sim signed the trust roots (`trust: generated`).
    creds: TrafficCreds,
    /// The system user's creds when the sim signed a sim topology's trust roots.
    system_creds: Option<String>,
}

/// Runs a scenario on `backend`; the report says whether it passed.
pub async fn run(
    scenario: &Scenario,
    backend: &dyn Backend,
    progress: Progress<'_>,
) -> Result<Report, ScenarioError> {
    run_at(scenario, Place::Backend(backend), progress).await
}

/// Runs a scenario whose topology is NatsClusters on the node `host` (its controllers the
/// chart's pods); the report says whether it passed, and that the node ran it.
#[cfg(feature = "kube")]
pub async fn run_on_node(
    scenario: &Scenario,
    host: std::sync::Arc<NodeHost>,
    progress: Progress<'_>,
) -> Result<Report, ScenarioError> {
    run_at(scenario, Place::Node(host), progress).await
}

/// Runs a scenario at `place`.
pub async fn run_at(
    scenario: &Scenario,
    place: Place<'_>,
    progress: Progress<'_>,
) -> Result<Report, ScenarioError> {
    let run_start = chrono::Utc::now();
    let started_at = run_start.to_rfc3339();
    let clock = std::time::Instant::now();
    let mut run = Run {
        scenario,
        ledger: Ledger::new(),
        progress,
    };
    let mut ctx = StepContext {
        host: run.start_host(&place).await?,
        streams: scenario.stream_names(),
        ..StepContext::default()
    };
    let Deployment {
        mut deployed,
        plane,
        creds,
        system_creds,
    } = run.deploy(&place, &mut ctx).await?;
    let deployed_ms = run.ledger.now_ms();
    let server_names = deployed.dep().server_names();
    let meta = run
        .topology_ready(&deployed, system_creds, &mut ctx)
        .await?;
    let status_watch = run.watch_status(&ctx);
    let mut traffic = run
        .start_workload(&deployed, &creds, plane.as_ref(), &mut ctx)
        .await?;
    let workload_start = run.ledger.now_ms();
    let mut failures = Vec::new();
    let steps = run
        .run_steps(&mut deployed, &mut ctx, workload_start, &mut failures)
        .await;

    let drained = traffic
        .finish(&run.ledger, run.progress, &mut failures)
        .await;
    let (events, figures, publishers) = traffic.figures(&run.ledger, drained);
    let stream_leaders = run
        .stream_leaders(&deployed, &mut ctx, &steps, &mut failures)
        .await;
    let cluster_status = status_watch.map(|w| w.stop()).unwrap_or_default();
    let client_reports = client_reports(&mut ctx).await;
    let backend_name = deployed.dep().backend();
    let restarts = ctx.restarts().await;
    let (restart_order, log, mut servers) = server_timeline(server_events(&ctx), &run.ledger);
    let controller_events = run.controller_events(&ctx, run_start).await;
    drop(deployed);
    let mut report = finish(
        scenario,
        backend_name,
        started_at,
        clock,
        (events, figures),
        failures,
        steps,
    );
    (report.server_restarts, report.controller_restarts) = restarts;
    report.server_restart_order = restart_order;
    report.meta_leader_at_start = Some(meta);
    report.rollout_steps = rollout_steps(&log);
    report.step_figures = step_figures(&scenario.steps, &report.steps);
    report.ratios = ratios(&scenario.ratios, &report.step_figures);
    report.publishers = publishers;
    report.status_figures = status_figures(&scenario.steps, &report.steps);
    report.clients = client_reports;
    servers.extend(server_events_of_steps(&scenario.steps, &report.steps));
    // Servers the sim started itself (no server lifecycle saw them start) are up once deployed.
    for name in &server_names {
        if !log.iter().any(|(_, s, _)| s == name) {
            servers.push(ServerEvent::new(deployed_ms, name, ServerChange::Started));
        }
    }
    servers.sort_by_key(|e| e.at_ms);
    report.servers = servers;
    report.controller_events = controller_events;
    report.cluster_status = cluster_status;
    report.stream_leaders = stream_leaders;
    report.replicas = std::mem::take(&mut ctx.replica_reads);
    judge_step_figures(scenario, &mut report, judges_timings());
    judge_leader_expectations(scenario, &mut report);
    judge_rollout_expectations(scenario, &mut report);
    judge_counts(scenario, &mut report);
    report.passed = report.failures.is_empty();
    Ok(report)
}

impl Run<'_, '_> {
    /// A progress line at the ledger's present.
    fn say(&mut self, text: &str) {
        (self.progress)(&line(self.ledger.now_ms(), text));
    }

    fn host_err(&self) -> impl Fn(String) -> ScenarioError + use<> {
        let name = self.scenario.name.clone();
        move |message| ScenarioError::Host {
            name: name.clone(),
            message,
        }
    }

    fn workload_err(&self) -> impl Fn(String) -> ScenarioError + use<> {
        let name = self.scenario.name.clone();
        move |message| ScenarioError::Workload {
            name: name.clone(),
            message,
        }
    }

    fn backend_err(&self) -> impl Fn(crate::backend::BackendError) -> ScenarioError + use<> {
        let name = self.scenario.name.clone();
        move |source| ScenarioError::Backend {
            name: name.clone(),
            source,
        }
    }

    /// The stream leaders the `record_leader_spread` steps counted (each at its completion),
    /// then, where an expectation names `stream_leader_spread`, those counted now: the end of
    /// the run.
    async fn stream_leaders(
        &mut self,
        deployed: &Deployed,
        ctx: &mut StepContext,
        outcomes: &[StepOutcome],
        failures: &mut Vec<String>,
    ) -> Vec<LeaderCount> {
        let mut out = Vec::new();
        for (step, o) in self.scenario.steps.iter().zip(outcomes) {
            if let Action::RecordLeaderSpread { name } = &step.action
                && let Some(counted) = ctx.leader_counts.remove(name)
            {
                out.push(LeaderCount::new(name, o.done_at_ms(), counted));
            }
        }
        if self.scenario.expect.contains_key(END_SPREAD) {
            match count_stream_leaders(deployed.dep(), &ctx.streams).await {
                Ok(counted) => {
                    let c = LeaderCount::new(END_SPREAD, self.ledger.now_ms(), counted);
                    self.say(&format!("stream leaders at the end: {}", c.describe()));
                    out.push(c);
                }
                Err(e) => failures.push(format!("{END_SPREAD}: {e}")),
            }
        }
        out
    }

    /// The topology: a topology of the backend, or the auth plane's NATS cluster or the scenario's
    /// NatsClusters on the host.
    async fn deploy(
        &mut self,
        place: &Place<'_>,
        ctx: &mut StepContext,
    ) -> Result<Deployment, ScenarioError> {
        let topology = &self.scenario.topology;
        if topology.trust == Some(TrustDecl::Auth) {
            return self.deploy_on_host(ctx).await;
        }
        if let (true, Place::Backend(backend)) = (topology.nats_clusters.is_empty(), place) {
            let mut spec = topology.to_spec();
            let (mut creds, mut system_creds) = (TrafficCreds::default(), None);
            if topology.trust == Some(TrustDecl::Generated) {
                let signed = crate::trust::sign_topology(&topology.account_names())
                    .map_err(self.host_err())?;
                self.say(&format!(
                    "trust roots signed: operator, system account, JetStream accounts {}",
                    topology.account_names().join(", ")
                ));
                spec.auth = crate::topology::Auth::Operator(signed.operator);
                ctx.vars.insert(
                    "trust.system_creds".into(),
                    serde_json::to_string(&signed.system_creds).unwrap_or_default(),
                );
                creds.default = signed.account_creds.values().next().cloned();
                creds.accounts = signed.account_creds;
                system_creds = Some(signed.system_creds);
            }
            (self.progress)(&line(
                0,
                &format!(
                    "starting {} cluster(s) × {} server(s){}{} on the {} backend",
                    spec.clusters.len(),
                    topology.servers,
                    spec.gateways
                        .map(|g| format!(", gateways {g:?}"))
                        .unwrap_or_default(),
                    if spec.leafs.is_empty() {
                        String::new()
                    } else {
                        format!(", {} leaf(s)", spec.leafs.len())
                    },
                    backend.name()
                ),
            ));
            let deployed = backend.start(&spec).await.map_err(self.backend_err())?;
            return Ok(Deployment {
                deployed: Deployed::Other(deployed),
                plane: None,
                creds,
                system_creds,
            });
        }
        self.deploy_on_host(ctx).await
    }

    /// Names the servers for the steps (`${servers}`), tells them how to reach the system
    /// account, where they can, and waits for the meta leader.
    async fn topology_ready(
        &mut self,
        deployed: &Deployed,
        system_creds: Option<String>,
        ctx: &mut StepContext,
    ) -> Result<String, ScenarioError> {
        ctx.vars.insert(
            "servers".into(),
            serde_json::to_string(&deployed.dep().client_urls()).unwrap_or_default(),
        );
        self.record_system_access(deployed, system_creds, ctx);
        let meta = deployed
            .dep()
            .meta_leader(Duration::from_secs(30))
            .await
            .map_err(self.backend_err())?;
        self.say(&format!("topology ready, meta leader {meta}"));
        Ok(meta)
    }

    /// The JetStream traffic, what the auth plane's accounts are, and the clients.
    async fn start_workload(
        &mut self,
        deployed: &Deployed,
        creds: &TrafficCreds,
        plane: Option<&Plane>,
        ctx: &mut StepContext,
    ) -> Result<Traffic, ScenarioError> {
        let workload_err = self.workload_err();
        let mut traffic = if self.scenario.workload.is_empty() {
            Traffic::default()
        } else {
            Traffic::start(self.scenario, deployed, creds, &self.ledger)
                .await
                .map_err(&workload_err)?
        };
        ctx.publishers_stop = traffic.publishers_stop.take();
        if let Some(p) = &self.scenario.workload.publisher {
            ctx.ledgers.insert(p.stream.clone(), self.ledger.clone());
            ctx.published.insert(p.stream.clone(), p.spec.clone());
        }
        for p in &self.scenario.workload.publishers {
            ctx.published.insert(p.stream.clone(), p.spec.clone());
        }
        for lane in &traffic.lanes {
            ctx.ledgers.insert(lane.stream.clone(), lane.ledger.clone());
        }
        ctx.workload_creds = creds.default.clone();
        for l in &traffic.lines {
            self.say(l);
        }
        if let Some(p) = plane {
            self.record_plane(p, deployed, ctx).await?;
        }
        self.start_clients(deployed, ctx).await?;
        Ok(traffic)
    }

    /// Every step at its time after `workload_start`; a failed step is a failure of the run, and
    /// the next step runs all the same.
    async fn run_steps(
        &mut self,
        deployed: &mut Deployed,
        ctx: &mut StepContext,
        workload_start: u64,
        failures: &mut Vec<String>,
    ) -> Vec<StepOutcome> {
        let mut last_faulted: Option<String> = None;
        let mut outcomes = Vec::new();
        for (i, step) in self.scenario.steps.iter().enumerate() {
            let due = workload_start + step.at.as_millis() as u64;
            let now = self.ledger.now_ms();
            if due > now {
                tokio::time::sleep(Duration::from_millis(due - now)).await;
            }
            let outcome = self
                .run_one_step(i, step, deployed, &mut last_faulted, ctx)
                .await;
            if let Some(e) = &outcome.error {
                failures.push(format!(
                    "step {} ({}) failed: {e}",
                    i + 1,
                    step.action.describe()
                ));
            }
            outcomes.push(outcome);
        }
        outcomes
    }

    /// Step `i`, marked in the ledger, timed and told.
    async fn run_one_step(
        &mut self,
        i: usize,
        step: &Step,
        deployed: &mut Deployed,
        last_faulted: &mut Option<String>,
        ctx: &mut StepContext,
    ) -> StepOutcome {
        let t0 = self.ledger.now_ms();
        self.ledger
            .step(format!("step {}: {}", i + 1, step.action.describe()));
        let result = run_step(deployed, &step.action, last_faulted, ctx).await;
        let took = self.ledger.now_ms() - t0;
        let (ok, target, observed_at_ms, value, error) = match result {
            Ok(d) => (true, d.target, d.observed_at_ms, d.value, None),
            Err(e) => (false, None, None, None, Some(e)),
        };
        (self.progress)(&line(
            t0,
            &format!(
                "step {}/{} {}{}: {} ({} ms)",
                i + 1,
                self.scenario.steps.len(),
                step.action.describe(),
                target
                    .as_ref()
                    .map(|t| format!(" -> {t}"))
                    .unwrap_or_default(),
                match &error {
                    None => "ok".to_string(),
                    Some(e) => format!("FAILED: {e}"),
                },
                took
            ),
        ));
        StepOutcome {
            index: i + 1,
            at_ms: t0,
            action: step.action.describe(),
            target,
            ok,
            error,
            took_ms: took,
            id: step.id.clone(),
            observed_at_ms,
            value,
        }
    }
}
