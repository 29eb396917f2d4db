//! What the node test needs around the node: the controller images built and imported, the
//! chart installed, waits that say what they saw, and a record of every pod the node ran.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, LogParams};
use kube::runtime::watcher;
use serde_json::Value;
use sim::node::Node;
use sim::wait::poll;

pub fn cache() -> PathBuf {
    std::env::var_os("NATS_OPERATORS_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/nats-operators"))
        })
        .expect("HOME or NATS_OPERATORS_CACHE")
}

/// Builds the three controller images (`scripts/image.py --profile image-test`, the image tests'
/// profile) into `out` and imports each under the name the chart's defaults give it.
pub fn import_controllers(node: &Node, out: &Path) -> Vec<String> {
    let root = e2e::chart::workspace_root();
    let run = Command::new("python3")
        .current_dir(&root)
        .args(["scripts/image.py", "--profile", "image-test", "--out"])
        .arg(out)
        .output()
        .expect("running python3 scripts/image.py");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "scripts/image.py: {}\n{stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let mut names = Vec::new();
    for line in stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), Some(path)) = (words.first(), words.last()) else {
            continue;
        };
        if !path.ends_with(".oci.tar") {
            continue;
        }
        node.import_archive(Path::new(path))
            .unwrap_or_else(|e| panic!("importing {path}: {e}"));
        names.push(name.to_string());
    }
    assert_eq!(
        names.len(),
        3,
        "three images from scripts/image.py:\n{stdout}"
    );
    names
}

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

pub fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Every pod of `namespace`: phase, container states and the head and tail of each container's log.
pub async fn describe(client: &kube::Client, namespace: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut out = String::new();
    let list = pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    for p in list {
        let name = p.metadata.name.clone().unwrap_or_default();
        let status = serde_json::to_string(&p.status).unwrap_or_default();
        out.push_str(&format!("--- pod {namespace}/{name}\n{status}\n"));
        let containers = p.spec.map(|s| s.containers).unwrap_or_default();
        for c in containers {
            let params = LogParams {
                container: Some(c.name.clone()),
                ..LogParams::default()
            };
            let log = pods
                .logs(&name, &params)
                .await
                .unwrap_or_else(|e| format!("(no log: {e})"));
            out.push_str(&format!(
                "--- log of {}:\n{}\n",
                c.name,
                head_and_tail(&log, 20)
            ));
        }
    }
    out
}

/// The first and last `n` lines of a log (the cause is often at its start, the state at its end).
fn head_and_tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    if lines.len() <= 2 * n {
        return log.to_string();
    }
    let skipped = lines.len() - 2 * n;
    format!(
        "{}\n[… {skipped} lines …]\n{}",
        lines[..n].join("\n"),
        lines[lines.len() - n..].join("\n")
    )
}

/// Waits until every Deployment of `namespace` has all its replicas ready.
pub async fn deployments_ready(client: &kube::Client, namespace: &str, within: Duration) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let waited = poll("the controllers' Deployments ready", within, || async {
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let not_ready: Vec<String> = list
            .items
            .iter()
            .filter(|d| {
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let have = d
                    .status
                    .as_ref()
                    .and_then(|s| s.ready_replicas)
                    .unwrap_or(0);
                have < want
            })
            .filter_map(|d| d.metadata.name.clone())
            .collect();
        if list.items.is_empty() || !not_ready.is_empty() {
            return Err(format!("not ready: {not_ready:?} of {}", list.items.len()));
        }
        Ok(Some(()))
    })
    .await;
    if let Err(e) = waited {
        panic!("{e}\n{}", describe(client, namespace).await);
    }
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
