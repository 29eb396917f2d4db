//! What the steps act on, the running topology ([`Deployed`]), and what a step did ([`Done`]):
//! below every step module and the context they share.

use crate::backend::Deployment;
#[cfg(feature = "kube")]
use crate::topology::Topology;

/// The running topology: a sim topology on this machine (the steps on an auth plane read its
/// servers' directories), or any other deployment.
pub(super) enum Deployed {
    #[cfg(feature = "kube")]
    Local(Box<Topology>),
    Other(Box<dyn Deployment>),
}

impl Deployed {
    pub(super) fn dep(&self) -> &dyn Deployment {
        match self {
            #[cfg(feature = "kube")]
            Deployed::Local(t) => t.as_ref(),
            Deployed::Other(d) => d.as_ref(),
        }
    }

    pub(super) fn dep_mut(&mut self) -> &mut dyn Deployment {
        match self {
            #[cfg(feature = "kube")]
            Deployed::Local(t) => t.as_mut(),
            Deployed::Other(d) => d.as_mut(),
        }
    }

    #[cfg(feature = "kube")]
    pub(super) fn topology(&self) -> Option<&Topology> {
        match self {
            Deployed::Local(t) => Some(t),
            Deployed::Other(_) => None,
        }
    }

    /// Every hub server with its client URL, in the deployment's order.
    #[cfg(feature = "kube")]
    pub(super) fn client_urls_by_server(&self) -> Vec<(String, String)> {
        match self {
            Deployed::Local(t) => t
                .servers()
                .iter()
                .filter(|s| t.spec.leafs.iter().all(|l| l.name != s.cluster))
                .map(|s| (s.name().to_string(), s.client_url()))
                .collect(),
            Deployed::Other(d) => d.server_names().into_iter().zip(d.client_urls()).collect(),
        }
    }
}

/// What a step did: the server or object it acted on, when what it waited for happened
/// (ms since the run began), where it can tell, and the value it read (`wait_status`).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Done {
    pub(super) target: Option<String>,
    pub(super) observed_at_ms: Option<u64>,
    pub(super) value: Option<u64>,
}
