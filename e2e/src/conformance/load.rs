//! The application a story's stream serves, played by the run from the host: story 08's orders
//! team has a stream with data in it and consumers reading it before it moves, which is what its
//! midway example shows (replicas catching up, consumers following). [`fill`] connects as the
//! story's own user (the creds Secret its NatsConnection names), through the client Service's
//! ClusterIP (the host reaches Services through kube-proxy), adds durable pull consumers and
//! publishes, every message acknowledged.

use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::Api;
use serde_json::Value;

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
    let conn = super::actions::api_of(
        client,
        "nats.mikluko.io/v1beta1",
        "NatsConnection",
        load.namespace,
    )
    .get(load.connection)
    .await
    .map_err(|e| format!("NatsConnection {}/{}: {e}", load.namespace, load.connection))?
    .data;
    let url = service_url(client, load, &conn).await?;
    let creds = creds(client, load, &conn).await?;
    let nats = async_nats::ConnectOptions::with_credentials(&creds)
        .map_err(|e| format!("the creds of {}: {e}", load.connection))?
        .connection_timeout(Duration::from_secs(5))
        .connect(url.as_str())
        .await
        .map_err(|e| format!("connecting to {url}: {e}"))?;
    let js = jetstream::new(nats);
    let stream = sim::wait::poll(
        &format!("stream {} answers at {url}", load.stream),
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

/// `nats://<ClusterIP>:<port>` of the Service the NatsConnection `conn`'s first server names
/// (`<service>.<namespace>.svc[...]`).
async fn service_url(client: &kube::Client, load: &Load, conn: &Value) -> Result<String, String> {
    let server = conn
        .pointer("/spec/servers/0")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("NatsConnection {} names no server", load.connection))?;
    let (service, namespace, port) = service_of(server)
        .ok_or_else(|| format!("{server} does not name a Service of the cluster"))?;
    let svc = Api::<Service>::namespaced(client.clone(), namespace)
        .get(service)
        .await
        .map_err(|e| format!("Service {namespace}/{service}: {e}"))?;
    let ip = svc
        .spec
        .and_then(|s| s.cluster_ip)
        .ok_or_else(|| format!("Service {namespace}/{service} has no ClusterIP"))?;
    Ok(format!("nats://{ip}:{port}"))
}

/// The Service, its namespace and the port a `nats://<service>.<namespace>.svc[.<domain>]:<port>`
/// URL names.
fn service_of(url: &str) -> Option<(&str, &str, &str)> {
    let rest = url.strip_prefix("nats://")?;
    let (host, port) = rest.split_once(':')?;
    let mut labels = host.split('.');
    let (service, namespace) = (labels.next()?, labels.next()?);
    (labels.next() == Some("svc")).then_some((service, namespace, port))
}

/// The creds file of the NatsConnection `conn`'s user: its Secret's `user.creds` (or the key it
/// names).
async fn creds(client: &kube::Client, load: &Load, conn: &Value) -> Result<String, String> {
    let name = conn
        .pointer("/spec/credentials/secretKeyRef/name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("NatsConnection {} names no creds Secret", load.connection))?
        .to_string();
    let key = conn
        .pointer("/spec/credentials/secretKeyRef/key")
        .and_then(Value::as_str)
        .unwrap_or("user.creds")
        .to_string();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), load.namespace);
    sim::wait::poll(
        &format!("Secret {}/{name} holds {key}", load.namespace),
        Duration::from_secs(120),
        || async {
            let s = secrets.get_opt(&name).await.map_err(|e| e.to_string())?;
            Ok(s.and_then(|s| s.data).and_then(|d| {
                d.get(&key)
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            }))
        },
    )
    .await
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rstest::rstest]
    #[case::short(
        "nats://east.nats-system.svc:4222",
        Some(("east", "nats-system", "4222"))
    )]
    #[case::with_the_domain(
        "nats://demo.nats.svc.cluster.local:4222",
        Some(("demo", "nats", "4222"))
    )]
    #[case::outside("nats://gw.east.example.net:7222", None)]
    #[case::tls("tls://demo.nats-system.svc:4222", None)]
    #[case::no_port("nats://demo.nats.svc", None)]
    fn the_service_a_url_names(#[case] url: &str, #[case] want: Option<(&str, &str, &str)>) {
        assert_eq!(service_of(url), want);
    }
}
