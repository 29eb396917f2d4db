//! The chart on the sim's real node (docs/node.md, issue #15): [`install`] brings the node up,
//! builds the three controller images from this checkout and imports them under the chart's
//! default names, imports the pinned nats-server as the nats image, and Helm-installs the chart
//! with the controllers as pods under leader election. [`scenario`] then runs a scripted scenario
//! on it (and, when asked, the same scenario on the local backend first, for the per-step times
//! side by side), and brings the node down.
//!
//! Root and the node's parts are needed (`just node-install`); [`unavailable`] says what is
//! missing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, LogParams, PostParams};
use sim::control_plane::NodeHost;
use sim::node::fit::Fit;
use sim::node::{Machine, Node, missing};
use sim::scenario::{self, Report};
use sim::wait::poll;

/// The nats-server version the node's nats image carries (the scenarios' and stories' pin).
pub const NATS_VERSION: &str = "2.15.0";
/// The repository the chart's and the stories' NatsClusters name.
pub const NATS_REPOSITORY: &str = "docker.io/library/nats";

/// The node's static local volumes: twice the most servers a scenario runs.
pub const VOLUMES: usize = 8;

/// The nats-server versions the stories name besides [`NATS_VERSION`] (story 01's upgrade).
pub const STORY_VERSIONS: &[&str] = &["2.15.1"];

/// The node with the chart installed.
pub struct Installed {
    pub node: Node,
    /// The digest the node gave the nats image of [`NATS_VERSION`].
    pub nats_digest: String,
    /// The digests of the other versions imported, by version.
    pub other_versions: Vec<(String, String)>,
}

/// What a node is brought up with beyond the chart.
#[derive(Clone, Debug)]
pub struct NodeShape {
    /// Static local volumes.
    pub volumes: usize,
    /// nats-server versions imported besides [`NATS_VERSION`].
    pub versions: Vec<String>,
    /// Chart values beyond the node's own (YAML).
    pub values: Option<String>,
}

impl Default for NodeShape {
    /// The scenarios' node: [`VOLUMES`], [`NATS_VERSION`] alone.
    fn default() -> Self {
        Self {
            volumes: VOLUMES,
            versions: vec![],
            values: None,
        }
    }
}

/// Where the install step caches the node's parts and nats-server.
pub fn cache() -> PathBuf {
    std::env::var_os("NATS_OPERATORS_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/nats-operators"))
        })
        .unwrap_or_else(|| PathBuf::from(".cache/nats-operators"))
}

/// Why the node cannot run here, if it cannot (root, the node's parts).
pub fn unavailable() -> Option<String> {
    let cache = cache();
    let gaps = missing(&Machine::probe(&cache), &cache);
    (!gaps.is_empty()).then(|| gaps.join("; "))
}

/// Brings the node up under `dir`, imports the images and Helm-installs the chart; `say` gets a
/// line per phase with its time.
pub async fn install(dir: &Path, say: &mut (dyn FnMut(&str) + Send)) -> Result<Installed, String> {
    install_shaped(dir, &NodeShape::default(), say).await
}

