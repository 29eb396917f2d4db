//! Cutting and restoring a topology's links: gateways between two clusters and a leaf's link to
//! its hub, through the proxies its wiring put in front of them (`spec.cuttable_links`).

use super::{Topology, TopologyError};
use crate::proxy::LinkProxy;

impl Topology {
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
}
