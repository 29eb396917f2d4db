//! Where a scenario runs ([`Place`]): a backend the run starts its own host on, or the sim's node
//! with the chart installed.

#[cfg(feature = "kube")]
use std::sync::Arc;

use crate::backend::Backend;
#[cfg(feature = "kube")]
use crate::control_plane::NodeHost;

/// Where a run's servers and controllers are.
pub enum Place<'a> {
    /// A backend (local or k3s): the run starts the host itself where the scenario needs one.
    Backend(&'a dyn Backend),
    /// The sim's node with the chart installed: the controllers its pods, the scenario's
    /// NatsClusters run by the kubelet (NatsCluster topologies only).
    #[cfg(feature = "kube")]
    Node(Arc<NodeHost>),
}

#[cfg(feature = "kube")]
impl Place<'_> {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Place::Backend(b) => b.name(),
            Place::Node(_) => "node",
        }
    }
}
