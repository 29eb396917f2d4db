//! The NetworkPolicy over a NATS cluster's pods (design §4.1): the monitoring port only from
//! the cluster controller's own namespace; the exporter's metrics port from that namespace and
//! the peers exporter.from names; the route port only from the NATS cluster's own pods; every
//! other rendered port from anywhere. A port podTemplate adds is not admitted.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nats_api::cluster::NatsClusterSpec;

use super::{METRICS_PORT, Owner, labels};
use crate::render::ServerPlan;

/// The label every namespace carries with its own name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn tcp(port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(i32::from(port))),
        protocol: Some("TCP".into()),
        end_port: None,
    }
}

fn selector(labels: BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels),
        match_expressions: None,
    }
}

/// The policy, or none when monitor.networkPolicy is false. `controller_namespace` is the
/// namespace the cluster controller runs in.
pub fn network_policy(
    owner: &Owner,
    spec: &NatsClusterSpec,
    plan: &ServerPlan,
    controller_namespace: &str,
) -> Option<NetworkPolicy> {
    if !spec.network_policy_enabled() {
        return None;
    }
    let controller = NetworkPolicyPeer {
        namespace_selector: Some(selector(BTreeMap::from([(
            NAMESPACE_NAME_LABEL.into(),
            controller_namespace.into(),
        )]))),
        ..Default::default()
    };
    let own_pods = NetworkPolicyPeer {
        pod_selector: Some(selector(labels::selector(&owner.name))),
        ..Default::default()
    };
    let mut rules = vec![
        NetworkPolicyIngressRule {
            ports: Some(vec![tcp(plan.monitor.port)]),
            from: Some(vec![controller.clone()]),
        },
        NetworkPolicyIngressRule {
            ports: Some(vec![tcp(plan.route_listen.port)]),
            from: Some(vec![own_pods]),
        },
    ];
    if spec.exporter_enabled() {
        let mut from = vec![controller];
        from.extend(spec.exporter.iter().flat_map(|e| e.from.iter().cloned()));
        rules.push(NetworkPolicyIngressRule {
            ports: Some(vec![tcp(METRICS_PORT)]),
            from: Some(from),
        });
    }
    let mut open = vec![tcp(plan.client.port)];
    if let Some(gw) = &plan.gateway {
        open.push(tcp(gw.listen.port));
    }
    if let Some(l) = &plan.leafnodes {
        open.push(tcp(l.listen.port));
    }
    // No `from`: admitted from anywhere.
    rules.push(NetworkPolicyIngressRule {
        ports: Some(open),
        from: None,
    });
    Some(NetworkPolicy {
        metadata: owner.meta(owner.name.clone(), labels::cluster(&owner.name)),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selector(labels::selector(&owner.name))),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(rules),
            egress: None,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::{owner, spec};
    use crate::plan::{ClusterInputs, KubernetesLayout, plan_servers};

    fn policy(yaml: &str) -> Option<NetworkPolicy> {
        let s = spec(yaml);
        let p = plan_servers(
            &ClusterInputs {
                name: "demo",
                spec: &s,
                trust: None,
                account_preloads: vec![],
                leaf_remotes: vec![],
            },
            &KubernetesLayout {
                name: "demo".into(),
                namespace: "nats".into(),
                cluster_domain: "cluster.local".into(),
            },
        )
        .expect("plans");
        network_policy(&owner(), &s, &p[0], "nats-system")
    }

    /// Who is admitted to `port`: None for anywhere, else the peers.
    fn admitted(np: &NetworkPolicy, port: i32) -> Vec<Option<Vec<NetworkPolicyPeer>>> {
        np.spec
            .iter()
            .flat_map(|s| s.ingress.iter().flatten())
            .filter(|r| {
                r.ports
                    .iter()
                    .flatten()
                    .any(|p| p.port == Some(IntOrString::Int(port)))
            })
            .map(|r| r.from.clone())
            .collect()
    }

    fn namespace_of(p: &NetworkPolicyPeer) -> Option<String> {
        p.namespace_selector
            .as_ref()?
            .match_labels
            .as_ref()?
            .get(NAMESPACE_NAME_LABEL)
            .cloned()
    }

    const FULL: &str = "version: 2.15.1\nreplicas: 3\nauth: {trustRef: {name: t}}\ngateway: {discovery: Explicit, remotes: [{name: w, url: 'nats://w:7222'}], tls: {secretRef: {name: gw}}}\nleafnodes: {}\nexporter:\n  from: [{namespaceSelector: {matchLabels: {team: monitoring}}}]\n";

    #[test]
    fn monitor_only_from_the_controller_namespace() {
        let np = policy(FULL).expect("policy");
        let a = admitted(&np, 8222);
        assert_eq!(a.len(), 1, "one rule admits the monitor port");
        let peers = a[0].clone().expect("restricted");
        assert_eq!(peers.len(), 1);
        assert_eq!(namespace_of(&peers[0]).as_deref(), Some("nats-system"));
        assert!(peers[0].pod_selector.is_none());
    }

    #[test]
    fn metrics_from_the_controller_namespace_and_exporter_peers() {
        let np = policy(FULL).expect("policy");
        let a = admitted(&np, 7777);
        assert_eq!(a.len(), 1);
        let peers = a[0].clone().expect("restricted");
        assert_eq!(namespace_of(&peers[0]).as_deref(), Some("nats-system"));
        assert_eq!(
            peers[1]
                .namespace_selector
                .clone()
                .and_then(|s| s.match_labels)
                .expect("labels")["team"],
            "monitoring"
        );
        // Without the exporter, the metrics port is not admitted at all.
        let np = policy("version: 2.15.1\nreplicas: 1\nexporter: {enabled: false}\n").expect("p");
        assert!(admitted(&np, 7777).is_empty());
    }

    #[test]
    fn routes_only_from_the_clusters_own_pods() {
        let np = policy(FULL).expect("policy");
        let a = admitted(&np, 6222);
        assert_eq!(a.len(), 1);
        let peers = a[0].clone().expect("restricted");
        assert_eq!(peers.len(), 1);
        assert!(peers[0].namespace_selector.is_none(), "same namespace");
        assert_eq!(
            peers[0].pod_selector.clone().and_then(|s| s.match_labels),
            Some(labels::selector("demo"))
        );
    }

    #[rstest::rstest]
    #[case(4222)]
    #[case(7222)]
    #[case(7422)]
    fn every_other_rendered_port_from_anywhere(#[case] port: i32) {
        let np = policy(FULL).expect("policy");
        assert_eq!(admitted(&np, port), vec![None]);
    }

    #[test]
    fn unrendered_ports_are_not_admitted_and_the_policy_selects_the_pods() {
        let np = policy("version: 2.15.1\nreplicas: 1\n").expect("policy");
        assert!(admitted(&np, 7222).is_empty());
        assert!(admitted(&np, 7422).is_empty());
        let s = np.spec.expect("spec");
        assert_eq!(s.policy_types, Some(vec!["Ingress".to_string()]));
        assert_eq!(
            s.pod_selector.and_then(|p| p.match_labels),
            Some(labels::selector("demo"))
        );
    }

    #[test]
    fn none_when_monitor_network_policy_is_false() {
        assert!(
            policy("version: 2.15.1\nreplicas: 1\nmonitor: {networkPolicy: false}\n").is_none()
        );
    }
}
