//! Topologies on the local backend: a cluster of N JetStream servers, superclusters joined by
//! gateways, leaf nodes with their own JetStream domain, operator mode, server tags.
//! Builders read like the topology; waits are verbs built on [`crate::wait::poll`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::config::{
    ClusterBlock, GatewayBlock, JetStreamBlock, LeafNodesBlock, LeafRemote, RemoteGateway,
    ServerConfig,
};
use crate::install::{self, InstallError};
use crate::ports::free_port;
use crate::proxy::{LinkProxy, ProxyError};
use crate::server::{ProcessState, Server, ServerError};
use crate::wait::{self, WaitError};

/// The user/password of the system account in [`Auth::Accounts`] mode.
pub const SYS_USER: (&str, &str) = ("sys", "sys");
/// The user/password of the application account in [`Auth::Accounts`] mode (also the no-auth user).
pub const APP_USER: (&str, &str) = ("app", "app");
/// The application account's name in [`Auth::Accounts`] mode.
pub const APP_ACCOUNT: &str = "APP";

const BOOT_ATTEMPTS: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error(transparent)]
    Install(#[from] InstallError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Wait(#[from] WaitError),
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    #[error("creating the topology's temp dir: {0}")]
    TempDir(#[source] std::io::Error),
    #[error("no server named {0} in the topology")]
    NoSuchServer(String),
    #[error("no cluster named {0} in the topology")]
    NoSuchCluster(String),
    #[error("topology spec is invalid: {0}")]
    Invalid(String),
    #[error("gave up after {attempts} boots: ports kept colliding ({last})")]
    PortsExhausted { attempts: usize, last: String },
}

/// How clients authenticate.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Auth {
    /// Two config accounts: SYS (system, user sys/sys) and APP (JetStream, user app/app, also the
    /// no-auth user so plain clients land in APP).
    #[default]
    Accounts,
    /// No accounts block; the spec's `extra_config` supplies whatever is wanted.
    None,
    /// Operator mode: trusted operator JWT, system account, full resolver with preloads.
    Operator(OperatorMode),
}

/// Inputs of operator mode; the JWTs are signed elsewhere (the `nats-claims` crate).
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorMode {
    pub operator_jwt: String,
    /// Public key of the system account.
    pub system_account: String,
    /// (account public key, account JWT) pairs preloaded into the resolver (include the system account).
    pub preload: Vec<(String, String)>,
}

/// How the clusters of a supercluster find each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayMode {
    /// Every cluster lists every other cluster; unknown clusters are rejected.
    Explicit,
    /// Each cluster lists one seed cluster and learns the rest by gossip.
    Gossip,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSpec {
    pub name: String,
    pub servers: usize,
    /// Server tags per server index (missing entries mean no tags).
    pub tags: Vec<Vec<String>>,
}

/// A single-server leaf node with its own JetStream domain, connected to a hub cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct LeafSpec {
    pub name: String,
    pub domain: String,
    pub hub: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TopologySpec {
    pub version: String,
    pub clusters: Vec<ClusterSpec>,
    pub gateways: Option<GatewayMode>,
    pub leafs: Vec<LeafSpec>,
    pub auth: Auth,
    /// JetStream domain of the hub (the clusters); leafs always have their own.
    pub hub_domain: Option<String>,
    /// Route gateway and leaf connections through sim proxies so links can be cut and restored.
    pub cuttable_links: bool,
    /// Raw config text appended to every server's config.
    pub extra_config: String,
}

impl TopologySpec {
    /// One cluster `c1` of `n` JetStream servers.
    pub fn cluster(n: usize) -> Self {
        TopologySpec {
            version: install::PINNED.to_string(),
            clusters: vec![ClusterSpec {
                name: "c1".to_string(),
                servers: n,
                tags: Vec::new(),
            }],
            gateways: None,
            leafs: Vec::new(),
            auth: Auth::default(),
            hub_domain: None,
            cuttable_links: false,
            extra_config: String::new(),
        }
    }

