//! One boot attempt's wiring: the ports every server listens on, the proxies its cuttable links
//! go through, and each server's config built from them — a hub server's cluster, gateway and
//! leafnode blocks, a leaf's remote to its hub.

use std::collections::BTreeMap;
use std::path::Path;

use super::auth_text::{APP_ACCOUNT, APP_USER, server_extra};
use super::route_cuts::RouteLinks;
use super::spec::{Auth, ClusterSpec, GatewayMode, LeafSpec, TopologySpec};
use crate::nats_conf::{
    ClusterBlock, GatewayBlock, JetStreamBlock, LeafNodesBlock, LeafRemote, RemoteGateway,
    ServerConfig,
};
use crate::ports::free_port;
use crate::proxy::LinkProxy;

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

/// Every server's ports and every link proxy of one boot attempt. Proxies are created unbound
/// here (ports chosen) and bound when the topology boots.
pub(super) struct Wiring {
    ports: BTreeMap<String, Ports>,
    names_by_cluster: BTreeMap<String, Vec<String>>,
    /// Gateway proxies by destination server name (inbound gateway traffic of that server).
    pub(super) gateway_proxies: BTreeMap<String, LinkProxy>,
    /// Leaf proxies by leaf server name (the leaf's link to its hub).
    pub(super) leaf_proxies: BTreeMap<String, LinkProxy>,
    /// Route proxies between the servers of each cluster (`spec.route_proxies`; else empty).
    pub(super) routes: RouteLinks,
}

impl Wiring {
    /// Ports for every server (hub servers `<cluster>-<i>` first, then the leafs), then a proxy
    /// for each cuttable link.
    pub(super) fn allocate(spec: &TopologySpec) -> Self {
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
        let mut wiring = Wiring {
            ports,
            names_by_cluster,
            gateway_proxies: BTreeMap::new(),
            leaf_proxies: BTreeMap::new(),
            routes: RouteLinks::default(),
        };
        if spec.cuttable_links {
            wiring.add_proxies(spec);
        }
        if spec.route_proxies {
            let ports = &wiring.ports;
            wiring.routes =
                RouteLinks::allocate(wiring.names_by_cluster.values().map(Vec::as_slice), |n| {
                    ports[n].cluster
                });
        }
        wiring
    }

    /// A proxy in front of every hub server's gateway port (with gateways) and one per leaf
    /// in front of the first hub server's leafnode port.
    fn add_proxies(&mut self, spec: &TopologySpec) {
        if spec.gateways.is_some() {
            for (name, p) in self
                .ports
                .iter()
                .filter(|(n, _)| !spec.leafs.iter().any(|l| &l.name == *n))
            {
                self.gateway_proxies.insert(
                    name.clone(),
                    LinkProxy::new(free_port(), ("127.0.0.1".to_string(), p.gateway)),
                );
            }
        }
        for l in &spec.leafs {
            // A leaf dials the first hub server through its own proxy.
            let hub0 = format!("{}-0", l.hub);
            let hub_port = self.ports[&hub0].leaf;
            self.leaf_proxies.insert(
                l.name.clone(),
                LinkProxy::new(free_port(), ("127.0.0.1".to_string(), hub_port)),
            );
        }
    }

    /// The hub servers of cluster `cluster`, in order.
    pub(super) fn names(&self, cluster: &str) -> &[String] {
        &self.names_by_cluster[cluster]
    }

    /// Where gateway peers dial `server`: its proxy when it has one.
    fn gateway_url(&self, server: &str) -> String {
        match self.gateway_proxies.get(server) {
            Some(p) => format!("nats://127.0.0.1:{}", p.listen_port()),
            None => format!("nats://127.0.0.1:{}", self.ports[server].gateway),
        }
    }

