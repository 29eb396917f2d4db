//! Traffic against a stream: a publisher at a set rate with `Nats-Msg-Id` and retry on ack timeout,
//! pull and push consumers that ack, and a watcher of the stream's leader. Everything they see goes
//! into the [`Ledger`].

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, context::PublishErrorKind};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::ledger::{Event, Ledger};
use crate::wait;

/// Header carrying the message id; the stream deduplicates retries on it.
pub const MSG_ID: &str = "Nats-Msg-Id";
const MAX_IN_FLIGHT: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    #[error("creating consumer {consumer} on stream {stream}: {source}")]
    CreateConsumer {
        stream: String,
        consumer: String,
        #[source]
        source: wait::WaitError,
    },
    #[error("consumers did not receive every acknowledged message: {0}")]
    Drain(#[source] wait::WaitError),
}

/// A publisher: `rate` messages per second for `duration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublisherSpec {
    pub subject: String,
    pub rate: u32,
    #[serde(with = "crate::duration")]
    pub duration: Duration,
    #[serde(with = "crate::duration", default = "default_ack_timeout")]
    pub ack_timeout: Duration,
    /// A message not acknowledged by then is given up on (and counted).
    #[serde(with = "crate::duration", default = "default_give_up")]
    pub give_up_after: Duration,
    #[serde(default = "default_payload")]
    pub payload_bytes: usize,
}

