//! A scenario's topology as the sim builds it: the declaration turned into a [`TopologySpec`].

use super::{GatewayDecl, TopologyDecl};
use crate::topology::{ClusterSpec, GatewayMode, LeafSpec, TopologySpec};

impl TopologyDecl {
    pub fn to_spec(&self) -> TopologySpec {
        let mut spec = TopologySpec::cluster(self.servers);
        spec.clusters = (1..=self.clusters)
            .map(|i| {
                let name = format!("c{i}");
                let tags = self.server_tags.get(&name).cloned().unwrap_or_default();
                ClusterSpec {
                    tags: vec![tags; self.servers],
                    name,
                    servers: self.servers,
                }
            })
            .collect();
        spec.gateways = self.gateways.map(|g| match g {
            GatewayDecl::Explicit => GatewayMode::Explicit,
            GatewayDecl::Gossip => GatewayMode::Gossip,
        });
        spec.leafs = self
            .leafs
            .iter()
            .map(|l| LeafSpec {
                name: l.name.clone(),
                domain: l.domain.clone(),
                hub: l.hub.clone(),
            })
            .collect();
        spec.cuttable_links = spec.gateways.is_some() || !spec.leafs.is_empty();
        if let Some(v) = &self.version {
            spec.version = v.clone();
        }
        spec.sync_interval = self.sync_interval.clone();
        spec.route_proxies = self.route_proxies;
        spec.fault_layer = if self.fault_layer.iter().any(|s| s == "all") {
            spec.clusters
                .iter()
                .flat_map(|c| (0..c.servers).map(move |i| format!("{}-{i}", c.name)))
                .collect()
        } else {
            self.fault_layer.iter().cloned().collect()
        };
        spec
    }
}
