//! What a topology is made of: clusters of JetStream servers, the gateway mode that joins
//! them, leaf nodes with their own domain, how clients authenticate; builders that read like
//! the topology, and the checks a spec passes before anything boots.

use std::collections::{BTreeMap, BTreeSet};

use super::TopologyError;
use crate::install;

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
    /// Route every route connection inside a cluster through a sim proxy per ordered pair of
    /// servers, so a server can be cut from its cluster peers (`cut_routes`). Off: direct routes.
    pub route_proxies: bool,
    /// Raw config text appended to every server's config.
    pub extra_config: String,
    /// `sync_interval` of every server of a cluster, by cluster name (`always` or a Go
    /// duration); a cluster not named keeps the server's default (2m).
    pub sync_interval: BTreeMap<String, String>,
    /// Servers whose JetStream store is on the fault layer ([`faultfs`]): what they write is
    /// lost unless fsynced when a `lose_unsynced` fault hits them. Empty: no layer, no cost.
    pub fault_layer: BTreeSet<String>,
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
            route_proxies: false,
            extra_config: String::new(),
            sync_interval: BTreeMap::new(),
            fault_layer: BTreeSet::new(),
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

    /// Every server of cluster `cluster` syncs its store as `interval` says (`always`, `2m`).
    pub fn with_sync_interval(mut self, cluster: &str, interval: &str) -> Self {
        self.sync_interval
            .insert(cluster.to_string(), interval.to_string());
        self
    }

    /// Every route between two servers of a cluster through a proxy of its own, cuttable.
    pub fn with_route_proxies(mut self) -> Self {
        self.route_proxies = true;
        self
    }

    /// Puts server `name`'s JetStream store on the fault layer.
    pub fn with_fault_layer(mut self, name: &str) -> Self {
        self.fault_layer.insert(name.to_string());
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

    pub(super) fn validate(&self) -> Result<(), TopologyError> {
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
        for c in self.sync_interval.keys() {
            if !self.clusters.iter().any(|x| x.name == *c) {
                return Err(TopologyError::NoSuchCluster(c.clone()));
            }
        }
        Ok(())
    }
}