    /// The config of hub server `i` (`name`) of cluster `c`, its files under `dir`.
    pub(super) fn hub_config(
        &self,
        spec: &TopologySpec,
        c: &ClusterSpec,
        i: usize,
        name: &str,
        dir: &Path,
    ) -> ServerConfig {
        let p = self.ports[name];
        let mut cfg = ServerConfig::new(name.to_string(), p.client, p.http, dir.join("nats.pid"));
        cfg.jetstream = Some(store(dir, spec.hub_domain.clone()));
        if let Some(js) = cfg.jetstream.as_mut() {
            js.sync_interval = spec.sync_interval.get(&c.name).cloned();
        }
        if c.servers > 1 {
            cfg.cluster = Some(ClusterBlock {
                name: c.name.clone(),
                port: p.cluster,
                routes: self
                    .names(&c.name)
                    .iter()
                    .filter(|n| *n != name)
                    .map(|n| {
                        self.routes.route_url(name, n).unwrap_or_else(|| {
                            format!("nats-route://127.0.0.1:{}", self.ports[n].cluster)
                        })
                    })
                    .collect(),
                advertise: self.routes.advertise(name),
            });
        }
        if let Some(mode) = spec.gateways {
            cfg.gateway = Some(self.gateway_block(spec, mode, c, name));
        }
        if spec.leafs.iter().any(|l| l.hub == c.name) {
            cfg.leafnodes = Some(LeafNodesBlock {
                port: Some(p.leaf),
                advertise: None,
                remotes: Vec::new(),
            });
        }
        cfg.tags = c.tags.get(i).cloned().unwrap_or_default();
        cfg.extra = server_extra(spec, dir);
        cfg
    }

    /// Hub server `name`'s gateway block: the other clusters it lists (all of them, or under
    /// gossip the first only), advertised through its proxy when it has one.
    fn gateway_block(
        &self,
        spec: &TopologySpec,
        mode: GatewayMode,
        c: &ClusterSpec,
        name: &str,
    ) -> GatewayBlock {
        let others: Vec<&ClusterSpec> = spec.clusters.iter().filter(|o| o.name != c.name).collect();
        let listed: Vec<&ClusterSpec> = match mode {
            GatewayMode::Explicit => others,
            // Gossip: every cluster knows only the first other one; the rest is learned.
            GatewayMode::Gossip => others.into_iter().take(1).collect(),
        };
        GatewayBlock {
            name: c.name.clone(),
            port: self.ports[name].gateway,
            advertise: self
                .gateway_proxies
                .get(name)
                .map(|px| format!("127.0.0.1:{}", px.listen_port())),
            reject_unknown_cluster: mode == GatewayMode::Explicit,
            gateways: listed
                .iter()
                .map(|o| RemoteGateway {
                    name: o.name.clone(),
                    urls: self
                        .names(&o.name)
                        .iter()
                        .map(|n| self.gateway_url(n))
                        .collect(),
                })
                .collect(),
        }
    }

    /// The config of leaf `l`, its files under `dir`: its own JetStream domain and one remote
    /// to its hub (through its proxy when it has one, else every hub server's leafnode port).
    pub(super) fn leaf_config(
        &self,
        spec: &TopologySpec,
        l: &LeafSpec,
        dir: &Path,
    ) -> ServerConfig {
        let p = self.ports[&l.name];
        let mut cfg = ServerConfig::new(l.name.clone(), p.client, p.http, dir.join("nats.pid"));
        cfg.jetstream = Some(store(dir, Some(l.domain.clone())));
        let hub_urls: Vec<String> = match self.leaf_proxies.get(&l.name) {
            Some(px) => vec![px.listen_port()],
            None => self
                .names(&l.hub)
                .iter()
                .map(|n| self.ports[n].leaf)
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
        cfg.extra = server_extra(spec, dir);
        cfg
    }
}

/// A server's JetStream store under `dir`, in `domain`.
fn store(dir: &Path, domain: Option<String>) -> JetStreamBlock {
    JetStreamBlock {
        store_dir: dir.join("store"),
        domain,
        max_memory_store: Some(256 << 20),
        max_file_store: Some(4 << 30),
        sync_interval: None,
    }
}