fn default_ack_timeout() -> Duration {
    Duration::from_secs(2)
}
fn default_give_up() -> Duration {
    Duration::from_secs(60)
}
fn default_payload() -> usize {
    128
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsumerKind {
    Pull,
    Push,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsumerSpec {
    pub name: String,
    pub stream: String,
    pub kind: ConsumerKind,
}

/// Parses the id of a message published by [`spawn_publisher`] (`m-<id>`).
pub fn parse_msg_id(value: &str) -> Option<u64> {
    value.strip_prefix("m-")?.parse().ok()
}

/// Starts publishing; the handle finishes when every message is acknowledged or given up on.
pub fn spawn_publisher(
    js: jetstream::Context,
    spec: PublisherSpec,
    ledger: Ledger,
) -> JoinHandle<()> {
    spawn_publisher_until(js, spec, ledger, watch::channel(false).1)
}

/// [`spawn_publisher`] that also stops sending new messages once `stop` turns true (before
/// `duration` ends); those in flight are still acknowledged or given up on.
pub fn spawn_publisher_until(
    js: jetstream::Context,
    spec: PublisherSpec,
    ledger: Ledger,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let mut js = js;
    js.set_timeout(spec.ack_timeout);
    tokio::spawn(async move {
        let total = u64::from(spec.rate) * spec.duration.as_millis() as u64 / 1000;
        let mut tick = tokio::time::interval(Duration::from_secs(1) / spec.rate.max(1));
        // Keep the rate: a stalled ack must not hold back the next message.
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let mut tasks = tokio::task::JoinSet::new();
        let payload = bytes::Bytes::from(vec![b'x'; spec.payload_bytes]);
        for id in 1..=total {
            if *stop.borrow() {
                break;
            }
            tokio::select! {
                _ = tick.tick() => {}
                // A closed channel (no one to stop it) disables this branch.
                Ok(()) = stop.changed() => break,
            }
            let Ok(permit) = slots.clone().acquire_owned().await else {
                break;
            };
            let (js, ledger, spec, payload) =
                (js.clone(), ledger.clone(), spec.clone(), payload.clone());
            tasks.spawn(async move {
                publish_one(&js, &spec, &ledger, id, payload).await;
                drop(permit);
            });
        }
        while tasks.join_next().await.is_some() {}
    })
}

async fn publish_one(
    js: &jetstream::Context,
    spec: &PublisherSpec,
    ledger: &Ledger,
    id: u64,
    payload: bytes::Bytes,
) {
    let give_up = tokio::time::Instant::now() + spec.give_up_after;
    for attempt in 1u32.. {
        ledger.record(Event::Publish {
            at_ms: ledger.now_ms(),
            id,
            attempt,
        });
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(MSG_ID, format!("m-{id}").as_str());
        let outcome = match js
            .publish_with_headers(spec.subject.clone(), headers, payload.clone())
            .await
        {
            Ok(ack) => ack.await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(ack) => {
                ledger.record(Event::Ack {
                    at_ms: ledger.now_ms(),
                    id,
                    stream_seq: ack.sequence,
                    duplicate: ack.duplicate,
                });
                return;
            }
            Err(e) if e.kind() == PublishErrorKind::TimedOut => {
                ledger.record(Event::AckTimeout {
                    at_ms: ledger.now_ms(),
                    id,
                    attempt,
                });
            }
            Err(e) => {
                ledger.record(Event::PublishError {
                    at_ms: ledger.now_ms(),
                    id,
                    attempt,
                    error: e.to_string(),
                });
                // No leader or no responders: back off (100 ms doubling to 800 ms) so a leaderless
                // stretch does not turn into a retry storm.
                let pause = 100u64 << attempt.min(4).saturating_sub(1);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
        if tokio::time::Instant::now() >= give_up {
            ledger.record(Event::GaveUp {
                at_ms: ledger.now_ms(),
                id,
            });
            return;
        }
    }
}

/// Creates (or binds to) the durable consumer, retrying until the stream answers.
async fn create_consumer(
    js: &jetstream::Context,
    spec: &ConsumerSpec,
) -> Result<ConsumerHandle, TrafficError> {
    wait::poll(
        &format!("consumer {} on stream {}", spec.name, spec.stream),
        Duration::from_secs(30),
        || async {
            let stream = js
                .get_stream(&spec.stream)
                .await
                .map_err(|e| e.to_string())?;
            let handle = match spec.kind {
                ConsumerKind::Pull => ConsumerHandle::Pull(
                    stream
                        .get_or_create_consumer(
                            &spec.name,
                            consumer::pull::Config {
                                durable_name: Some(spec.name.clone()),
                                ack_policy: consumer::AckPolicy::Explicit,
                                ack_wait: Duration::from_secs(10),
                                ..Default::default()
                            },
                        )
                        .await
                        .map_err(|e| e.to_string())?,
                ),
                ConsumerKind::Push => ConsumerHandle::Push(
                    stream
                        .get_or_create_consumer(
                            &spec.name,
                            consumer::push::Config {
                                durable_name: Some(spec.name.clone()),
                                deliver_subject: format!("_SIM.DELIVER.{}", spec.name),
                                ack_policy: consumer::AckPolicy::Explicit,
                                ack_wait: Duration::from_secs(10),
                                idle_heartbeat: Duration::from_secs(1),
                                flow_control: true,
                                ..Default::default()
                            },
                        )
                        .await
                        .map_err(|e| e.to_string())?,
                ),
            };
            Ok(Some(handle))
        },
    )
    .await
    .map_err(|source| TrafficError::CreateConsumer {
        stream: spec.stream.clone(),
        consumer: spec.name.clone(),
        source,
    })
}

enum ConsumerHandle {
    Pull(consumer::PullConsumer),
    Push(consumer::PushConsumer),
}

/// Creates the consumer, then receives and acks until `stop` turns true.
pub async fn spawn_consumer(
    js: jetstream::Context,
    spec: ConsumerSpec,
    ledger: Ledger,
    mut stop: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, TrafficError> {
    let handle = create_consumer(&js, &spec).await?;
    Ok(tokio::spawn(async move {
        while !*stop.borrow() {
            // Both kinds yield the same message type; re-open the stream when it ends or errs out.
            let messages = match &handle {
                ConsumerHandle::Pull(c) => c
                    .messages()
                    .await
                    .map(|m| m.map(|r| r.map_err(|e| e.to_string())).boxed()),
                ConsumerHandle::Push(c) => c
                    .messages()
                    .await
                    .map(|m| m.map(|r| r.map_err(|e| e.to_string())).boxed()),
            };
            let Ok(mut messages) = messages else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            loop {
                let next = tokio::select! {
                    n = messages.next() => n,
                    // A closed channel (no one to stop it) disables this branch.
                Ok(()) = stop.changed() => break,
                };
                match next {
                    Some(Ok(msg)) => {
                        record_delivery(&ledger, &spec.name, &msg);
                        let _ = msg.ack().await;
                    }
                    Some(Err(_)) => continue, // missed heartbeats etc. while a leader moves
                    None => break,
                }
            }
        }
    }))
}

fn record_delivery(ledger: &Ledger, consumer: &str, msg: &jetstream::Message) {
    let id = msg
        .headers
        .as_ref()
        .and_then(|h| h.get(MSG_ID))
        .and_then(|v| parse_msg_id(v.as_str()));
    let (Some(id), Ok(info)) = (id, msg.info()) else {
        return; // not ours
    };
    ledger.record(Event::Delivery {
        at_ms: ledger.now_ms(),
        consumer: consumer.to_string(),
        id,
        stream_seq: info.stream_sequence,
        redelivered: info.delivered > 1,
    });
}

/// Watches `stream`'s leader every 200 ms and records each change (and each gap).
pub fn spawn_leader_watch(
    js: jetstream::Context,
    stream: String,
    ledger: Ledger,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let mut js = js;
    js.set_timeout(Duration::from_millis(500));
    tokio::spawn(async move {
        let mut last: Option<Option<String>> = None;
        while !*stop.borrow() {
            let now = match js.get_stream(&stream).await {
                Ok(s) => s
                    .cached_info()
                    .cluster
                    .as_ref()
                    .and_then(|c| c.leader.clone()),
                Err(_) => None,
            };
            if last.as_ref() != Some(&now) {
                ledger.record(Event::Leader {
                    at_ms: ledger.now_ms(),
                    stream: stream.clone(),
                    leader: now.clone(),
                });
                last = Some(now);
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = stop.changed() => {}
            }
        }
    })
}

/// Waits until every consumer has received every acknowledged message.
pub async fn wait_drained(
    ledger: &Ledger,
    consumers: &[String],
    timeout: Duration,
) -> Result<(), TrafficError> {
    wait::poll(
        "consumers to receive every acknowledged message",
        timeout,
        || async {
            let acked = ledger.acknowledged_ids();
            for c in consumers {
                let got = ledger.delivered_ids(c);
                let missing = acked.difference(&got).count();
                if missing > 0 {
                    return Err(format!(
                        "{c} is missing {missing} of {} messages",
                        acked.len()
                    ));
                }
            }
            Ok(Some(()))
        },
    )
    .await
    .map_err(TrafficError::Drain)
}

/// Watches the JetStream meta leader every 500 ms through the servers' `/jsz` (the first server
/// that names one) and records each change (and each gap).
pub fn spawn_meta_leader_watch(
    monitors: Vec<(String, String)>,
    ledger: Ledger,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap_or_default();
        let mut last: Option<Option<String>> = None;
        while !*stop.borrow() {
            let mut now = None;
            for (_, url) in &monitors {
                let Ok(resp) = http.get(format!("{url}/jsz")).send().await else {
                    continue;
                };
                let Ok(v) = resp.json::<serde_json::Value>().await else {
                    continue;
                };
                if let Some(l) = v["meta_cluster"]["leader"]
                    .as_str()
                    .filter(|l| !l.is_empty())
                {
                    now = Some(l.to_string());
                    break;
                }
            }
            if last.as_ref() != Some(&now) {
                ledger.record(Event::MetaLeader {
                    at_ms: ledger.now_ms(),
                    leader: now.clone(),
                });
                last = Some(now);
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = stop.changed() => {}
            }
        }
    })
}

/// How long one stepdown toward a server is given to land before it is asked again.
const LEADER_MOVE_WAIT: Duration = Duration::from_secs(5);

/// A raft group of the workload whose leader can be moved: a stream's, or a consumer's.
#[derive(Debug, Clone, Copy)]
pub enum Group<'a> {
    Stream(&'a str),
    Consumer { stream: &'a str, consumer: &'a str },
}

impl std::fmt::Display for Group<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Group::Stream(s) => write!(f, "stream {s}"),
            Group::Consumer { stream, consumer } => write!(f, "consumer {consumer} of {stream}"),
        }
    }
}