/// [`install`] with the volumes and nats versions of `shape`.
pub async fn install_shaped(
    dir: &Path,
    shape: &NodeShape,
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<Installed, String> {
    if let Some(why) = unavailable() {
        return Err(format!("the node cannot run here: {why}"));
    }
    let helm = crate::chart::Helm::find().ok_or("no Helm (scripts/install-helm.sh)")?;
    let cache = cache();
    let t0 = Instant::now();
    // A replaced server's claim goes with its volume, and the static PVs of the node's
    // no-provisioner class cannot be reclaimed (the PV goes Failed): spare volumes stand in for
    // the fresh one a provisioner would make. replace-server's four servers need five.
    let node = Node::up(&cache, &dir.join("node"), shape.volumes)
        .await
        .map_err(|e| format!("node up: {e}"))?;
    say(&format!(
        "node Ready in {:.1} s",
        t0.elapsed().as_secs_f64()
    ));
    let names = import_controllers(&node, &dir.join("images"))?;
    let binary = cache
        .join("nats-server")
        .join(NATS_VERSION)
        .join("nats-server");
    let nats_digest = node
        .import_binary(&binary, "nats-server", NATS_VERSION, NATS_REPOSITORY)
        .map_err(|e| format!("importing nats-server: {e}"))?;
    let mut other_versions = Vec::new();
    for version in &shape.versions {
        let binary = sim::install::nats_server(version)
            .map_err(|e| format!("nats-server {version}: {e}"))?;
        let digest = node
            .import_binary(&binary, "nats-server", version, NATS_REPOSITORY)
            .map_err(|e| format!("importing nats-server {version}: {e}"))?;
        other_versions.push((version.clone(), digest));
    }
    say(&format!(
        "imported {names:?} and {NATS_REPOSITORY}@{nats_digest}"
    ));
    let client = node.client();
    for ns in [crate::chart::NAMESPACE] {
        let mut object = Namespace::default();
        object.metadata.name = Some(ns.into());
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &object)
            .await
            .map_err(|e| format!("namespace {ns}: {e}"))?;
    }
    let values = dir.join("values.yaml");
    // Never: the node has no registry; a pull would be a failure to find the imported image.
    std::fs::write(&values, "image:\n  pullPolicy: Never\n")
        .map_err(|e| format!("{}: {e}", values.display()))?;
    let extra = dir.join("extra-values.yaml");
    std::fs::write(&extra, shape.values.as_deref().unwrap_or("{}\n"))
        .map_err(|e| format!("{}: {e}", extra.display()))?;
    let t1 = Instant::now();
    let files = release_values(dir);
    let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    helm.install(&node.kubeconfig(), &files)
        .map_err(|e| format!("helm install: {e}"))?;
    deployments_ready(&client, crate::chart::NAMESPACE, Duration::from_secs(180)).await?;
    say(&format!(
        "helm install to the three controllers Ready in {:.1} s",
        t1.elapsed().as_secs_f64()
    ));
    Ok(Installed {
        node,
        nats_digest,
        other_versions,
    })
}

/// The values files of the release [`install_shaped`] made under `dir`, later ones winning:
/// the sim's, the node's (`values.yaml`), the shape's (`extra-values.yaml`).
fn release_values(dir: &Path) -> Vec<PathBuf> {
    vec![
        crate::chart::testdata("sim-install-values.yaml"),
        dir.join("values.yaml"),
        dir.join("extra-values.yaml"),
    ]
}

/// The chart's release on a node, as [`install_shaped`] made it under `dir`.
#[derive(Clone, Debug)]
pub struct Release {
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Release {
    pub fn new(dir: &Path, kubeconfig: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
        }
    }

    /// `helm upgrade` of the release with `values` over the ones it was installed with (`None`:
    /// back to those), then waits until every controller's Deployment has rolled out.
    pub async fn upgrade(&self, client: &kube::Client, values: Option<&str>) -> Result<(), String> {
        let helm = crate::chart::Helm::find().ok_or("no Helm (scripts/install-helm.sh)")?;
        let over = self.dir.join("story-values.yaml");
        std::fs::write(&over, values.unwrap_or("{}\n"))
            .map_err(|e| format!("{}: {e}", over.display()))?;
        let mut files = release_values(&self.dir);
        files.push(over);
        let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        let chart = crate::chart::chart_dir().display().to_string();
        let kubeconfig = self.kubeconfig.display().to_string();
        helm.run_args(&crate::chart::release_args(
            "upgrade",
            &chart,
            &kubeconfig,
            &files,
        ))
        .map_err(|e| format!("helm upgrade: {e}"))?;
        deployments_ready(client, crate::chart::NAMESPACE, Duration::from_secs(180)).await
    }
}

impl Installed {
    /// The scenario runner's control plane on this node, `namespaces` created.
    pub async fn host(&self, namespaces: &[&str]) -> Result<NodeHost, String> {
        NodeHost::new(
            self.node.client(),
            crate::chart::NAMESPACE,
            self.fit(),
            namespaces,
        )
        .await
        .map(|h| h.with_containers(self.node.containers()))
        .map_err(|e| e.to_string())
    }
}

impl Installed {
    /// How manifests are fitted to this node: its nats images by version.
    pub fn fit(&self) -> Fit {
        self.other_versions.iter().fold(
            Fit::node(NATS_REPOSITORY, &self.nats_digest),
            |fit, (version, digest)| fit.with_version(version, digest),
        )
    }
}

