//! A scenario's JetStream traffic: its streams created and led, its consumers and publisher
//! running against the ledger, a watch on the publisher's stream leader and on the meta leader; at the end the
//! publisher awaited and the consumers drained.

use std::time::Duration;

use async_nats::jetstream;
use tokio::task::JoinHandle;

use super::run::line;
use super::steps::Deployed;
use super::{DRAIN_DEADLINE, Scenario, StreamDecl};
use crate::backend::Deployment;
use crate::ledger::Ledger;
use crate::traffic;

/// The JetStream traffic: streams created, consumers and a publisher running, a watch on the
/// publisher's stream leader. Empty when the scenario has none.
#[derive(Default)]
pub(super) struct Traffic {
    pub(super) consumer_names: Vec<String>,
    consumers: Vec<JoinHandle<()>>,
    watch: Option<JoinHandle<()>>,
    meta_watch: Option<JoinHandle<()>>,
    publisher: Option<JoinHandle<()>>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    /// Progress lines of the setup.
    pub(super) lines: Vec<String>,
}

impl Traffic {
    pub(super) async fn start(
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
            t.lines.push(create_stream(&js, dep, st).await?);
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
        let monitors = dep.monitor_urls();
        if !monitors.is_empty() {
            t.meta_watch = Some(traffic::spawn_meta_leader_watch(
                monitors,
                ledger.clone(),
                stop_rx.clone(),
            ));
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
    pub(super) async fn finish(
        &mut self,
        ledger: &Ledger,
        progress: &mut (dyn FnMut(&str) + Send),
        failures: &mut Vec<String>,
    ) -> bool {
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
        for w in [self.watch.take(), self.meta_watch.take()]
            .into_iter()
            .flatten()
        {
            let _ = w.await;
        }
        drained
    }
}

/// Creates stream `st` (retrying until the meta group answers) and waits for its leader; the
/// progress line saying who leads it.
async fn create_stream(
    js: &jetstream::Context,
    dep: &dyn Deployment,
    st: &StreamDecl,
) -> Result<String, String> {
    let cfg = jetstream::stream::Config {
        name: st.name.clone(),
        subjects: st.subjects.clone(),
        num_replicas: st.replicas,
        duplicate_window: Duration::from_secs(120),
        placement: st.cluster.as_ref().map(|c| jetstream::stream::Placement {
            cluster: Some(c.clone()),
            ..Default::default()
        }),
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
    Ok(format!(
        "stream {} R{} led by {leader}",
        st.name, st.replicas
    ))
}
