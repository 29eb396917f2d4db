//! A scenario's JetStream traffic: its streams, key-value buckets and object stores created and
//! led (each in its account), its consumers and publishers running against a ledger, a watch on
//! each publisher's stream leader and on the meta leader; at the end the publishers awaited and
//! the consumers drained. `publisher` records into the run's ledger; each of `publishers`
//! into its own, on the same clock.

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream;
use tokio::task::JoinHandle;

use super::deployed::Deployed;
use super::progress::line;
use super::{BucketDecl, DRAIN_DEADLINE, Home, Scenario, StreamDecl, undrained_unless};
use crate::backend::Deployment;
use crate::ledger::{Event, Figures, Ledger};
use crate::traffic;

/// How long the traffic waits for its home server to be known, and for its streams' leaders
/// to move there.
const HOME_DEADLINE: Duration = Duration::from_secs(60);

/// One publisher of `publishers`: its ledger and consumers.
pub(super) struct Lane {
    pub(super) name: String,
    pub(super) account: Option<String>,
    pub(super) stream: String,
    pub(super) ledger: Ledger,
    pub(super) consumer_names: Vec<String>,
    drained: bool,
}

/// The JetStream traffic: streams created, consumers and publishers running, a watch on the
/// publishers' stream leaders. Empty when the scenario has none.
#[derive(Default)]
pub(super) struct Traffic {
    pub(super) consumer_names: Vec<String>,
    consumers: Vec<JoinHandle<()>>,
    watches: Vec<JoinHandle<()>>,
    publishers: Vec<JoinHandle<()>>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    /// Stops the publishers of `publishers` early (`stop_publishers`); the steps take it.
    pub(super) publishers_stop: Option<tokio::sync::watch::Sender<bool>>,
    pub(super) lanes: Vec<Lane>,
    /// Progress lines of the setup.
    pub(super) lines: Vec<String>,
}

/// The credentials the traffic connects with: per account of `topology.accounts`, its user's;
/// else the one workload user's, if any.
#[derive(Clone, Default)]
pub(super) struct TrafficCreds {
    pub(super) default: Option<String>,
    pub(super) accounts: BTreeMap<String, String>,
}

/// One JetStream context per account the workload uses.
struct Contexts<'a> {
    addrs: Vec<async_nats::ServerAddr>,
    creds: &'a TrafficCreds,
    by_account: BTreeMap<Option<String>, jetstream::Context>,
}

impl Contexts<'_> {
    async fn of(&mut self, account: &Option<String>) -> Result<jetstream::Context, String> {
        if let Some(js) = self.by_account.get(account) {
            return Ok(js.clone());
        }
        let creds = match account {
            Some(a) => Some(
                self.creds
                    .accounts
                    .get(a)
                    .ok_or_else(|| format!("no user of account {a}"))?,
            ),
            None => self.creds.default.as_ref(),
        };
        let options = match creds {
            Some(creds) => async_nats::ConnectOptions::with_credentials(creds)
                .map_err(|e| format!("the workload user's creds: {e}"))?,
            None => async_nats::ConnectOptions::new(),
        };
        let client = options
            .retry_on_initial_connect()
            .connect(self.addrs.clone())
            .await
            .map_err(|e| e.to_string())?;
        let js = jetstream::new(client);
        self.by_account.insert(account.clone(), js.clone());
        Ok(js)
    }
}

/// The server `home` names, with its client URL; `None` for [`Home::Any`].
async fn home_server(home: Home, dep: &dyn Deployment) -> Result<Option<(String, String)>, String> {
    match home {
        Home::Any => Ok(None),
        Home::MetaLeader => {
            let leader = dep
                .meta_leader(HOME_DEADLINE)
                .await
                .map_err(|e| format!("workload.home: meta_leader: {e}"))?;
            let url = dep.client_url_of(&leader).ok_or_else(|| {
                format!("workload.home: meta_leader: no client URL of server {leader}")
            })?;
            Ok(Some((leader, url)))
        }
    }
}

/// Moves `group`'s leader to the workload's home `server`; the progress line saying so.
async fn lead_home<F, Fut>(
    js: &jetstream::Context,
    group: traffic::Group<'_>,
    server: &str,
    leader: F,
) -> Result<String, String>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<String, String>>,
{
    traffic::lead_on(js.client(), group, server, HOME_DEADLINE, leader)
        .await
        .map_err(|e| format!("workload.home: {e}"))?;
    Ok(format!("{group} now led by {server}"))
}

/// [`lead_home`] for a consumer of the workload (one of an R1 stream leads where it is).
async fn lead_consumer_home(
    js: &jetstream::Context,
    c: &traffic::ConsumerSpec,
    server: &str,
) -> Result<String, String> {
    let (stream, consumer) = (c.stream.as_str(), c.name.as_str());
    let leader = || traffic::consumer_leader(js, stream, consumer);
    lead_home(
        js,
        traffic::Group::Consumer { stream, consumer },
        server,
        leader,
    )
    .await
}

