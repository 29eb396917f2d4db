//! Shared parts of the live tests: a real 3-server JetStream cluster from the sim, and the
//! `$JS.API` requests the controller will send, carrying the config JSON the mapping builds.

#![allow(dead_code)]

use std::time::Duration;

use serde_json::{Map, Value, json};
use sim::topology::{Topology, TopologySpec};

pub const WAIT: Duration = Duration::from_secs(30);

/// JetStream's "stream not found" and "consumer not found" error codes.
const STREAM_NOT_FOUND: i64 = 10059;
const CONSUMER_NOT_FOUND: i64 = 10014;

/// A 3-server cluster (config accounts; plain clients land in APP). Its servers are killed when
/// the topology drops, pass or fail.
pub async fn cluster() -> Topology {
    Topology::start(TopologySpec::cluster(3))
        .await
        .expect("a 3-server cluster boots")
}

/// A `$JS.API` request; `Err` carries the API error object.
pub async fn js_api(
    client: &async_nats::Client,
    subject: String,
    body: &Value,
) -> Result<Value, Value> {
    let payload = serde_json::to_vec(body).expect("a JSON body");
    let reply = client
        .request(subject.clone(), payload.into())
        .await
        .map_err(|e| json!({"description": format!("{subject}: {e}")}))?;
    let v: Value = serde_json::from_slice(&reply.payload)
        .map_err(|e| json!({"description": format!("{subject}: bad JSON: {e}")}))?;
    match v.get("error") {
        Some(err) if !err.is_null() => Err(err.clone()),
        _ => Ok(v),
    }
}

/// Retries a request until it answers without error (a fresh cluster may still elect a leader).
pub async fn js_api_settled(client: &async_nats::Client, subject: String, body: Value) -> Value {
    sim::wait::poll(&subject, WAIT, || {
        let (subject, body) = (subject.clone(), body.clone());
        async move {
            js_api(client, subject, &body)
                .await
                .map(Some)
                .map_err(|e| e.to_string())
        }
    })
    .await
    .expect("the request succeeds")
}

/// Creates a stream from a mapped config; returns the config the server answered with.
pub async fn create_stream(client: &async_nats::Client, config: &Map<String, Value>) -> Value {
    let name = config["name"].as_str().expect("a named config");
    let reply = js_api(
        client,
        format!("$JS.API.STREAM.CREATE.{name}"),
        &Value::Object(config.clone()),
    )
    .await
    .unwrap_or_else(|e| panic!("creating stream {name}: {e}"));
    reply["config"].clone()
}

/// Updates a stream with a mapped config (what correcting drift sends).
pub async fn update_stream(client: &async_nats::Client, config: &Map<String, Value>) -> Value {
    let name = config["name"].as_str().expect("a named config");
    let reply = js_api(
        client,
        format!("$JS.API.STREAM.UPDATE.{name}"),
        &Value::Object(config.clone()),
    )
    .await
    .unwrap_or_else(|e| panic!("updating stream {name}: {e}"));
    reply["config"].clone()
}

/// A stream's whole STREAM.INFO answer (config, state, cluster).
pub async fn stream_info(client: &async_nats::Client, name: &str) -> Value {
    js_api_settled(client, format!("$JS.API.STREAM.INFO.{name}"), json!({})).await
}

/// The server's config of a stream, `None` when it does not exist.
pub async fn stream_config(client: &async_nats::Client, name: &str) -> Option<Value> {
    sim::wait::poll(&format!("STREAM.INFO {name}"), WAIT, || async move {
        match js_api(client, format!("$JS.API.STREAM.INFO.{name}"), &json!({})).await {
            Ok(v) => Ok(Some(Some(v["config"].clone()))),
            Err(e) if e["err_code"].as_i64() == Some(STREAM_NOT_FOUND) => Ok(Some(None)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .expect("STREAM.INFO answers")
}

/// Creates or updates a durable consumer from a mapped config; returns the server's config.
pub async fn put_consumer(
    client: &async_nats::Client,
    stream: &str,
    config: &Map<String, Value>,
    update: bool,
) -> Value {
    let name = config["name"].as_str().expect("a named config");
    let body = jetstream_controller::consumer_config::create_request(stream, config, update);
    let reply = js_api(
        client,
        format!("$JS.API.CONSUMER.CREATE.{stream}.{name}"),
        &body,
    )
    .await
    .unwrap_or_else(|e| panic!("creating consumer {stream}/{name}: {e}"));
    reply["config"].clone()
}

/// The server's config of a consumer, `None` when it does not exist.
pub async fn consumer_config(
    client: &async_nats::Client,
    stream: &str,
    name: &str,
) -> Option<Value> {
    sim::wait::poll(
        &format!("CONSUMER.INFO {stream}/{name}"),
        WAIT,
        || async move {
            match js_api(
                client,
                format!("$JS.API.CONSUMER.INFO.{stream}.{name}"),
                &json!({}),
            )
            .await
            {
                Ok(v) => Ok(Some(Some(v["config"].clone()))),
                Err(e) if e["err_code"].as_i64() == Some(CONSUMER_NOT_FOUND) => Ok(Some(None)),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await
    .expect("CONSUMER.INFO answers")
}

/// A spec of kind `T` from camelCase JSON, with a connectionRef.
pub fn spec<T: serde::de::DeserializeOwned>(v: Value) -> T {
    let mut base = json!({"connectionRef": {"name": "main"}});
    if let (Some(b), Some(o)) = (base.as_object_mut(), v.as_object()) {
        b.extend(o.clone());
    }
    serde_json::from_value(base).expect("a valid spec")
}