    /// `m` clusters (`c1` … `cm`) of `n` servers joined by gateways.
    pub fn supercluster(m: usize, n: usize, mode: GatewayMode) -> Self {
        let mut spec = TopologySpec::cluster(n);
        spec.clusters = (1..=m)
            .map(|i| ClusterSpec {
                name: format!("c{i}"),
                servers: n,
                tags: Vec::new(),
            })
            .collect();
        spec.gateways = Some(mode);
        spec.cuttable_links = true;
        spec
    }

    /// Adds a leaf node `name` with JetStream domain `domain`, connected to cluster `hub`.
    pub fn with_leaf(mut self, name: &str, domain: &str, hub: &str) -> Self {
        self.leafs.push(LeafSpec {
            name: name.to_string(),
            domain: domain.to_string(),
            hub: hub.to_string(),
        });
        self.cuttable_links = true;
        self
    }

    pub fn with_version(mut self, version: &str) -> Self {
        self.version = version.to_string();
        self
    }

    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    pub fn with_extra_config(mut self, text: &str) -> Self {
        self.extra_config = text.to_string();
        self
    }

    pub fn with_hub_domain(mut self, domain: &str) -> Self {
        self.hub_domain = Some(domain.to_string());
        self
    }

    /// Tags server `index` of cluster `cluster`.
    pub fn with_tags(mut self, cluster: &str, index: usize, tags: &[&str]) -> Self {
        if let Some(c) = self.clusters.iter_mut().find(|c| c.name == cluster) {
            if c.tags.len() <= index {
                c.tags.resize(index + 1, Vec::new());
            }
            c.tags[index] = tags.iter().map(|t| t.to_string()).collect();
        }
        self
    }

    fn validate(&self) -> Result<(), TopologyError> {
        if self.clusters.is_empty() || self.clusters.iter().any(|c| c.servers == 0) {
            return Err(TopologyError::Invalid(
                "every topology needs at least one cluster of at least one server".into(),
            ));
        }
        if self.clusters.len() > 1 && self.gateways.is_none() {
            return Err(TopologyError::Invalid(
                "several clusters need a gateway mode".into(),
            ));
        }
        if self.gateways.is_some() && self.clusters.iter().any(|c| c.servers < 2) {
            return Err(TopologyError::Invalid(
                "a JetStream cluster in a supercluster needs at least 2 servers (routes)".into(),
            ));
        }
        for l in &self.leafs {
            if !self.clusters.iter().any(|c| c.name == l.hub) {
                return Err(TopologyError::NoSuchCluster(l.hub.clone()));
            }
        }
        Ok(())
    }
}

/// Ports of one server in one boot attempt.
#[derive(Debug, Clone, Copy)]
struct Ports {
    client: u16,
    http: u16,
    cluster: u16,
    gateway: u16,
    leaf: u16,
}

impl Ports {
    fn allocate() -> Self {
        Ports {
            client: free_port(),
            http: free_port(),
            cluster: free_port(),
            gateway: free_port(),
            leaf: free_port(),
        }
    }
}

/// A running topology. Every process (servers, proxies) stops when it drops.
pub struct Topology {
    pub spec: TopologySpec,
    servers: Vec<Server>,
    /// Gateway proxies by destination server name (inbound gateway traffic of that server).
    gateway_proxies: BTreeMap<String, LinkProxy>,
    /// Leaf proxies by leaf server name (the leaf's link to its hub).
    leaf_proxies: BTreeMap<String, LinkProxy>,
    http: reqwest::Client,
    // Declared last: dropped after the servers are dead.
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topology")
            .field("dir", &self.dir.path())
            .field("servers", &self.servers)
            .finish()
    }
}

/// A server's role, for grouping in waits.
fn domain_of(spec: &TopologySpec, server: &Server) -> String {
    match spec.leafs.iter().find(|l| l.name == server.cluster) {
        Some(l) => format!("leaf:{}", l.domain),
        None => format!("hub:{}", spec.hub_domain.clone().unwrap_or_default()),
    }
}

