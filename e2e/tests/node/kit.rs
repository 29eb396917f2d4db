//! What the node test needs around the node (installed by `e2e::on_node`): waits that say what
//! they saw, and a record of every pod the node ran.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::on_node::describe;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use serde_json::Value;
use sim::node::servers::pod_ready;
use sim::wait::poll;

pub fn resource<K: kube::Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

/// The condition `type` of an object's status: (status, reason).
pub fn condition(obj: &Value, type_: &str) -> Option<(String, String)> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("status"), s("reason"))
        })
}

pub fn is_true(obj: &Value, type_: &str) -> bool {
    condition(obj, type_).is_some_and(|(s, _)| s == "True")
}

/// Polls `namespace/name` of `ar` until `ok` holds of it; panics with the object and the pods.
pub async fn object_until(
    client: &kube::Client,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
    what: &str,
    within: Duration,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, ar);
    let waited = poll(what, within, || async {
        let obj = api.get(name).await.map_err(|e| e.to_string())?;
        let value = serde_json::to_value(&obj).map_err(|e| e.to_string())?;
        if ok(&value) {
            Ok(Some(value))
        } else {
            Err(format!("status: {}", value["status"]))
        }
    })
    .await;
    match waited {
        Ok(v) => v,
        Err(e) => panic!("{e}\n{}", describe(client, namespace).await),
    }
}

/// A pod the node ran: first seen at `at` (since the record began), ready at `ready`.
#[derive(Clone, Debug)]
pub struct Seen {
    pub name: String,
    pub uid: String,
    pub at: Duration,
    pub ready: Option<Duration>,
}

/// Every pod of a namespace the node ran, in the order each first appeared, from a watch.
#[derive(Clone, Default)]
pub struct PodRecord(Arc<Mutex<Vec<Seen>>>);

impl PodRecord {
    /// Starts recording `namespace`'s pods; the task ends with the test's runtime.
    pub fn start(client: &kube::Client, namespace: &str) -> (Self, tokio::task::JoinHandle<()>) {
        let record = Self::default();
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let r = record.clone();
        let t0 = Instant::now();
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = events.next().await {
                let pods = match event {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => vec![p],
                    _ => continue,
                };
                for p in pods {
                    r.saw(&p, t0.elapsed());
                }
            }
        });
        (record, task)
    }

    fn saw(&self, p: &Pod, at: Duration) {
        let (Some(name), Some(uid)) = (p.metadata.name.clone(), p.metadata.uid.clone()) else {
            return;
        };
        let ready = pod_ready(p);
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match seen.iter_mut().find(|s| s.uid == uid) {
            Some(s) => {
                if ready && s.ready.is_none() {
                    s.ready = Some(at);
                }
            }
            None => seen.push(Seen {
                name,
                uid,
                at,
                ready: ready.then_some(at),
            }),
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Each pod name with the uids it ran under, in order.
    pub fn by_name(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for s in self.seen() {
            out.entry(s.name).or_default().push(s.uid);
        }
        out
    }
}

/// What the servers hold of the messages `consumer` never received: for each, the stream
/// sequence its ack named, whether the stream still stores it there (and under which id), and the
/// consumer's counts — a message the stream lost reads differently from one it never delivered.
pub async fn undelivered(
    js: &async_nats::jetstream::Context,
    ledger: &sim::ledger::Ledger,
    stream: &str,
    consumer: &str,
) -> String {
    let acked = ledger.acknowledged_ids();
    let got = ledger.delivered_ids(consumer);
    let missing: Vec<u64> = acked.difference(&got).copied().take(20).collect();
    let mut out = format!("{consumer} never received ids {missing:?}\n");
    let events = ledger.events();
    let Ok(mut s) = js.get_stream(stream).await else {
        return out + "(the stream does not answer)";
    };
    for id in &missing {
        for e in &events {
            if let sim::ledger::Event::Ack {
                id: i,
                stream_seq,
                duplicate,
                at_ms,
            } = e
                && i == id
            {
                let stored = match s.get_raw_message(*stream_seq).await {
                    Ok(m) => format!(
                        "stored there as {:?}",
                        m.headers.get(sim::traffic::MSG_ID).map(|v| v.to_string())
                    ),
                    Err(e) => format!("not there: {e}"),
                };
                out.push_str(&format!(
                    "  id {id}: acked at {at_ms} ms as seq {stream_seq} (duplicate {duplicate}); {stored}\n"
                ));
            }
        }
    }
    if let Ok(info) = s.info().await {
        out.push_str(&format!("  stream state: {:?}\n", info.state));
    }
    match s.consumer_info(consumer).await {
        Ok(c) => out.push_str(&format!(
            "  consumer: delivered {:?}, ack floor {:?}, ack pending {}, redelivered {}, pending {}\n",
            c.delivered, c.ack_floor, c.num_ack_pending, c.num_redelivered, c.num_pending
        )),
        Err(e) => out.push_str(&format!("  consumer info: {e}\n")),
    }
    out
}
