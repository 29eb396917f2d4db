//! Shared parts of the live tests: a real 3-server JetStream cluster from the sim, and the
//! controller's own `$JS.API` requests (jetstream_controller::jsapi), failing the test loudly.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use controller_kit::metrics::Metrics;
use jetstream_controller::controller::{self, Context, Settings};
use jetstream_controller::jsapi::{self, JsApiError};
use nats_api::nats::NatsConnection;
use nats_wire::Wire;
use nats_wire::monitor::Placement;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use sim::testkit::AbortOnDrop;
use sim::topology::{Topology, TopologySpec};

pub const WAIT: Duration = Duration::from_secs(30);

/// The JetStream controller on `client`, looking again every `resync`, its passes counted in
/// `metrics`; it stops when the returned guard drops.
pub fn spawn_controller(client: kube::Client, resync: Duration, metrics: Metrics) -> AbortOnDrop {
    let settings = Settings {
        resync,
        ..Default::default()
    };
    spawn_controller_with(client, settings, metrics).1
}

/// As [`spawn_controller`] with whole `settings`, and the context, for a test that reads its
/// leases or shares while the controller runs.
pub fn spawn_controller_with(
    client: kube::Client,
    settings: Settings,
    metrics: Metrics,
) -> (Arc<Context>, AbortOnDrop) {
    let ctx = controller::context(client, settings, metrics);
    (ctx.clone(), AbortOnDrop::spawn(controller::run(ctx)))
}

/// Creates the object `v` describes.
pub async fn create<K>(api: &kube::Api<K>, v: Value)
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let o: K = serde_json::from_value(v).expect("a resource");
    api.create(&kube::api::PostParams::default(), &o)
        .await
        .expect("created");
}

/// The object's `status`, as JSON.
pub async fn status_of<K>(api: &kube::Api<K>, name: &str) -> Result<Value, String>
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let o = api.get(name).await.map_err(|e| e.to_string())?;
    let v = serde_json::to_value(&o).map_err(|e| e.to_string())?;
    Ok(v["status"].clone())
}

/// How many Events of `reason` in `ns` regard the object `name` (a series counted by its count).
pub async fn events(client: kube::Client, ns: &str, name: &str, reason: &str) -> i32 {
    let api: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(client, ns);
    api.list(&Default::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum()
}

/// The server leading `stream`, or empty while none does.
pub async fn leader(app: &async_nats::Client, stream: &str) -> String {
    jsapi::stream_info(app, stream)
        .await
        .ok()
        .flatten()
        .and_then(|i| i["cluster"]["leader"].as_str().map(String::from))
        .unwrap_or_default()
}

/// Steps `stream` down toward `server` until `server` leads it, within `within`.
pub async fn lead_on(
    wire: &Wire,
    app: &async_nats::Client,
    stream: &str,
    server: &str,
    within: Duration,
) {
    sim::wait::poll(
        &format!("{stream} led by {server}"),
        within,
        || async move {
            let l = leader(app, stream).await;
            if l == server {
                return Ok(Some(()));
            }
            let toward = Placement {
                preferred: server.into(),
                ..Default::default()
            };
            let _ = wire.stream_leader_stepdown(stream, Some(&toward)).await;
            Err(format!("led by {l:?}"))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// A 3-server cluster (config accounts; plain clients land in APP). Its servers are killed when
/// the topology drops, pass or fail.
pub async fn cluster() -> Topology {
    Topology::start(TopologySpec::cluster(3))
        .await
        .expect("a 3-server cluster boots")
}

/// Creates NatsConnection `demo` in `ns` to `servers`, with no credentials: the sim's servers
/// put an unauthenticated client in the APP account.
pub async fn create_demo_connection(client: kube::Client, ns: &str, servers: Vec<String>) {
    let conn: NatsConnection = serde_json::from_value(json!({
        "apiVersion": "nats.mikluko.io/v1beta1",
        "kind": "NatsConnection",
        "metadata": {"name": "demo", "namespace": ns},
        "spec": {"servers": servers},
    }))
    .expect("a NatsConnection");
    kube::Api::<NatsConnection>::namespaced(client, ns)
        .create(&kube::api::PostParams::default(), &conn)
        .await
        .expect("NatsConnection created");
}

/// A raw `$JS.API` request; `Err` is the server's refusal or a transport failure.
pub async fn js_api(
    client: &async_nats::Client,
    subject: String,
    body: &Value,
) -> Result<Value, JsApiError> {
    jsapi::request(client, subject, body).await
}

/// Sends an idempotent request (a create or update with one config) until it is answered: a
/// JetStream API request is dropped unanswered while the meta or stream leader changes, which a
/// loaded machine makes happen right after a cluster reports its meta leader. The server's
/// refusal fails the test at once; only "no answer" is sent again, within [`WAIT`].
pub async fn answered<F, Fut>(what: &str, mut send: F) -> Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Value, JsApiError>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match send().await {
            Ok(reply) => return reply,
            Err(e @ JsApiError::Request { .. }) if tokio::time::Instant::now() < deadline => {
                eprintln!("{what}: {e}; sending it again");
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// Creates a stream from a mapped config; returns the config the server answered with.
pub async fn create_stream(client: &async_nats::Client, config: &Map<String, Value>) -> Value {
    let what = format!("creating stream {}", config["name"]);
    answered(&what, || jsapi::create_stream(client, config)).await["config"].clone()
}

/// Updates a stream with a mapped config (what correcting drift sends).
pub async fn update_stream(client: &async_nats::Client, config: &Map<String, Value>) -> Value {
    let what = format!("updating stream {}", config["name"]);
    answered(&what, || jsapi::update_stream(client, config)).await["config"].clone()
}

/// A stream's whole STREAM.INFO answer (config, state, cluster); it must exist.
pub async fn stream_info(client: &async_nats::Client, name: &str) -> Value {
    sim::wait::poll(&format!("STREAM.INFO {name}"), WAIT, || async move {
        jsapi::stream_info(client, name)
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .expect("STREAM.INFO answers")
}

/// The server's config of a stream, `None` when it does not exist. Retries transport failures
/// (a fresh cluster may still elect a leader).
pub async fn stream_config(client: &async_nats::Client, name: &str) -> Option<Value> {
    sim::wait::poll(&format!("STREAM.INFO {name}"), WAIT, || async move {
        jsapi::stream_info(client, name)
            .await
            .map(|v| Some(v.map(|v| v["config"].clone())))
            .map_err(|e| e.to_string())
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
    let what = format!("putting consumer {stream}/{}", config["name"]);
    answered(&what, || {
        jsapi::put_consumer(client, stream, config, update)
    })
    .await["config"]
        .clone()
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
            jsapi::consumer_info(client, stream, name)
                .await
                .map(|v| Some(v.map(|v| v["config"].clone())))
                .map_err(|e| e.to_string())
        },
    )
    .await
    .expect("CONSUMER.INFO answers")
}

/// A spec of kind `T` from camelCase JSON, with a connectionRef.
pub fn spec<T: serde::de::DeserializeOwned>(v: Value) -> T {
    let mut base = serde_json::json!({"connectionRef": {"name": "main"}});
    if let (Some(b), Some(o)) = (base.as_object_mut(), v.as_object()) {
        b.extend(o.clone());
    }
    serde_json::from_value(base).expect("a valid spec")
}
