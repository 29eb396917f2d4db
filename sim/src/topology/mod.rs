//! Topologies on the local backend: a cluster of N JetStream servers, superclusters joined by
//! gateways, leaf nodes with their own JetStream domain, operator mode, server tags.
//! Builders read like the topology; waits are verbs built on [`crate::wait::poll`].
//!
//! Here: booting a topology (with fresh ports when one collides) and reaching its servers;
//! [`spec`] what a topology is made of; [`wiring`] one boot attempt's ports, proxies and server
//! configs; [`auth`] the auth text every config ends with; [`waits`] the waits; [`links`]
//! cutting and restoring gateways and leaf links; [`fault_layer`] the stores on the filesystem
//! fault layer (lost unsynced writes, damaged files); [`replica_copy`] one replica's own copy of
//! a stream, read on a standalone server.

mod auth_text;
mod fault_layer;
mod links;
mod replica_copy;
mod route_cuts;
mod spec;
mod stream_meta;
mod waits;
mod wiring;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

pub use self::auth_text::{APP_ACCOUNT, APP_USER, SYS_USER, accounts_without_stepdown_export};
pub use self::replica_copy::{ReplicaCopy, StoredMessage};
pub use self::route_cuts::{RouteCuts, link_cut};
pub use self::spec::{Auth, ClusterSpec, GatewayMode, LeafSpec, OperatorMode, TopologySpec};

use self::auth_text::server_extra;
use self::wiring::Wiring;
use crate::install::{self, InstallError};
use crate::proxy::{LinkProxy, ProxyError};
use crate::server::{ProcessState, Server, ServerError};
use crate::wait::WaitError;

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
    #[error(transparent)]
    FaultLayer(#[from] faultfs::FaultFsError),
    #[error("gave up after {attempts} boots: ports kept colliding ({last})")]
    PortsExhausted { attempts: usize, last: String },
}

/// A running topology. Every process (servers, proxies) stops when it drops.
pub struct Topology {
    pub spec: TopologySpec,
    servers: Vec<Server>,
    /// Gateway proxies by destination server name (inbound gateway traffic of that server).
    gateway_proxies: BTreeMap<String, LinkProxy>,
    /// Leaf proxies by leaf server name (the leaf's link to its hub).
    leaf_proxies: BTreeMap<String, LinkProxy>,
    /// Route proxies inside each cluster (`spec.route_proxies`), see [`route_cuts`].
    routes: route_cuts::RouteLinks,
    http: reqwest::Client,
    /// The fault layer under each store `spec.fault_layer` names; dropped (unmounted) after
    /// the servers are dead and before the directory goes.
    layers: BTreeMap<String, faultfs::FaultFs>,
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

    /// One boot attempt's topology, nothing started: the wiring (ports, proxies) and every
    /// server's config, hub clusters first, then the leafs.
    fn prepare(spec: TopologySpec, binary: &std::path::Path) -> Result<Topology, TopologyError> {
        let dir = tempfile::Builder::new()
            .prefix("sim-topology-")
            .tempdir()
            .map_err(TopologyError::TempDir)?;
        let wiring = Wiring::allocate(&spec);
        let mut servers = Vec::new();
        for c in &spec.clusters {
            for (i, name) in wiring.names(&c.name).iter().enumerate() {
                let sdir = dir.path().join(name);
                let cfg = wiring.hub_config(&spec, c, i, name, &sdir);
                servers.push(Server::new(binary.to_path_buf(), sdir, c.name.clone(), cfg));
            }
        }
        for l in &spec.leafs {
            let sdir = dir.path().join(&l.name);
            let cfg = wiring.leaf_config(&spec, l, &sdir);
            servers.push(Server::new(binary.to_path_buf(), sdir, l.name.clone(), cfg));
        }
        let layers = fault_layer::mount(&servers, &spec.fault_layer)?;
        Ok(Topology {
            spec,
            servers,
            gateway_proxies: wiring.gateway_proxies,
            leaf_proxies: wiring.leaf_proxies,
            routes: wiring.routes,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap_or_default(),
            layers,
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
        self.routes.start().await?;
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

    /// (name, monitoring URL) of every hub server.
    pub fn monitor_urls(&self) -> Vec<(String, String)> {
        self.servers
            .iter()
            .filter(|s| !self.is_leaf(s))
            .map(|s| (s.name().to_string(), s.monitor_url()))
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
        for s in &mut self.servers {
            s.config.extra = server_extra(&self.spec, s.dir());
            s.write_config()?;
        }
        Ok(())
    }
}