/// Moves `group`'s leader to `server` before the traffic runs (a leader stepdown with it as
/// the preferred placement, asked again while another leads), `leader` reading who leads now:
/// so a run starts with its leaders where it says, not where an election happened to put them.
pub async fn lead_on<F, Fut>(
    client: async_nats::Client,
    group: Group<'_>,
    server: &str,
    timeout: Duration,
    leader: F,
) -> Result<(), String>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<String, String>>,
{
    let wire = nats_wire::Wire::new(client);
    let placement = nats_wire::monitor::Placement {
        preferred: server.to_string(),
        ..Default::default()
    };
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // Who leads now; a group just created may have no leader yet: asked again until the
        // deadline.
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let now = wait::poll(&format!("{group}'s leader"), left, || async {
            leader().await.map(Some)
        })
        .await
        .map_err(|e| e.to_string())?;
        if now == server {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "{group}'s leader is {now}, not {server}, after {timeout:?}"
            ));
        }
        let asked = match group {
            Group::Stream(stream) => wire.stream_leader_stepdown(stream, Some(&placement)).await,
            Group::Consumer { stream, consumer } => {
                wire.consumer_leader_stepdown(stream, consumer, Some(&placement))
                    .await
            }
        };
        asked.map_err(|e| format!("{group}'s leader stepdown toward {server}: {e}"))?;
        let what = format!("{group} led by {server}");
        let leader = &leader;
        let landed = wait::poll(&what, LEADER_MOVE_WAIT, || async move {
            Ok((leader().await? == server).then_some(()))
        })
        .await;
        if landed.is_ok() {
            return Ok(());
        }
    }
}

/// Who leads consumer `consumer` of `stream`, as its info says.
pub async fn consumer_leader(
    js: &jetstream::Context,
    stream: &str,
    consumer: &str,
) -> Result<String, String> {
    let s = js
        .get_stream(stream)
        .await
        .map_err(|e| format!("stream {stream}: {e}"))?;
    let info = s
        .consumer_info(consumer)
        .await
        .map_err(|e| format!("consumer {consumer} of {stream}: {e}"))?;
    info.cluster
        .as_ref()
        .and_then(|c| c.leader.clone())
        .filter(|l| !l.is_empty())
        .ok_or_else(|| format!("consumer {consumer} of {stream} has no leader"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_round_trip() {
        assert_eq!(parse_msg_id("m-42"), Some(42));
        assert_eq!(parse_msg_id("x-42"), None);
        assert_eq!(parse_msg_id("m-"), None);
    }
}
