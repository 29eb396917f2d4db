//! Phase 8, judge: the conditions of one pass (design §4.7), pure — Ready, Settled and
//! Progressing from what the writes came to, GatewaysConnected and LeafnodesConnected from what
//! the servers said.

use controller_kit::conditions::Decided;
use kube::ResourceExt;
use nats_api::cluster::{GatewayStatus, LeafRemoteStatus, NatsCluster, condition, reason};

use super::gather::Gathered;
use super::observe_servers::Seen;
use super::plan_servers::Planned;
use super::refuse::Holds;
use super::written::Written;
use crate::conditions::gateways::gateways;
use crate::conditions::leafnodes::leafnodes;
use crate::conditions::ready::ready;
use crate::conditions::settled::settled_after_restarts;

/// The conditions of one pass, with the lists two of them come with.
pub struct Verdicts {
    pub ready: Decided,
    pub settled: Decided,
    pub progressing: Decided,
    /// status.gateways and GatewaysConnected, with a gateway.
    pub gateways: Option<(Vec<GatewayStatus>, Decided)>,
    /// status.leafRemotes and LeafnodesConnected, with leaf remotes.
    pub leafnodes: Option<(Vec<LeafRemoteStatus>, Decided)>,
}

impl Verdicts {
    /// Something is not yet as it should be: look again at the recheck pace, not the resync's.
    pub fn busy(&self) -> bool {
        !self.settled.status
            || self.progressing.status
            || !self.ready.status
            || self.gateways.as_ref().is_some_and(|g| !g.1.status)
            || self.leafnodes.as_ref().is_some_and(|l| !l.1.status)
    }
}

/// The conditions of `cluster` after this pass.
pub fn judge(
    cluster: &NatsCluster,
    gathered: &Gathered,
    seen: &Seen,
    holds: &Holds,
    planned: &Planned,
    written: &Written,
) -> Verdicts {
    let spec = &cluster.spec;
    let name = cluster.name_any();
    let refused_gateway = holds.gateway_without_tls.as_ref();
    let foreign = written.rolled().map_or(&[][..], |r| &r.foreign);
    let ready = match (refused_gateway, written.failure()) {
        (Some(r), _) => r.condition(condition::READY),
        (None, Some(f)) => Decided::new(condition::READY, false, reason::RECONCILE_FAILED, f),
        (None, None) => ready(spec.replicas.max(0) as u32, written.observed(), foreign),
    };
    let settled = match written.rolled() {
        Some(r) => settled_after_restarts(seen.settled.clone(), &r.taken.restarted),
        None => seen.settled.clone(),
    };
    let progressing = match written {
        Written::Held { hold, .. } => Some(hold.progressing()),
        Written::Rolled(r) => r.report.progressing.clone(),
        Written::Unowned(_) | Written::Failed { .. } => None,
    };
    let progressing = progressing.unwrap_or_else(|| match refused_gateway {
        Some(r) => r.progressing(),
        None => {
            let target = revision(planned, written).unwrap_or_default();
            let message = format!("every server runs revision {target}");
            Decided::new(condition::PROGRESSING, false, reason::UP_TO_DATE, message)
        }
    });
    let gateways = spec.gateway.as_ref().map(|g| {
        let remotes: Vec<String> = g
            .remotes
            .iter()
            .filter(|r| r.name != name)
            .map(|r| r.name.clone())
            .collect();
        gateways(&remotes, &seen.observation)
    });
    let leafnodes = (!spec.leaf_remotes.is_empty())
        .then(|| leafnodes(&gathered.leaf_remotes.views, &seen.observation));
    Verdicts {
        ready,
        settled,
        progressing,
        gateways,
        leafnodes,
    }
}

/// The NATS cluster's revision: as applied (with any restart material) when the pass got that
/// far, else as planned.
pub fn revision(planned: &Planned, written: &Written) -> Option<String> {
    match written.rolled() {
        Some(r) => Some(r.applied.target.clone()),
        None => planned.target(),
    }
}
