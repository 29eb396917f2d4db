//! The PodDisruptionBudget: at most one of the NATS cluster's pods voluntarily down at a time.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Owner, labels};

/// `<name>`, maxUnavailable 1 across every server's pod.
pub fn pod_disruption_budget(owner: &Owner) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: owner.meta(owner.name.clone(), labels::cluster(&owner.name)),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(labels::selector(&owner.name)),
                match_expressions: None,
            }),
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::owner;

    #[test]
    fn one_pod_at_a_time_across_the_cluster() {
        let p = pod_disruption_budget(&owner());
        assert_eq!(p.metadata.name.as_deref(), Some("demo"));
        let s = p.spec.expect("spec");
        assert_eq!(s.max_unavailable, Some(IntOrString::Int(1)));
        assert!(s.min_available.is_none());
        let sel = s.selector.and_then(|s| s.match_labels).expect("selector");
        assert_eq!(sel, labels::selector("demo"));
        assert!(!sel.contains_key(labels::SERVER), "across every server");
    }
}