impl Topology {
    /// Boots the topology and waits until it is ready (meta leaders with all peers, healthz ok,
    /// gateways and leafs connected). Retries with fresh ports when a port collides.
    pub async fn start(spec: TopologySpec) -> Result<Topology, TopologyError> {
        spec.validate()?;
        let binary = install::nats_server(&spec.version)?;
        let mut last = String::new();
        for _ in 0..BOOT_ATTEMPTS {
            let mut topo = Topology::prepare(spec.clone(), &binary)?;
            match topo.boot().await {
                Ok(()) => {
                    topo.wait_ready(Duration::from_secs(60)).await?;
                    return Ok(topo);
                }
                Err(TopologyError::Server(e @ ServerError::PortInUse { .. })) => {
                    last = e.to_string();
                    drop(topo);
                }
                Err(TopologyError::Proxy(e)) => {
                    last = e.to_string();
                    drop(topo);
                }
                Err(e) => return Err(e),
            }
        }
        Err(TopologyError::PortsExhausted {
            attempts: BOOT_ATTEMPTS,
            last,
        })
    }

    fn prepare(spec: TopologySpec, binary: &std::path::Path) -> Result<Topology, TopologyError> {
        let dir = tempfile::Builder::new()
            .prefix("sim-topology-")
            .tempdir()
            .map_err(TopologyError::TempDir)?;
        let mut ports: BTreeMap<String, Ports> = BTreeMap::new();
        let mut names_by_cluster: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for c in &spec.clusters {
            for i in 0..c.servers {
                let name = format!("{}-{}", c.name, i);
                ports.insert(name.clone(), Ports::allocate());
                names_by_cluster
                    .entry(c.name.clone())
                    .or_default()
                    .push(name);
            }
        }
        for l in &spec.leafs {
            ports.insert(l.name.clone(), Ports::allocate());
        }

        // Proxies are created unbound here (ports chosen) and bound in boot().
        let mut gateway_proxies = BTreeMap::new();
        let mut leaf_proxies = BTreeMap::new();
        if spec.cuttable_links {
            if spec.gateways.is_some() {
                for (name, p) in ports
                    .iter()
                    .filter(|(n, _)| !spec.leafs.iter().any(|l| &l.name == *n))
                {
                    gateway_proxies.insert(
                        name.clone(),
                        LinkProxy::new(free_port(), ("127.0.0.1".to_string(), p.gateway)),
                    );
                }
            }
            for l in &spec.leafs {
                // A leaf dials the first hub server through its own proxy.
                let hub0 = format!("{}-0", l.hub);
                let hub_port = ports[&hub0].leaf;
                leaf_proxies.insert(
                    l.name.clone(),
                    LinkProxy::new(free_port(), ("127.0.0.1".to_string(), hub_port)),
                );
            }
        }

        let gateway_url = |server: &str| -> String {
            match gateway_proxies.get(server) {
                Some(p) => format!("nats://127.0.0.1:{}", p.listen_port()),
                None => format!("nats://127.0.0.1:{}", ports[server].gateway),
            }
        };

        let auth_text = render_auth(&spec.auth);
        let mut servers = Vec::new();
        for c in &spec.clusters {
            let names = &names_by_cluster[&c.name];
            for (i, name) in names.iter().enumerate() {
                let p = ports[name];
                let sdir = dir.path().join(name);
                let mut cfg =
                    ServerConfig::new(name.clone(), p.client, p.http, sdir.join("nats.pid"));
                cfg.jetstream = Some(JetStreamBlock {
                    store_dir: sdir.join("store"),
                    domain: spec.hub_domain.clone(),
                    max_memory_store: Some(256 << 20),
                    max_file_store: Some(4 << 30),
                });
                if c.servers > 1 {
                    cfg.cluster = Some(ClusterBlock {
                        name: c.name.clone(),
                        port: p.cluster,
                        routes: names
                            .iter()
                            .filter(|n| *n != name)
                            .map(|n| format!("nats-route://127.0.0.1:{}", ports[n].cluster))
                            .collect(),
                    });
                }
                if let Some(mode) = spec.gateways {
                    let others: Vec<&ClusterSpec> =
                        spec.clusters.iter().filter(|o| o.name != c.name).collect();
                    let listed: Vec<&ClusterSpec> = match mode {
                        GatewayMode::Explicit => others,
                        // Gossip: every cluster knows only the first other one; the rest is learned.
                        GatewayMode::Gossip => others.into_iter().take(1).collect(),
                    };
                    cfg.gateway = Some(GatewayBlock {
                        name: c.name.clone(),
                        port: p.gateway,
                        advertise: gateway_proxies
                            .get(name)
                            .map(|px| format!("127.0.0.1:{}", px.listen_port())),
                        reject_unknown_cluster: mode == GatewayMode::Explicit,
                        gateways: listed
                            .iter()
                            .map(|o| RemoteGateway {
                                name: o.name.clone(),
                                urls: names_by_cluster[&o.name]
                                    .iter()
                                    .map(|n| gateway_url(n))
                                    .collect(),
                            })
                            .collect(),
                    });
                }
                if spec.leafs.iter().any(|l| l.hub == c.name) {
                    cfg.leafnodes = Some(LeafNodesBlock {
                        port: Some(p.leaf),
                        advertise: None,
                        remotes: Vec::new(),
                    });
                }
                cfg.tags = c.tags.get(i).cloned().unwrap_or_default();
                cfg.extra = format!("{auth_text}{}", spec.extra_config);
                if let Auth::Operator(_) = &spec.auth {
                    cfg.extra = format!("{}{}", render_resolver(&sdir), cfg.extra);
                }
                servers.push(Server::new(binary.to_path_buf(), sdir, c.name.clone(), cfg));
            }
        }
        for l in &spec.leafs {
            let p = ports[&l.name];
            let sdir = dir.path().join(&l.name);
            let mut cfg =
                ServerConfig::new(l.name.clone(), p.client, p.http, sdir.join("nats.pid"));
            cfg.jetstream = Some(JetStreamBlock {
                store_dir: sdir.join("store"),
                domain: Some(l.domain.clone()),
                max_memory_store: Some(256 << 20),
                max_file_store: Some(4 << 30),
            });
            let hub_urls: Vec<String> = match leaf_proxies.get(&l.name) {
                Some(px) => vec![px.listen_port()],
                None => names_by_cluster[&l.hub]
                    .iter()
                    .map(|n| ports[n].leaf)
                    .collect(),
            }
            .into_iter()
            .map(|port| match &spec.auth {
                Auth::Accounts => {
                    format!("nats-leaf://{}:{}@127.0.0.1:{port}", APP_USER.0, APP_USER.1)
                }
                _ => format!("nats-leaf://127.0.0.1:{port}"),
            })
            .collect();
            cfg.leafnodes = Some(LeafNodesBlock {
                port: None,
                advertise: None,
                remotes: vec![LeafRemote {
                    urls: hub_urls,
                    account: matches!(spec.auth, Auth::Accounts).then(|| APP_ACCOUNT.to_string()),
                    credentials: None,
                }],
            });
            cfg.extra = format!("{auth_text}{}", spec.extra_config);
            if let Auth::Operator(_) = &spec.auth {
                cfg.extra = format!("{}{}", render_resolver(&sdir), cfg.extra);
            }
            servers.push(Server::new(binary.to_path_buf(), sdir, l.name.clone(), cfg));
        }
        Ok(Topology {
            spec,
            servers,
            gateway_proxies,
            leaf_proxies,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap_or_default(),
            dir,
        })
    }

