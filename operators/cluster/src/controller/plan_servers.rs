//! Phase 4, plan: every server's plan and revision, pure ([`crate::plan::plan_servers`] over what
//! was gathered, at the port's layout). A spec the planner refuses is a hold, UnsupportedSpec,
//! reported after every other; then there are no plans.

use kube::ResourceExt;
use nats_api::cluster::{NatsCluster, reason};

use super::gather::Gathered;
use crate::objects::configmap;
use crate::plan::{ClusterInputs, Layout, plan_servers};
use crate::refusals::{Hold, Refusal};
use crate::render::{self, ServerPlan};

/// Every server's plan, ordinal order.
pub struct Planned {
    pub plans: Vec<ServerPlan>,
    /// Each server's revision (`revision::of_server`: config and workload), ordinal order.
    pub revisions: Vec<String>,
    /// The spec the planner refuses, if so.
    pub refusal: Option<Refusal>,
    /// Where the servers listen and keep their files, as the port lays them out.
    pub layout: Box<dyn Layout + Send + Sync>,
}

impl Planned {
    /// The NATS cluster's revision as planned, before any restart material; none without plans.
    pub fn target(&self) -> Option<String> {
        (!self.revisions.is_empty()).then(|| cluster_revision(&self.revisions))
    }
}

/// A NatsCluster's revision as a whole: the servers' revisions in ordinal order, hashed.
pub fn cluster_revision(revisions: &[String]) -> String {
    configmap::revision(&revisions.join(","))
}

/// Plans every server of `cluster` at `layout`.
pub fn plan(
    cluster: &NatsCluster,
    gathered: &Gathered,
    layout: Box<dyn Layout + Send + Sync>,
) -> Planned {
    let spec = &cluster.spec;
    let planned = plan_servers(
        &ClusterInputs {
            name: &cluster.name_any(),
            spec,
            trust: gathered.trusts.trust.clone(),
            account_preloads: gathered.trusts.account_preloads.clone(),
            leaf_remotes: gathered.leaf_remotes.admitted.clone(),
        },
        layout.as_ref(),
    );
    let (plans, refusal) = match planned {
        Ok(p) => (p, None),
        Err(e) => (
            vec![],
            Some(Refusal::new(
                reason::UNSUPPORTED_SPEC,
                Hold::Refused,
                e.to_string(),
            )),
        ),
    };
    let revisions = plans
        .iter()
        .map(|p| crate::revision::of_server(spec, &render::render(p)))
        .collect();
    Planned {
        plans,
        revisions,
        refusal,
        layout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_revision_names_every_server_revision_in_order() {
        let a = cluster_revision(&["aa".into(), "bb".into()]);
        assert_eq!(a.len(), 8);
        assert_ne!(a, cluster_revision(&["bb".into(), "aa".into()]));
        assert_eq!(a, cluster_revision(&["aa".into(), "bb".into()]));
    }
}