/// Builds the three controller images (`scripts/image.py --profile image-test`, the image tests'
/// profile) into `out` and imports each under the name the chart's defaults give it.
pub fn import_controllers(node: &Node, out: &Path) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for (name, path) in crate::images::controller_archives(out)? {
        node.import_archive(&path)
            .map_err(|e| format!("importing {}: {e}", path.display()))?;
        names.push(name);
    }
    Ok(names)
}

/// Waits until every Deployment of `namespace` has all its replicas ready; the error holds
/// every pod's state and logs.
pub async fn deployments_ready(
    client: &kube::Client,
    namespace: &str,
    within: Duration,
) -> Result<(), String> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let waited = poll("the controllers' Deployments ready", within, || async {
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let not_ready: Vec<String> = list
            .items
            .iter()
            .filter(|d| !rolled_out(d))
            .filter_map(|d| d.metadata.name.clone())
            .collect();
        if list.items.is_empty() || !not_ready.is_empty() {
            return Err(format!("not ready: {not_ready:?} of {}", list.items.len()));
        }
        Ok(Some(()))
    })
    .await;
    match waited {
        Ok(()) => Ok(()),
        Err(e) => Err(format!("{e}\n{}", describe(client, namespace).await)),
    }
}

/// Whether Deployment `d` has rolled out its current spec: observed, every replica updated and
/// ready, none of an older revision left.
pub fn rolled_out(d: &Deployment) -> bool {
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(s) = d.status.as_ref() else {
        return false;
    };
    s.observed_generation >= d.metadata.generation
        && s.updated_replicas.unwrap_or(0) >= want
        && s.ready_replicas.unwrap_or(0) >= want
        && s.replicas.unwrap_or(0) <= want
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

/// A scenario's run on the node, with the local backend's before it when asked.
pub struct NodeRun {
    pub local: Option<Report>,
    pub node: Report,
    /// How the host differed from its baseline after `down` (empty: restored).
    pub host_left: Vec<String>,
}

/// Runs scenario `name` (from `scenarios/`) on the local backend first when `with_local`, then
/// on a node brought up under `dir` with the chart installed; brings the node down.
pub async fn scenario(
    name: &str,
    dir: &Path,
    with_local: bool,
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<NodeRun, String> {
    let s = scenario::find(&scenario::scenarios_dir(), name).map_err(|e| e.to_string())?;
    let local = if with_local {
        say(&format!("--- {name} on the local backend"));
        let r = scenario::run(&s, &sim::backend::LocalBackend, &mut *say)
            .await
            .map_err(|e| format!("{name} on the local backend: {e}"))?;
        Some(r)
    } else {
        None
    };
    say(&format!("--- {name} on the node backend"));
    let installed = install(dir, &mut *say).await?;
    let namespaces = scenario_namespaces(&s);
    let names: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    let ran = match installed.host(&names).await {
        Ok(host) => scenario::run_on_node(&s, Arc::new(host), &mut *say)
            .await
            .map_err(|e| format!("{name} on the node: {e}")),
        Err(e) => Err(e),
    };
    let t = Instant::now();
    let host_left = installed.node.down().await;
    say(&format!(
        "node down (drain, kill, restore) in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    Ok(NodeRun {
        local,
        node: ran?,
        host_left,
    })
}

/// The namespaces a scenario's objects name (the default one when it names none).
fn scenario_namespaces(s: &scenario::Scenario) -> Vec<String> {
    if s.namespaces.is_empty() {
        vec![sim::control_plane::DEFAULT_NAMESPACE.to_string()]
    } else {
        s.namespaces.clone()
    }
}

/// What a binary that runs on the node starts with: the node available, a runtime, and a temp
/// dir named after `bin`. An error says which of them failed.
pub fn prepare(bin: &str) -> Result<(tokio::runtime::Runtime, tempfile::TempDir), String> {
    if let Some(why) = unavailable() {
        return Err(format!("the node cannot run here: {why}"));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .map_err(|e| format!("a runtime: {e}"))?;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{bin}-"))
        .tempdir()
        .map_err(|e| format!("a temp dir: {e}"))?;
    Ok((runtime, dir))
}