    async fn boot(&mut self) -> Result<(), TopologyError> {
        for p in self
            .gateway_proxies
            .values_mut()
            .chain(self.leaf_proxies.values_mut())
        {
            p.start().await?;
        }
        // Servers of a cluster start concurrently would be faster, but sequential start keeps
        // error attribution simple and a server accepts clients before its routes are up anyway.
        for s in &mut self.servers {
            s.start().await?;
        }
        Ok(())
    }

    /// The topology's temp dir (configs, logs, stores).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    pub fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name().to_string()).collect()
    }

    pub fn server(&self, name: &str) -> Result<&Server, TopologyError> {
        self.servers
            .iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| TopologyError::NoSuchServer(name.to_string()))
    }

    pub fn server_mut(&mut self, name: &str) -> Result<&mut Server, TopologyError> {
        self.servers
            .iter_mut()
            .find(|s| s.name() == name)
            .ok_or_else(|| TopologyError::NoSuchServer(name.to_string()))
    }

    /// Client URLs of the servers of one cluster (or leaf).
    pub fn cluster_urls(&self, cluster: &str) -> Vec<String> {
        self.servers
            .iter()
            .filter(|s| s.cluster == cluster)
            .map(Server::client_url)
            .collect()
    }

    /// Client URLs of every hub server (all clusters, no leafs).
    pub fn client_urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|s| !self.is_leaf(s))
            .map(Server::client_url)
            .collect()
    }

    /// Hub client URLs parsed for async-nats (`connect` does not split comma-joined strings).
    pub fn server_addrs(&self) -> Vec<async_nats::ServerAddr> {
        self.client_urls()
            .iter()
            .filter_map(|u| u.parse().ok())
            .collect()
    }

    /// A client connected to the hub servers (in [`Auth::Accounts`] mode: the APP account).
    pub async fn connect(&self) -> Result<async_nats::Client, async_nats::ConnectError> {
        async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect(self.server_addrs())
            .await
    }

    fn is_leaf(&self, s: &Server) -> bool {
        self.spec.leafs.iter().any(|l| l.name == s.cluster)
    }

    /// GET a monitoring endpoint of one server as JSON.
    pub async fn monitor(&self, server: &str, path: &str) -> Result<Value, String> {
        let s = self.server(server).map_err(|e| e.to_string())?;
        let url = format!("{}{}", s.monitor_url(), path);
        let resp = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| format!("GET {url}: {e}"))?;
        if !status.is_success() {
            return Err(format!("GET {url}: {status} {body}"));
        }
        serde_json::from_str(&body).map_err(|e| format!("GET {url}: bad JSON ({e})"))
    }

    fn running_names(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|s| s.state() == ProcessState::Running)
            .map(|s| s.name().to_string())
            .collect()
    }

    /// Waits for everything the spec promises: meta leaders with all peers, healthz, gateways, leafs.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), TopologyError> {
        self.wait_meta_leader(timeout).await?;
        self.wait_healthz(timeout).await?;
        if self.spec.gateways.is_some() {
            self.wait_gateways_connected(timeout).await?;
        }
        if !self.spec.leafs.is_empty() {
            self.wait_leafs_connected(timeout).await?;
        }
        Ok(())
    }

    /// Waits until every JetStream meta group (the hub domain; each multi-server leaf domain) has a
    /// leader that all its members agree on and that sees every configured peer as current.
    /// Returns the hub's meta leader (or the single hub server's name).
    pub async fn wait_meta_leader(&self, timeout: Duration) -> Result<String, TopologyError> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for s in &self.servers {
            groups
                .entry(domain_of(&self.spec, s))
                .or_default()
                .push(s.name().to_string());
        }
        let mut hub_leader = String::new();
        for (domain, members) in groups {
            if members.len() < 2 {
                if domain.starts_with("hub:") {
                    hub_leader = members[0].clone();
                }
                continue;
            }
            let leader = wait::poll(
                &format!("meta leader of {domain} with all {} peers", members.len()),
                timeout,
                || self.meta_leader_check(&members),
            )
            .await?;
            if domain.starts_with("hub:") {
                hub_leader = leader;
            }
        }
        Ok(hub_leader)
    }

    async fn meta_leader_check(&self, members: &[String]) -> Result<Option<String>, String> {
        let mut leader: Option<String> = None;
        for m in members {
            let jsz = self.monitor(m, "/jsz").await?;
            let l = jsz["meta_cluster"]["leader"]
                .as_str()
                .unwrap_or("")
                .to_string();
            if l.is_empty() {
                return Err(format!("{m} sees no meta leader"));
            }
            match &leader {
                Some(prev) if *prev != l => return Err(format!("{m} sees {l}, others {prev}")),
                _ => leader = Some(l),
            }
        }
        let Some(leader) = leader else {
            return Ok(None);
        };
        let jsz = self.monitor(&leader, "/jsz").await?;
        let replicas = jsz["meta_cluster"]["replicas"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let current: BTreeSet<&str> = replicas
            .iter()
            .filter(|r| {
                r["current"].as_bool() == Some(true) && r["offline"].as_bool() != Some(true)
            })
            .filter_map(|r| r["name"].as_str())
            .collect();
        let missing: Vec<&String> = members
            .iter()
            .filter(|m| **m != leader && !current.contains(m.as_str()))
            .collect();
        if missing.is_empty() {
            Ok(Some(leader))
        } else {
            Err(format!(
                "leader {leader} does not see {missing:?} as current"
            ))
        }
    }

    /// Waits until every running server answers /healthz with ok.
    pub async fn wait_healthz(&self, timeout: Duration) -> Result<(), TopologyError> {
        let names = self.running_names();
        wait::poll("healthz ok on every running server", timeout, || async {
            for n in &names {
                let h = self.monitor(n, "/healthz").await?;
                if h["status"].as_str() != Some("ok") {
                    return Err(format!("{n}: {h}"));
                }
            }
            Ok(Some(()))
        })
        .await?;
        Ok(())
    }

    /// The server currently leading `stream` (any account), as that server itself reports.
    pub async fn stream_leader(&self, stream: &str) -> Result<Option<String>, String> {
        for n in self.running_names() {
            let jsz = self.monitor(&n, "/jsz?accounts=true&streams=true").await?;
            for acc in jsz["account_details"].as_array().into_iter().flatten() {
                for st in acc["stream_detail"].as_array().into_iter().flatten() {
                    if st["name"].as_str() != Some(stream) {
                        continue;
                    }
                    let leader = st["cluster"]["leader"].as_str().unwrap_or("");
                    // A standalone (non-clustered) server has no leader field: it is the leader.
                    if leader == n
                        || (leader.is_empty()
                            && st["cluster"]["replicas"].is_null()
                            && self
                                .server(&n)
                                .map(|s| s.config.cluster.is_none())
                                .unwrap_or(false))
                    {
                        return Ok(Some(n));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Waits until some server reports itself leader of `stream`; returns its name.
    pub async fn wait_stream_leader(
        &self,
        stream: &str,
        timeout: Duration,
    ) -> Result<String, TopologyError> {
        Ok(
            wait::poll(&format!("a leader for stream {stream}"), timeout, || {
                self.stream_leader(stream)
            })
            .await?,
        )
    }

    /// Waits until the leader of `stream` sees every replica as current; returns the leader.
    pub async fn wait_stream_current(
        &self,
        stream: &str,
        timeout: Duration,
    ) -> Result<String, TopologyError> {
        Ok(wait::poll(
            &format!("stream {stream} with a leader and every replica current"),
            timeout,
            || async {
                let Some(leader) = self.stream_leader(stream).await? else {
                    return Ok(None);
                };
                let jsz = self
                    .monitor(&leader, "/jsz?accounts=true&streams=true")
                    .await?;
                for acc in jsz["account_details"].as_array().into_iter().flatten() {
                    for st in acc["stream_detail"].as_array().into_iter().flatten() {
                        if st["name"].as_str() != Some(stream) {
                            continue;
                        }
                        let lagging: Vec<String> = st["cluster"]["replicas"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter(|r| r["current"].as_bool() != Some(true))
                            .map(|r| r["name"].as_str().unwrap_or("?").to_string())
                            .collect();
                        if lagging.is_empty() {
                            return Ok(Some(leader));
                        }
                        return Err(format!("replicas not current: {lagging:?}"));
                    }
                }
                Ok(None)
            },
        )
        .await?)
    }

    /// Waits until every running hub server has inbound and outbound gateways to every other cluster.
    pub async fn wait_gateways_connected(&self, timeout: Duration) -> Result<(), TopologyError> {
        let clusters: Vec<String> = self.spec.clusters.iter().map(|c| c.name.clone()).collect();
        let names: Vec<(String, String)> = self
            .servers
            .iter()
            .filter(|s| s.state() == ProcessState::Running && s.config.gateway.is_some())
            .map(|s| (s.name().to_string(), s.cluster.clone()))
            .collect();
        wait::poll(
            "gateways connected between every cluster",
            timeout,
            || async {
                // Every server dials one server of each other cluster (outbound); inbound connections
                // land on whichever server was dialed, so they are counted per cluster.
                let mut inbound: BTreeMap<(String, String), usize> = BTreeMap::new();
                for (n, own) in &names {
                    let gz = self.monitor(n, "/gatewayz").await?;
                    for c in clusters.iter().filter(|c| *c != own) {
                        if gz["outbound_gateways"][c].is_null() {
                            return Err(format!("{n} has no outbound gateway to {c}"));
                        }
                        let k = gz["inbound_gateways"][c]
                            .as_array()
                            .map(Vec::len)
                            .unwrap_or(0);
                        *inbound.entry((own.clone(), c.clone())).or_default() += k;
                    }
                }
                for own in &clusters {
                    for c in clusters.iter().filter(|c| *c != own) {
                        let dialers = names.iter().filter(|(_, cl)| cl == c).count();
                        let got = inbound.get(&(own.clone(), c.clone())).copied().unwrap_or(0);
                        if got < dialers {
                            return Err(format!(
                                "{own} has {got} inbound gateways from {c}, wants {dialers}"
                            ));
                        }
                    }
                }
                Ok(Some(()))
            },
        )
        .await?;
        Ok(())
    }

    /// Waits until every running leaf server has its leaf connection up.
    pub async fn wait_leafs_connected(&self, timeout: Duration) -> Result<(), TopologyError> {
        let leafs: Vec<String> = self
            .spec
            .leafs
            .iter()
            .map(|l| l.name.clone())
            .filter(|n| self.running_names().contains(n))
            .collect();
        wait::poll("leaf nodes connected to their hubs", timeout, || async {
            for n in &leafs {
                let lz = self.monitor(n, "/leafz").await?;
                if lz["leafnodes"].as_u64().unwrap_or(0) < 1 {
                    return Err(format!("{n} has no leaf connection"));
                }
            }
            Ok(Some(()))
        })
        .await?;
        Ok(())
    }

    /// Cuts every gateway connection between clusters `a` and `b` (both directions).
    pub async fn cut_gateway(&self, a: &str, b: &str) -> Result<(), TopologyError> {
        self.gateway_link(a, b, true).await
    }

    /// Restores what [`Topology::cut_gateway`] cut.
    pub async fn restore_gateway(&self, a: &str, b: &str) -> Result<(), TopologyError> {
        self.gateway_link(a, b, false).await
    }

    async fn gateway_link(&self, a: &str, b: &str, cut: bool) -> Result<(), TopologyError> {
        for (dst, src) in [(a, b), (b, a)] {
            if !self.spec.clusters.iter().any(|c| c.name == dst) {
                return Err(TopologyError::NoSuchCluster(dst.to_string()));
            }
            // The gateway CONNECT a server sends names its cluster: the proxy matches on it.
            let pattern = format!("\"gateway\":\"{src}\"");
            for s in self.servers.iter().filter(|s| s.cluster == dst) {
                let px = self.gateway_proxies.get(s.name()).ok_or_else(|| {
                    TopologyError::Invalid(format!(
                        "server {} has no gateway proxy (spec.cuttable_links is off)",
                        s.name()
                    ))
                })?;
                if cut {
                    px.block(&pattern);
                } else {
                    px.unblock(&pattern);
                }
            }
        }
        Ok(())
    }

    /// Cuts the leaf node `leaf`'s link to its hub.
    pub async fn cut_leaf(&self, leaf: &str) -> Result<(), TopologyError> {
        self.leaf_proxy(leaf)?.cut_all();
        Ok(())
    }

    /// Restores what [`Topology::cut_leaf`] cut.
    pub async fn restore_leaf(&self, leaf: &str) -> Result<(), TopologyError> {
        self.leaf_proxy(leaf)?.restore_all();
        Ok(())
    }

    fn leaf_proxy(&self, leaf: &str) -> Result<&LinkProxy, TopologyError> {
        self.leaf_proxies.get(leaf).ok_or_else(|| {
            TopologyError::Invalid(format!(
                "{leaf} is not a leaf with a proxied link (spec.cuttable_links is off?)"
            ))
        })
    }

    /// Waits until the gateways of cluster `a` no longer list `b` (after a cut).
    pub async fn wait_gateway_down(
        &self,
        a: &str,
        b: &str,
        timeout: Duration,
    ) -> Result<(), TopologyError> {
        let names: Vec<String> = self
            .servers
            .iter()
            .filter(|s| s.cluster == a && s.state() == ProcessState::Running)
            .map(|s| s.name().to_string())
            .collect();
        wait::poll(&format!("gateways {a} -> {b} down"), timeout, || async {
            for n in &names {
                let gz = self.monitor(n, "/gatewayz").await?;
                if !gz["outbound_gateways"][b].is_null() || !gz["inbound_gateways"][b].is_null() {
                    return Err(format!("{n} still connected to {b}"));
                }
            }
            Ok(Some(()))
        })
        .await?;
        Ok(())
    }

    /// Waits until `leaf` has no leaf connection (after a cut).
    pub async fn wait_leaf_down(&self, leaf: &str, timeout: Duration) -> Result<(), TopologyError> {
        wait::poll(&format!("leaf {leaf} disconnected"), timeout, || async {
            let lz = self.monitor(leaf, "/leafz").await?;
            match lz["leafnodes"].as_u64().unwrap_or(0) {
                0 => Ok(Some(())),
                n => Err(format!("{n} leaf connections")),
            }
        })
        .await?;
        Ok(())
    }

    /// Path of a per-topology scratch file (e.g. creds written by tests).
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Rewrites every server's config file to trust `mode` (a re-signed NATS operator JWT, its
    /// system account, the preloads). The trusted operators are restart-only (reload.go:1619):
    /// a running server keeps the old trust until it is restarted, which the caller does.
    pub fn set_operator(&mut self, mode: OperatorMode) -> Result<(), TopologyError> {
        if !matches!(self.spec.auth, Auth::Operator(_)) {
            return Err(TopologyError::Invalid(
                "set_operator on a topology not in operator mode".into(),
            ));
        }
        self.spec.auth = Auth::Operator(mode);
        let auth_text = render_auth(&self.spec.auth);
        for s in &mut self.servers {
            s.config.extra = format!(
                "{}{auth_text}{}",
                render_resolver(s.dir()),
                self.spec.extra_config
            );
            s.write_config()?;
        }
        Ok(())
    }
}

fn render_auth(auth: &Auth) -> String {
    match auth {
        Auth::None => String::new(),
        Auth::Accounts => format!(
            "accounts {{\n  SYS: {{ users: [{{ user: \"{}\", password: \"{}\" }}] }}\n  {APP_ACCOUNT}: {{ jetstream: enabled, users: [{{ user: \"{}\", password: \"{}\" }}] }}\n}}\nsystem_account: SYS\nno_auth_user: \"{}\"\n",
            SYS_USER.0, SYS_USER.1, APP_USER.0, APP_USER.1, APP_USER.0
        ),
        Auth::Operator(op) => {
            let mut s = format!(
                "operator: \"{}\"\nsystem_account: \"{}\"\nresolver_preload: {{\n",
                op.operator_jwt, op.system_account
            );
            for (key, jwt) in &op.preload {
                s.push_str(&format!("  \"{key}\": \"{jwt}\"\n"));
            }
            s.push_str("}\n");
            s
        }
    }
}

fn render_resolver(server_dir: &std::path::Path) -> String {
    format!(
        "resolver: {{ type: full, dir: \"{}\", allow_delete: true, interval: \"2m\" }}\n",
        server_dir.join("jwt").display()
    )
}