impl Traffic {
    pub(super) async fn start(
        scenario: &Scenario,
        deployed: &Deployed,
        creds: &TrafficCreds,
        ledger: &Ledger,
    ) -> Result<Traffic, String> {
        let dep = deployed.dep();
        let mut t = Traffic::default();
        let home = home_server(scenario.workload.home, dep).await?;
        let urls = match &home {
            None => dep.client_urls(),
            Some((server, url)) => {
                t.lines
                    .push(format!("the workload sits on the meta leader {server}"));
                vec![url.clone()]
            }
        };
        // The home server of a replicated stream's groups (an R1 stream's lead where it is).
        let streams = scenario.streams();
        let home_of = |stream: &str| {
            let replicated = streams.iter().any(|s| s.name == stream && s.replicas > 1);
            home.as_ref()
                .map(|(server, _)| server.as_str())
                .filter(|_| replicated)
        };
        let mut js = Contexts {
            addrs: urls.iter().filter_map(|u| u.parse().ok()).collect(),
            creds,
            by_account: BTreeMap::new(),
        };
        for st in &streams {
            let ctx = js.of(&scenario.account_of(&st.account)).await?;
            t.lines.push(create_stream(&ctx, dep, st).await?);
            if let Some(server) = home_of(&st.name) {
                let name = st.name.as_str();
                let leader = || async move {
                    dep.stream_leader(name, HOME_DEADLINE)
                        .await
                        .map_err(|e| e.to_string())
                };
                t.lines
                    .push(lead_home(&ctx, traffic::Group::Stream(name), server, leader).await?);
            }
        }
        for b in &scenario.workload.key_values {
            let ctx = js.of(&scenario.account_of(&b.account)).await?;
            t.lines
                .push(create_bucket(&ctx, dep, b, Bucket::KeyValue).await?);
        }
        for b in &scenario.workload.object_stores {
            let ctx = js.of(&scenario.account_of(&b.account)).await?;
            t.lines
                .push(create_bucket(&ctx, dep, b, Bucket::Objects).await?);
        }
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        t.stop = Some(stop_tx);
        let default = js.of(&scenario.account_of(&None)).await?;
        for c in &scenario.workload.consumers {
            let h = traffic::spawn_consumer(
                default.clone(),
                c.clone(),
                ledger.clone(),
                stop_rx.clone(),
            )
            .await
            .map_err(|e| e.to_string())?;
            t.consumers.push(h);
            t.consumer_names.push(c.name.clone());
            if let Some(server) = home_of(&c.stream) {
                t.lines.push(lead_consumer_home(&default, c, server).await?);
            }
        }
        let monitors = dep.monitor_urls();
        if !monitors.is_empty() {
            t.watches.push(traffic::spawn_meta_leader_watch(
                monitors,
                ledger.clone(),
                stop_rx.clone(),
            ));
        }
        if let Some(p) = &scenario.workload.publisher {
            t.watches.push(traffic::spawn_leader_watch(
                default.clone(),
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
            t.publishers.push(traffic::spawn_publisher(
                default.clone(),
                p.spec.clone(),
                ledger.clone(),
            ));
        }
        let (early_tx, early_rx) = tokio::sync::watch::channel(false);
        for p in &scenario.workload.publishers {
            let account = scenario.account_of(&p.account);
            let ctx = js.of(&account).await?;
            let lane_ledger = ledger.sibling();
            let mut names = Vec::new();
            for c in p.consumer_specs() {
                let h = traffic::spawn_consumer(
                    ctx.clone(),
                    c.clone(),
                    lane_ledger.clone(),
                    stop_rx.clone(),
                )
                .await
                .map_err(|e| e.to_string())?;
                t.consumers.push(h);
                if let Some(server) = home_of(&c.stream) {
                    t.lines.push(lead_consumer_home(&ctx, &c, server).await?);
                }
                names.push(c.name);
            }
            t.watches.push(traffic::spawn_leader_watch(
                ctx.clone(),
                p.stream.clone(),
                lane_ledger.clone(),
                stop_rx.clone(),
            ));
            t.lines.push(format!(
                "publisher {} ({}) publishing {} msg/s to {} for at most {:.0} s, consumers {}",
                p.name,
                account.as_deref().unwrap_or("the workload account"),
                p.spec.rate,
                p.spec.subject,
                p.spec.duration.as_secs_f64(),
                names.join(", ")
            ));
            t.publishers.push(traffic::spawn_publisher_until(
                ctx,
                p.spec.clone(),
                lane_ledger.clone(),
                early_rx.clone(),
            ));
            t.lanes.push(Lane {
                name: p.name.clone(),
                account,
                stream: p.stream.clone(),
                ledger: lane_ledger,
                consumer_names: names,
                drained: true,
            });
        }
        if !t.lanes.is_empty() {
            t.publishers_stop = Some(early_tx);
        }
        Ok(t)
    }

    /// Waits for the publishers, then for the consumers to drain; stops everything. Returns
    /// whether the consumers of `publisher` drained (each lane keeps its own).
    pub(super) async fn finish(
        &mut self,
        ledger: &Ledger,
        progress: &mut (dyn FnMut(&str) + Send),
        failures: &mut Vec<String>,
    ) -> bool {
        for p in std::mem::take(&mut self.publishers) {
            let _ = p.await;
        }
        if !self.lanes.is_empty() || !self.consumer_names.is_empty() {
            progress(&line(ledger.now_ms(), "publishers done"));
        }
        let mut drained = true;
        let mut waits: Vec<(String, &Ledger, &[String], &mut bool)> = Vec::new();
        if !self.consumer_names.is_empty() {
            waits.push((String::new(), ledger, &self.consumer_names, &mut drained));
        }
        for l in &mut self.lanes {
            let what = format!("publisher {}'s ", l.name);
            waits.push((what, &l.ledger, &l.consumer_names, &mut l.drained));
        }
        for (what, ledger, names, ok) in waits {
            match traffic::wait_drained(ledger, names, DRAIN_DEADLINE).await {
                Ok(()) => progress(&line(ledger.now_ms(), &format!("{what}consumers drained"))),
                Err(e) => {
                    *ok = false;
                    progress(&line(
                        ledger.now_ms(),
                        &format!("{what}consumers not drained: {e}"),
                    ));
                    failures.push(format!(
                        "{what}consumers not drained {}s after the publisher stopped: {e} (counted as undrained, not lost)",
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
        for w in std::mem::take(&mut self.watches) {
            let _ = w.await;
        }
        drained
    }

    /// The run's events (the run's ledger and every publisher's, in time order) and its
    /// figures: of the run's ledger, or with `publishers` summed over theirs (see
    /// [`Figures::sum`]), with each publisher's.
    pub(super) fn figures(
        &self,
        ledger: &Ledger,
        drained: bool,
    ) -> (Vec<Event>, Figures, Vec<super::PublisherReport>) {
        let mut events = ledger.events();
        if self.lanes.is_empty() {
            let f = crate::ledger::figures(&events, &self.consumer_names);
            return (events, undrained_unless(drained, f), Vec::new());
        }
        let mut each = Vec::new();
        for l in &self.lanes {
            let lane_events = l.ledger.events();
            let f = crate::ledger::figures(&lane_events, &l.consumer_names);
            events.extend(lane_events);
            each.push(super::PublisherReport {
                name: l.name.clone(),
                account: l.account.clone(),
                stream: l.stream.clone(),
                figures: undrained_unless(l.drained, f),
            });
        }
        events.sort_by_key(Event::at_ms);
        let total = Figures::sum(each.iter().map(|p| &p.figures));
        (events, total, each)
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
        placement: placement(&st.cluster),
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
    led(dep, &st.name, st.replicas).await
}

fn placement(cluster: &Option<String>) -> Option<jetstream::stream::Placement> {
    cluster.as_ref().map(|c| jetstream::stream::Placement {
        cluster: Some(c.clone()),
        ..Default::default()
    })
}

async fn led(dep: &dyn Deployment, stream: &str, replicas: usize) -> Result<String, String> {
    let leader = dep
        .stream_leader(stream, Duration::from_secs(30))
        .await
        .map_err(|e| e.to_string())?;
    Ok(format!("stream {stream} R{replicas} led by {leader}"))
}

#[derive(Clone, Copy)]
enum Bucket {
    KeyValue,
    Objects,
}

/// Creates a key-value bucket or object store (retrying until the meta group answers; one
/// that exists already is taken) and waits for its stream's leader.
async fn create_bucket(
    js: &jetstream::Context,
    dep: &dyn Deployment,
    b: &BucketDecl,
    kind: Bucket,
) -> Result<String, String> {
    let what = match kind {
        Bucket::KeyValue => "key-value bucket",
        Bucket::Objects => "object store",
    };
    crate::wait::poll(
        &format!("{what} {} created", b.bucket),
        Duration::from_secs(30),
        || async {
            let made = match kind {
                Bucket::KeyValue => {
                    let cfg = jetstream::kv::Config {
                        bucket: b.bucket.clone(),
                        num_replicas: b.replicas,
                        placement: placement(&b.cluster),
                        ..Default::default()
                    };
                    match js.create_key_value(cfg).await {
                        Ok(_) => Ok(()),
                        Err(e) => js
                            .get_key_value(&b.bucket)
                            .await
                            .map(|_| ())
                            .map_err(|_| e.to_string()),
                    }
                }
                Bucket::Objects => {
                    let cfg = jetstream::object_store::Config {
                        bucket: b.bucket.clone(),
                        num_replicas: b.replicas,
                        placement: placement(&b.cluster),
                        ..Default::default()
                    };
                    match js.create_object_store(cfg).await {
                        Ok(_) => Ok(()),
                        Err(e) => js
                            .get_object_store(&b.bucket)
                            .await
                            .map(|_| ())
                            .map_err(|_| e.to_string()),
                    }
                }
            };
            made.map(Some)
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let stream = b.stream_name(kind_prefix(kind));
    led(dep, &stream, b.replicas)
        .await
        .map(|l| format!("{what} {}: {l}", b.bucket))
}

fn kind_prefix(kind: Bucket) -> &'static str {
    match kind {
        Bucket::KeyValue => "KV_",
        Bucket::Objects => "OBJ_",
    }
}
