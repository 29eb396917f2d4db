//! The test helpers every crate's tests share (the operators', `e2e`'s and the sim's own), in one
//! place: story manifests read from `docs/stories`, condition readers built on
//! [`condition_of`], deadline-based waits on the API and on a [`Host`] (all on
//! [`crate::wait::poll`]), a kube-apiserver booted with the CRDs, server-side apply of one
//! document, `/metrics` scrapes, a certificate for 127.0.0.1, guards that end what a test
//! started when it ends, and headless Chromium for the report page ([`browser`]).
//!
//! They are for tests: where something goes wrong they panic with what and where, as the test
//! would have.

use std::fmt::Debug;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cluster_controller::route_ca::{IssuedCert, RouteCa};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::Scope;
use kube::{Client, ResourceExt};
use serde::Deserialize as _;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::task::JoinHandle;

pub mod browser;
pub mod memory;
pub mod replicas;

use crate::apiserver::ApiServer;
use crate::control_plane::{Host, ObjectRef, condition_of};
use crate::wait::poll;

/// How long a wait on the API tier lasts unless its test passes another deadline.
pub const WAIT: Duration = Duration::from_secs(60);

/// The field manager [`apply`] applies as: a user's `kubectl apply --server-side`.
pub const FIELD_MANAGER: &str = "story-test";

/// The workspace root of the checkout the test runs in ([`crate::checkout::root`]).
pub fn workspace_root() -> PathBuf {
    crate::checkout::root()
}

/// `path` relative to the workspace root (an absolute `path` stays as it is).
pub fn workspace_path(path: impl AsRef<Path>) -> PathBuf {
    workspace_root().join(path)
}

/// Every object document of the manifest at `path` (relative to the workspace root), as JSON.
pub fn story_docs(path: impl AsRef<Path>) -> Vec<Value> {
    let path = workspace_path(path);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .enumerate()
        .map(|(i, doc)| {
            let yaml = serde_yaml::Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}, document {i}: {e}", path.display()));
            serde_json::to_value(yaml)
                .unwrap_or_else(|e| panic!("{}, document {i} as JSON: {e}", path.display()))
        })
        .filter(Value::is_object)
        .collect()
}

/// The documents of `kind` in the manifest at `path`, decoded as `T` (`Value` keeps them JSON).
pub fn story_objects<T: DeserializeOwned>(path: impl AsRef<Path>, kind: &str) -> Vec<T> {
    let path = path.as_ref();
    story_docs(path)
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .map(|d| {
            serde_json::from_value(d)
                .unwrap_or_else(|e| panic!("a {kind} of {}: {e}", path.display()))
        })
        .collect()
}

/// The first document of `kind` in the manifest at `path`, decoded as `T`.
pub fn story_object<T: DeserializeOwned>(path: impl AsRef<Path>, kind: &str) -> T {
    let path = path.as_ref();
    story_objects(path, kind)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{} holds no {kind}", path.display()))
}

/// A certificate for `localhost` and 127.0.0.1 under `ca`, valid from now.
pub fn localhost_cert(ca: &RouteCa) -> IssuedCert {
    ca.issue(
        &["localhost".into()],
        &["127.0.0.1".parse().expect("an IP address")],
        time::OffsetDateTime::now_utc(),
    )
    .unwrap_or_else(|e| panic!("a certificate for 127.0.0.1: {e}"))
}

/// (status, reason) of condition `type_` of an object, if it has one.
pub fn condition(obj: &Value, type_: &str) -> Option<(String, String)> {
    condition_of(obj, type_).map(|(status, reason, _)| (status, reason))
}

/// The message of condition `type_` of an object, empty when it has none.
pub fn message(obj: &Value, type_: &str) -> String {
    condition_of(obj, type_)
        .map(|(_, _, message)| message)
        .unwrap_or_default()
}

/// Whether condition `type_` of an object has `status` and `reason`.
pub fn is(obj: &Value, type_: &str, status: &str, reason: &str) -> bool {
    condition(obj, type_) == Some((status.into(), reason.into()))
}

/// A typed kind an `Api<K>` serves and the helpers read back as JSON.
pub trait ApiObject:
    kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + serde::Serialize + Debug
{
}

