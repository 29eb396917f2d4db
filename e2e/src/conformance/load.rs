//! The application a story's stream serves, played by the run from the host: story 08's orders
//! team has a stream with data in it and consumers reading it before it moves, which is what its
//! midway example shows (replicas catching up, consumers following). [`fill`] connects as the
//! story's own user through its NatsConnection ([`super::dial`]), adds durable pull consumers
//! and publishes, every message acknowledged.

use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;

/// What [`fill`] brings to a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Load {
    /// The namespace of the NatsConnection and its creds Secret.
    pub namespace: &'static str,
    /// The NatsConnection the story's stream names.
    pub connection: &'static str,
    /// The stream's NATS name.
    pub stream: &'static str,
    /// The subject published to (within the stream's subjects).
    pub subject: &'static str,
    /// Durable pull consumers added to the stream.
    pub consumers: &'static [&'static str],
    pub messages: usize,
    pub size: usize,
}

/// How many publishes wait for their acks at once.
const WINDOW: usize = 256;

/// Connects as the NatsConnection `load.connection`'s user, adds the consumers and publishes the
/// messages; the count acknowledged.
pub async fn fill(client: &kube::Client, load: &Load) -> Result<usize, String> {
    let nats = super::dial::connect(client, load.namespace, load.connection).await?;
    let js = jetstream::new(nats);
    let stream = sim::wait::poll(
        &format!("stream {} answers through {}", load.stream, load.connection),
        Duration::from_secs(60),
        || async { Ok(js.get_stream(load.stream).await.ok()) },
    )
    .await
    .map_err(|e| e.to_string())?;
    for name in load.consumers {
        stream
            .get_or_create_consumer(
                name,
                jetstream::consumer::pull::Config {
                    durable_name: Some(name.to_string()),
                    ack_policy: jetstream::consumer::AckPolicy::Explicit,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| format!("consumer {name} on {}: {e}", load.stream))?;
    }
    let body = bytes::Bytes::from(vec![b'o'; load.size]);
    let mut acked = 0;
    let mut sent = 0;
    while sent < load.messages {
        let batch = WINDOW.min(load.messages - sent);
        let mut acks = Vec::with_capacity(batch);
        for _ in 0..batch {
            acks.push(
                js.publish(load.subject, body.clone())
                    .await
                    .map_err(|e| format!("publishing to {}: {e}", load.subject))?,
            );
        }
        sent += batch;
        let done: Vec<_> = futures::stream::iter(acks.into_iter().map(|a| a.into_future()))
            .buffered(WINDOW)
            .collect()
            .await;
        for ack in done {
            ack.map_err(|e| format!("an ack from {}: {e}", load.stream))?;
            acked += 1;
        }
    }
    Ok(acked)
}
