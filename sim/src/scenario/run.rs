//! Running a scenario: the host when it needs one, the topology, the workload (JetStream traffic
//! and clients), the steps in time order, then the report.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use tokio::task::JoinHandle;

use super::report::{finish, judge_step_figures};
use super::steps::{Deployed, StepContext, run_step};
use super::{
    DRAIN_DEADLINE, ExpectationOutcome, Report, Rule, Scenario, ScenarioError, StepOutcome,
    TrustDecl, auth_plane, clients, default_cluster_wait, judges_timings, manifest_path,
    rollout_figure, rollout_steps, step_figures,
};
use crate::backend::Backend;
use crate::controlled::{self, Controlled};
use crate::host::Host;
use crate::ledger::{Event, Ledger};
use crate::traffic;

/// Where progress lines go (stdout for the CLI, captured in tests).
pub type Progress<'a> = &'a mut (dyn FnMut(&str) + Send);

/// Runs a scenario on `backend`; the report says whether it passed.
pub async fn run(
    scenario: &Scenario,
    backend: &dyn Backend,
    progress: Progress<'_>,
) -> Result<Report, ScenarioError> {
    let started_at = chrono::Utc::now().to_rfc3339();
    let clock = std::time::Instant::now();
    let name = scenario.name.clone();
    let ledger = Ledger::new();
    let mut failures = Vec::new();
    let mut steps_out = Vec::new();
    let line = |t: u64, text: &str| format!("[{:>6.1}s] {text}", t as f64 / 1000.0);

    let host_err = |message: String| ScenarioError::Host {
        name: name.clone(),
        message,
    };
    let mut ctx = StepContext::default();
    if scenario.needs_host() {
        if backend.name() != "local" {
            return Err(host_err(format!(
                "controller steps and NatsCluster topologies run on the local backend only, not {}",
                backend.name()
            )));
        }
        let namespaces: Vec<&str> = if scenario.namespaces.is_empty() {
            vec![crate::host::DEFAULT_NAMESPACE]
        } else {
            scenario.namespaces.iter().map(String::as_str).collect()
        };
        let known = crate::host::controllers();
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
        progress(&line(
            ledger.now_ms(),
            &format!(
                "starting kube-apiserver and the {} controller(s) in-process",
                named.join(", ")
            ),
        ));
        let host = Host::start(&namespaces, &controllers)
            .await
            .map_err(|e| host_err(e.to_string()))?;
        ctx.host = Some(Arc::new(host));
    }

    // The workload user's creds when the sim signed the trust roots.
    let mut workload_creds: Option<String> = None;
    let mut plane = None;
    let mut deployed =
        if scenario.topology.trust == Some(TrustDecl::Auth) {
            let host = ctx.host.clone().ok_or_else(|| host_err("no host".into()))?;
            let mut say = |text: &str| progress(&line(ledger.now_ms(), text));
            let (topology, p) = auth_plane::boot(&host, &scenario.topology, &ctx.vars, &mut say)
                .await
                .map_err(&host_err)?;
            plane = Some(p);
            Deployed::Local(Box::new(topology))
        } else if scenario.topology.nats_clusters.is_empty() {
            let spec = scenario.topology.to_spec();
            progress(&line(
                0,
                &format!(
                    "starting {} cluster(s) × {} server(s){}{} on the {} backend",
                    spec.clusters.len(),
                    scenario.topology.servers,
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
            Deployed::Other(backend.start(&spec).await.map_err(|source| {
                ScenarioError::Backend {
                    name: name.clone(),
                    source,
                }
            })?)
        } else {
            let host = ctx.host.clone().ok_or_else(|| host_err("no host".into()))?;
            if scenario.topology.trust == Some(TrustDecl::Generated) {
                let trust = crate::trust::generate().map_err(&host_err)?;
                ctx.vars.extend(trust.vars.clone());
                workload_creds = Some(trust.workload_creds);
                progress(&line(
                    ledger.now_ms(),
                    "trust roots signed: operator, system account, workload account APP",
                ));
            }
            let mut applied = Vec::new();
            // Every NatsCluster's ports first, so one manifest can name another's.
            let paths: Vec<PathBuf> = scenario
                .topology
                .nats_clusters
                .iter()
                .map(|p| manifest_path(p))
                .collect();
            for p in &paths {
                applied.extend(ctx.reserve(p).map_err(|e| host_err(e.to_string()))?);
            }
            for p in &paths {
                progress(&line(
                    ledger.now_ms(),
                    &format!("applying NatsCluster manifest {}", p.display()),
                ));
                host.apply_manifest(p, &ctx.vars)
                    .await
                    .map_err(|e| host_err(e.to_string()))?;
            }
            for (ns, n) in &applied {
                controlled::wait_servers(&host, ns, n, default_cluster_wait())
                    .await
                    .map_err(&host_err)?;
                progress(&line(
                    ledger.now_ms(),
                    &format!("NatsCluster {ns}/{n}: every server running"),
                ));
            }
            Deployed::Other(Box::new(
                Controlled::new(host, &applied).await.map_err(&host_err)?,
            ))
        };
    ctx.vars.insert(
        "servers".into(),
        serde_json::to_string(&deployed.dep().client_urls()).unwrap_or_default(),
    );
    let meta = deployed
        .dep()
        .meta_leader(Duration::from_secs(30))
        .await
        .map_err(|source| ScenarioError::Backend {
            name: name.clone(),
            source,
        })?;
    progress(&line(
        ledger.now_ms(),
        &format!("topology ready, meta leader {meta}"),
    ));

    let workload_err = |message: String| ScenarioError::Workload {
        name: name.clone(),
        message,
    };
    let mut traffic = if scenario.workload.is_empty() {
        Traffic::default()
    } else {
        Traffic::start(scenario, &deployed, workload_creds.as_deref(), &ledger)
            .await
            .map_err(&workload_err)?
    };
    for l in &traffic.lines {
        progress(&line(ledger.now_ms(), l));
    }
    if let Some(p) = &plane {
        let host = ctx.host().map_err(&workload_err)?.clone();
        ctx.account_keys = auth_plane::account_keys(&host, p).await;
        if let Some(topo) = deployed.topology() {
            ctx.resolver_held = auth_plane::resolver_held(topo, &ctx.account_keys);
        }
    }
    for c in &scenario.clients {
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
        let run = clients::start(c, &host, urls, &ledger, Duration::from_secs(60))
            .await
            .map_err(&workload_err)?;
        progress(&line(
            ledger.now_ms(),
            &format!(
                "client {} ({}) publishing {} msg/s to {}",
                c.name, run.user_key, c.rate, c.subject
            ),
        ));
        ctx.clients.insert(c.name.clone(), run);
    }
    let workload_start = ledger.now_ms();

    let mut last_faulted: Option<String> = None;
    for (i, step) in scenario.steps.iter().enumerate() {
        let due = workload_start + step.at.as_millis() as u64;
        let now = ledger.now_ms();
        if due > now {
            tokio::time::sleep(Duration::from_millis(due - now)).await;
        }
        let t0 = ledger.now_ms();
        ledger.step(format!("step {}: {}", i + 1, step.action.describe()));
        let result = run_step(&mut deployed, &step.action, &mut last_faulted, &mut ctx).await;
        let took = ledger.now_ms() - t0;
        let (ok, target, observed_at_ms, error) = match result {
            Ok(d) => (true, d.target, d.observed_at_ms, None),
            Err(e) => (false, None, None, Some(e)),
        };
        progress(&line(
            t0,
            &format!(
                "step {}/{} {}{}: {} ({} ms)",
                i + 1,
                scenario.steps.len(),
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
        if let Some(e) = &error {
            failures.push(format!(
                "step {} ({}) failed: {e}",
                i + 1,
                step.action.describe()
            ));
        }
        steps_out.push(StepOutcome {
            index: i + 1,
            at_ms: t0,
            action: step.action.describe(),
            target,
            ok,
            error,
            took_ms: took,
            id: step.id.clone(),
            observed_at_ms,
        });
    }

    let drained = traffic.finish(&ledger, progress, &mut failures).await;
    let mut client_reports = Vec::new();
    for (_, c) in std::mem::take(&mut ctx.clients) {
        client_reports.push(c.stop().await);
    }
    let backend_name = deployed.dep().backend();
    let restarts = ctx.restarts().await;
    let mut restart_order = Vec::new();
    let mut log = Vec::new();
    if let Some(host) = &ctx.host {
        use crate::local::LocalEvent;
        // The servers' lives go into the timeline beside the steps and the traffic.
        for e in host.lifecycle().events() {
            let at_ms = ledger
                .now_ms()
                .saturating_sub(e.at.elapsed().as_millis() as u64);
            ledger.record(Event::Step {
                at_ms,
                text: format!("server {} {:?}", e.server, e.event),
            });
            if e.event == LocalEvent::Restarted {
                restart_order.push(e.server.clone());
            }
            log.push((at_ms, e.server, e.event));
        }
    }
    drop(deployed);
    let mut report = finish(
        scenario,
        backend_name,
        started_at,
        clock,
        &ledger,
        (&traffic.consumer_names, drained),
        failures,
        steps_out,
    );
    (report.server_restarts, report.controller_restarts) = restarts;
    report.server_restart_order = restart_order;
    report.meta_leader_at_start = Some(meta);
    report.rollout_steps = rollout_steps(&log);
    report.step_figures = step_figures(&scenario.steps, &report.steps);
    report.clients = client_reports;
    judge_step_figures(scenario, &mut report, judges_timings());
    // Expectations on the rollout are judged once the report holds it.
    for (k, rule_text) in &scenario.expect {
        let (Some(actual), Ok(rule)) = (rollout_figure(&report, k), Rule::parse(rule_text)) else {
            continue;
        };
        let ok = rule.holds(actual);
        if !ok {
            report
                .failures
                .push(format!("expectation {k} {rule_text} not met: {actual}"));
        }
        report.expectations.push(ExpectationOutcome {
            figure: k.clone(),
            rule: rule_text.clone(),
            actual,
            ok,
            judged: true,
        });
    }
    report.passed = report.failures.is_empty();
    Ok(report)
}

/// The JetStream traffic: streams created, consumers and a publisher running, a watch on the
/// publisher's stream leader. Empty when the scenario has none.
#[derive(Default)]
struct Traffic {
    consumer_names: Vec<String>,
    consumers: Vec<JoinHandle<()>>,
    watch: Option<JoinHandle<()>>,
    publisher: Option<JoinHandle<()>>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    /// Progress lines of the setup.
    lines: Vec<String>,
}

impl Traffic {
    async fn start(
        scenario: &Scenario,
        deployed: &Deployed,
        creds: Option<&str>,
        ledger: &Ledger,
    ) -> Result<Traffic, String> {
        let dep = deployed.dep();
        let addrs: Vec<async_nats::ServerAddr> = dep
            .client_urls()
            .iter()
            .filter_map(|u| u.parse().ok())
            .collect();
        let options = match creds {
            Some(creds) => async_nats::ConnectOptions::with_credentials(creds)
                .map_err(|e| format!("the workload user's creds: {e}"))?,
            None => async_nats::ConnectOptions::new(),
        };
        let client = options
            .retry_on_initial_connect()
            .connect(addrs)
            .await
            .map_err(|e| e.to_string())?;
        let js = jetstream::new(client);
        let mut t = Traffic::default();
        for st in &scenario.workload.streams {
            let cfg = jetstream::stream::Config {
                name: st.name.clone(),
                subjects: st.subjects.clone(),
                num_replicas: st.replicas,
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            };
            crate::wait::poll(
                &format!("stream {} created", st.name),
                Duration::from_secs(30),
                || async {
                    js.get_or_create_stream(cfg.clone())
                        .await
                        .map(Some)
                        .map_err(|e| e.to_string())
                },
            )
            .await
            .map_err(|e| e.to_string())?;
            let leader = dep
                .stream_leader(&st.name, Duration::from_secs(30))
                .await
                .map_err(|e| e.to_string())?;
            t.lines.push(format!(
                "stream {} R{} led by {leader}",
                st.name, st.replicas
            ));
        }
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        t.stop = Some(stop_tx);
        for c in &scenario.workload.consumers {
            let h = traffic::spawn_consumer(js.clone(), c.clone(), ledger.clone(), stop_rx.clone())
                .await
                .map_err(|e| e.to_string())?;
            t.consumers.push(h);
            t.consumer_names.push(c.name.clone());
        }
        if let Some(p) = &scenario.workload.publisher {
            t.watch = Some(traffic::spawn_leader_watch(
                js.clone(),
                p.stream.clone(),
                ledger.clone(),
                stop_rx.clone(),
            ));
            t.lines.push(format!(
                "publishing {} msg/s to {} for {:.0} s",
                p.spec.rate,
                p.spec.subject,
                p.spec.duration.as_secs_f64()
            ));
            t.publisher = Some(traffic::spawn_publisher(
                js.clone(),
                p.spec.clone(),
                ledger.clone(),
            ));
        }
        Ok(t)
    }

    /// Waits for the publisher, then for the consumers to drain; stops everything. Returns
    /// whether the consumers drained.
    async fn finish(
        &mut self,
        ledger: &Ledger,
        progress: &mut (dyn FnMut(&str) + Send),
        failures: &mut Vec<String>,
    ) -> bool {
        let line = |t: u64, text: &str| format!("[{:>6.1}s] {text}", t as f64 / 1000.0);
        if let Some(p) = self.publisher.take() {
            let _ = p.await;
            progress(&line(ledger.now_ms(), "publisher done"));
        }
        let mut drained = true;
        if !self.consumer_names.is_empty() {
            match traffic::wait_drained(ledger, &self.consumer_names, DRAIN_DEADLINE).await {
                Ok(()) => progress(&line(ledger.now_ms(), "consumers drained")),
                Err(e) => {
                    drained = false;
                    progress(&line(
                        ledger.now_ms(),
                        &format!("consumers not drained: {e}"),
                    ));
                    failures.push(format!(
                        "consumers not drained {}s after the publisher stopped: {e} (counted as undrained, not lost)",
                        DRAIN_DEADLINE.as_secs()
                    ));
                }
            }
        }
        if let Some(stop) = &self.stop {
            let _ = stop.send(true);
        }
        for h in std::mem::take(&mut self.consumers) {
            let _ = h.await;
        }
        if let Some(w) = self.watch.take() {
            let _ = w.await;
        }
        drained
    }
}