impl<K> ApiObject for K where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + serde::Serialize + Debug
{
}

/// Polls `name` of `api` until `check` accepts it as JSON, for at most [`WAIT`]; returns it.
pub async fn wait_for<K: ApiObject>(
    api: &Api<K>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    wait_for_within(api, name, what, WAIT, check).await
}

/// [`wait_for`] for at most `within`.
pub async fn wait_for_within<K: ApiObject>(
    api: &Api<K>,
    name: &str,
    what: &str,
    within: Duration,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let check = &check;
    poll(what, within, || async move {
        let Some(obj) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
            return Err(format!("{name} does not exist"));
        };
        let v = serde_json::to_value(&obj).map_err(|e| e.to_string())?;
        if check(&v) {
            Ok(Some(v))
        } else {
            Err(format!("status: {}", v["status"]))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Waits up to [`WAIT`] until `name` is gone from `api` (its finalizers done).
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    poll(&format!("{name} gone"), WAIT, || async move {
        match api.get_opt(name).await.map_err(|e| e.to_string())? {
            None => Ok(Some(())),
            Some(_) => Err("still there (finalizers)".to_string()),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Polls `get` until `check` accepts what it returns, for at most `within`; returns that value.
pub async fn wait_until<T, F, Fut>(
    what: &str,
    within: Duration,
    get: F,
    check: impl Fn(&T) -> bool,
) -> T
where
    T: Debug,
    F: Fn() -> Fut,
    Fut: Future<Output = T>,
{
    let (get, check) = (&get, &check);
    poll(what, within, || async move {
        let v = get().await;
        if check(&v) {
            Ok(Some(v))
        } else {
            Err(format!("{v:?}"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Polls `object` of `host` until `check` accepts it, for at most `within`; returns it.
pub async fn wait_object(
    host: &Host,
    object: &ObjectRef,
    what: &str,
    within: Duration,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let check = &check;
    poll(what, within, || async move {
        let now = host.get(object).await.unwrap_or_else(|e| panic!("{e}"));
        if check(&now) {
            Ok(Some(now))
        } else {
            Err(format!(
                "status: {}",
                serde_json::to_string_pretty(&now["status"]).unwrap_or_default()
            ))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// [`Host::wait_condition`] for `condition` of `object`; on timeout panics showing its status.
pub async fn wait_condition(
    host: &Host,
    object: &ObjectRef,
    condition: &str,
    within: Duration,
) -> Value {
    match host.wait_condition(object, condition, within).await {
        Ok(v) => v,
        Err(e) => {
            let now = host.get(object).await.unwrap_or_default();
            panic!("{e}\nstatus: {}", now["status"]);
        }
    }
}

/// Deletes `name` (absent is fine) and waits up to `within` until it is gone.
pub async fn delete_and_wait<K>(api: &Api<K>, name: &str, within: Duration) -> Result<(), String>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(e) => return Err(format!("delete {name}: {}", api_error(&e))),
    }
    poll(
        &format!("{name} gone after delete"),
        within,
        || async move {
            match api.get_opt(name).await {
                Ok(None) => Ok(Some(Ok(()))),
                Ok(Some(left)) => Err(format!("still present, finalizers {:?}", left.finalizers())),
                Err(e) => Ok(Some(Err(format!("get {name}: {}", api_error(&e))))),
            }
        },
    )
    .await
    .map_err(|e| e.to_string())?
}

/// An API refusal as `code reason: message`; any other error as its text.
pub fn api_error(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => {
            format!("{} {}: {}", status.code, status.reason, status.message)
        }
        other => other.to_string(),
    }
}

/// A kube-apiserver 1.20 with every CRD of `nats_api::crds::all()` and `namespaces`.
pub async fn apiserver_with_crds(namespaces: &[&str]) -> ApiServer {
    apiserver_with(&nats_api::crds::all(), namespaces).await
}

/// A kube-apiserver 1.20 with `crds` established and `namespaces` created; panics saying why not.
pub async fn apiserver_with(crds: &[CustomResourceDefinition], namespaces: &[&str]) -> ApiServer {
    apiserver_judged(crds, namespaces, true).await
}

/// [`apiserver_with_crds`] without the CEL judge (as a cluster before Kubernetes 1.25), for a
/// test of a controller's own answer to what the CRDs' CEL rules refuse.
pub async fn apiserver_with_crds_unjudged(namespaces: &[&str]) -> ApiServer {
    apiserver_judged(&nats_api::crds::all(), namespaces, false).await
}

async fn apiserver_judged(
    crds: &[CustomResourceDefinition],
    namespaces: &[&str],
    judged: bool,
) -> ApiServer {
    // Booted over a seed holding the CRDs: the creates below find them there.
    let api = ApiServer::start_seeded(&std::env::temp_dir(), crds)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    if judged {
        api.install_crds(crds).await
    } else {
        api.install_crds_unjudged(crds).await
    }
    .unwrap_or_else(|e| panic!("{e}"));
    for ns in namespaces {
        api.create_namespace(ns)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    api
}

/// Server-side applies one JSON object as [`FIELD_MANAGER`], its resource found by discovery.
pub async fn apply(client: &Client, doc: &Value) -> Result<(), String> {
    let text = |pointer: &str| {
        doc.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let (kind, name) = (text("/kind"), text("/metadata/name"));
    let (group, version) = text("/apiVersion")
        .split_once('/')
        .unwrap_or(("", text("/apiVersion")));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("discovering {kind}: {e}"))?;
    let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
        Some(ns) if caps.scope == Scope::Namespaced => {
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        _ => Api::all_with(client.clone(), &ar),
    };
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(doc),
    )
    .await
    .map(drop)
    .map_err(|e| format!("applying {kind} {name}: {e}"))
}

/// A task aborted when this drops: an in-process controller ends with its test, pass or fail.
pub struct AbortOnDrop(JoinHandle<()>);

impl AbortOnDrop {
    /// Spawns `task` on the test's runtime.
    pub fn spawn(task: impl Future<Output = ()> + Send + 'static) -> Self {
        AbortOnDrop(tokio::spawn(task))
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A child process killed and reaped when this drops, pass or fail. When it was started with
/// its output kept ([`spawn_binary`]), a test that panics prints the output's last lines as it
/// drops, and [`KillOnDrop::terminate`]'s caller can show them on a bad exit status.
pub struct KillOnDrop(pub std::process::Child, Option<tempfile::NamedTempFile>);

/// How many lines of a binary's output a failing test prints.
pub const OUTPUT_TAIL: usize = 60;

impl KillOnDrop {
    /// Guards `child`, whose output is not kept.
    pub fn new(child: std::process::Child) -> Self {
        KillOnDrop(child, None)
    }

    /// Sends the process SIGTERM (what the kubelet sends a pod's container) and waits up to
    /// `within` for it to exit; its exit status, or why it did not exit.
    pub async fn terminate(
        &mut self,
        within: Duration,
    ) -> Result<std::process::ExitStatus, String> {
        use nix::sys::signal::{Signal, kill};
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        kill(pid, Signal::SIGTERM).map_err(|e| format!("SIGTERM to {pid}: {e}"))?;
        let child = &mut self.0;
        poll(
            &format!("process {pid} exits after SIGTERM"),
            within,
            || {
                let exited = child.try_wait().map_err(|e| e.to_string());
                async move { exited }
            },
        )
        .await
        .map_err(|e| e.to_string())
    }

    /// The last `lines` lines of the process's output (stdout and stderr as written), or a
    /// sentence saying why there are none.
    pub fn output_tail(&self, lines: usize) -> String {
        let Some(file) = &self.1 else {
            return "(its output was not kept)".to_owned();
        };
        match std::fs::read_to_string(file.path()) {
            Ok(text) => {
                let all: Vec<&str> = text.lines().collect();
                all[all.len().saturating_sub(lines)..].join("\n")
            }
            Err(e) => format!("(reading {}: {e})", file.path().display()),
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if std::thread::panicking() && self.1.is_some() {
            eprintln!(
                "--- the last {OUTPUT_TAIL} lines of process {}'s output:\n{}",
                self.0.id(),
                self.output_tail(OUTPUT_TAIL)
            );
        }
    }
}

/// Starts the binary `program` with `KUBECONFIG=kubeconfig` and `args`, its output (stdout and
/// stderr, at `RUST_LOG` or info) kept in a temp file that a failing test prints the end of.
pub fn spawn_binary(program: &Path, kubeconfig: &Path, args: &[&str]) -> KillOnDrop {
    let name = program.display();
    let log = tempfile::NamedTempFile::new()
        .unwrap_or_else(|e| panic!("a temp file for {name}'s output: {e}"));
    let out = |what: &str| {
        log.as_file()
            .try_clone()
            .unwrap_or_else(|e| panic!("{name}'s {what}: {e}"))
    };
    let child = std::process::Command::new(program)
        .env("KUBECONFIG", kubeconfig)
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
        )
        .args(args)
        .stdout(out("stdout"))
        .stderr(out("stderr"))
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
    KillOnDrop(child, Some(log))
}

/// One `GET /metrics` of 127.0.0.1:`port`: the whole HTTP response, status line first.
pub async fn metrics(port: u16) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut body = String::new();
    s.read_to_string(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    Ok(body)
}

/// Polls [`metrics`] of `port` until `accept` takes the response, for at most `within`.
pub async fn wait_metrics(
    port: u16,
    what: &str,
    within: Duration,
    accept: impl Fn(&str) -> bool,
) -> String {
    let accept = &accept;
    poll(what, within, || async move {
        let body = metrics(port).await?;
        Ok(accept(&body).then_some(body))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Publishes `payload` on `subject` through `js` and waits for the stream's ack, retrying for
/// at most `within` while nobody answers yet.
///
/// A stream's subjects are subscribed by its leader alone, and a route carries that interest to
/// the other servers a moment after `STREAM.CREATE` (or a leader move) is answered: a publish sent
/// in that moment by a client on another server meets no responders, which async-nats reports as
/// `StreamNotFound` (seen in CI, 1 run in ~10). Any other error fails at once.
pub async fn publish_acked(
    js: &async_nats::jetstream::Context,
    subject: &str,
    payload: bytes::Bytes,
    within: Duration,
) -> async_nats::jetstream::publish::PublishAck {
    use async_nats::jetstream::context::PublishErrorKind;
    let what = format!("the ack of a publish on {subject}");
    poll(&what, within, || {
        let payload = payload.clone();
        async move {
            let sent = js
                .publish(subject.to_string(), payload)
                .await
                .unwrap_or_else(|e| panic!("publish on {subject}: {e}"));
            match sent.await {
                Ok(ack) => Ok(Some(ack)),
                Err(e) if e.kind() == PublishErrorKind::StreamNotFound => Ok(None),
                // A timeout may hide a stored message: a retry could store it twice.
                Err(e) => panic!("publish on {subject}: {e}"),
            }
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn story_docs_reads_the_objects_of_a_manifest_from_the_workspace_root() {
        let docs = story_docs("docs/stories/01-quickstart/01-natscluster.yaml");
        let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
        assert_eq!(kinds, ["Namespace", "NatsCluster"]);
        let clusters: Vec<nats_api::cluster::NatsCluster> = story_objects(
            "docs/stories/01-quickstart/01-natscluster.yaml",
            "NatsCluster",
        );
        assert_eq!(clusters.len(), 1);
        assert_eq!(clusters[0].spec.replicas, 3);
    }

    #[test]
    fn condition_readers_see_status_reason_and_message() {
        let obj = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "SeedLost", "message": "lost"},
        ]}});
        assert_eq!(
            condition(&obj, "Ready"),
            Some(("False".into(), "SeedLost".into()))
        );
        assert!(is(&obj, "Ready", "False", "SeedLost"));
        assert!(!is(&obj, "Ready", "True", "SeedLost"));
        assert_eq!(message(&obj, "Ready"), "lost");
        assert_eq!(condition(&obj, "Synced"), None);
        assert_eq!(message(&obj, "Synced"), "");
    }

    #[tokio::test]
    async fn wait_until_returns_the_first_value_the_check_accepts() {
        let n = std::sync::atomic::AtomicU32::new(0);
        let got = wait_until(
            "three calls",
            Duration::from_secs(5),
            || async { n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 },
            |v| *v >= 3,
        )
        .await;
        assert_eq!(got, 3);
    }
}
