//! Every object one NatsCluster renders, together: what the reconciler applies, and the names
//! it checks for objects it does not control (design §4.1).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::DynamicObject;
use nats_api::cluster::{NatsClusterSpec, names};

use super::statefulset::{ServerWorkload, stateful_set};
use super::{
    ObjectsError, Owner, cert_manager_certificates, configmap, network_policy, pdb, services,
};
use crate::render::ServerPlan;
use crate::route_ca;

/// The objects of one NatsCluster, servers in ordinal order.
#[derive(Clone, Debug)]
pub struct ClusterObjects {
    pub config_maps: Vec<ConfigMap>,
    /// The config revision of each server, in ordinal order.
    pub revisions: Vec<String>,
    pub stateful_sets: Vec<StatefulSet>,
    pub client_service: Service,
    pub headless_service: Service,
    pub gateway_service: Option<Service>,
    pub leafnodes_service: Option<Service>,
    pub pod_disruption_budget: PodDisruptionBudget,
    pub network_policy: Option<NetworkPolicy>,
    pub certificates: Vec<DynamicObject>,
}

/// Where the NatsCluster's objects are rendered for.
#[derive(Clone, Copy, Debug)]
pub struct Site<'a> {
    /// The namespace the cluster controller runs in; the only one the monitoring port admits.
    pub controller_namespace: &'a str,
    pub cluster_domain: &'a str,
}

/// Renders every object from the spec and the servers' plans.
pub fn render_objects(
    owner: &Owner,
    spec: &NatsClusterSpec,
    plans: &[ServerPlan],
    site: Site<'_>,
) -> Result<ClusterObjects, ObjectsError> {
    let first = plans.first().ok_or_else(|| ObjectsError::MissingPlan {
        cluster: owner.name.clone(),
        server: names::server(&owner.name, 0),
    })?;
    let mut config_maps = vec![];
    let mut revisions = vec![];
    let mut stateful_sets = vec![];
    for plan in plans {
        let (cm, rev) = configmap::config_map(owner, spec, plan);
        stateful_sets.push(stateful_set(&ServerWorkload {
            owner,
            spec,
            plan,
            revision: &rev,
        })?);
        config_maps.push(cm);
        revisions.push(rev);
    }
    Ok(ClusterObjects {
        config_maps,
        revisions,
        stateful_sets,
        client_service: services::client_service(owner, first),
        headless_service: services::headless_service(owner, spec, first),
        gateway_service: services::gateway_service(owner, spec, first),
        leafnodes_service: services::leafnodes_service(owner, spec, first),
        pod_disruption_budget: pdb::pod_disruption_budget(owner),
        network_policy: network_policy::network_policy(
            owner,
            spec,
            first,
            site.controller_namespace,
        ),
        certificates: cert_manager_certificates::certificates(owner, spec, site.cluster_domain),
    })
}

impl ClusterObjects {
    /// `(kind, name)` of every object here, to check against what exists.
    pub fn names(&self) -> Vec<(&'static str, String)> {
        fn n(kind: &'static str, name: &Option<String>) -> Option<(&'static str, String)> {
            name.clone().map(|n| (kind, n))
        }
        let mut out = vec![];
        out.extend(
            self.config_maps
                .iter()
                .filter_map(|o| n("ConfigMap", &o.metadata.name)),
        );
        out.extend(
            self.stateful_sets
                .iter()
                .filter_map(|o| n("StatefulSet", &o.metadata.name)),
        );
        out.extend(n("Service", &self.client_service.metadata.name));
        out.extend(n("Service", &self.headless_service.metadata.name));
        for s in self.gateway_service.iter().chain(&self.leafnodes_service) {
            out.extend(n("Service", &s.metadata.name));
        }
        out.extend(n(
            "PodDisruptionBudget",
            &self.pod_disruption_budget.metadata.name,
        ));
        if let Some(p) = &self.network_policy {
            out.extend(n("NetworkPolicy", &p.metadata.name));
        }
        out.extend(
            self.certificates
                .iter()
                .filter_map(|o| n("Certificate", &o.metadata.name)),
        );
        out
    }
}

/// The Secrets the controller itself writes for a NatsCluster: the route CA and route
/// certificate when route TLS names no certificate, and the leaf remotes' projected Secret.
pub fn controller_secret_names(
    owner: &Owner,
    spec: &NatsClusterSpec,
    leaf_files: bool,
) -> Vec<String> {
    let mut out = vec![];
    let self_signed = spec.route_tls_enabled()
        && spec
            .routes
            .as_ref()
            .and_then(|r| r.tls.as_ref())
            .is_none_or(|t| t.secret_ref.is_none() && t.cert_manager.is_none());
    if self_signed {
        out.push(names::routes_ca_secret(&owner.name));
        out.push(route_ca::routes_tls_secret(&owner.name));
    }
    if leaf_files {
        out.push(names::leaf_remotes_secret(&owner.name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::owner;
    use crate::plan::{ClusterInputs, KubernetesLayout, plan_servers};
    use nats_api::cluster::NatsCluster;
    use serde::Deserialize;

    fn story(path: &str) -> NatsCluster {
        let text = std::fs::read_to_string(sim::checkout::path("docs/stories").join(path))
            .expect("story manifest");
        serde_yaml::Deserializer::from_str(&text)
            .map(serde_yaml::Value::deserialize)
            .map_while(Result::ok)
            .find(|v| v.get("kind").and_then(|k| k.as_str()) == Some("NatsCluster"))
            .map(|v| serde_yaml::from_value(v).expect("a NatsCluster"))
            .expect("a NatsCluster in the manifest")
    }

    fn render(spec: &NatsClusterSpec) -> ClusterObjects {
        let plans = plan_servers(
            &ClusterInputs {
                name: "demo",
                spec,
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
        render_objects(
            &owner(),
            spec,
            &plans,
            Site {
                controller_namespace: "nats-system",
                cluster_domain: "cluster.local",
            },
        )
        .expect("objects")
    }

    #[test]
    fn the_quickstart_renders_exactly_its_objects() {
        let c = story("01-quickstart/01-natscluster.yaml");
        let objects = render(&c.spec);
        let names: Vec<String> = objects
            .names()
            .into_iter()
            .map(|(k, n)| format!("{k}/{n}"))
            .collect();
        assert_eq!(
            names,
            vec![
                "ConfigMap/demo-0-config",
                "ConfigMap/demo-1-config",
                "ConfigMap/demo-2-config",
                "StatefulSet/demo-0",
                "StatefulSet/demo-1",
                "StatefulSet/demo-2",
                "Service/demo",
                "Service/demo-headless",
                "PodDisruptionBudget/demo",
                "NetworkPolicy/demo",
            ]
        );
        assert_eq!(objects.revisions.len(), 3);
        assert_ne!(
            objects.revisions[0], objects.revisions[1],
            "each server its own name"
        );
        assert_eq!(
            controller_secret_names(&owner(), &c.spec, false),
            vec!["demo-routes-ca", "demo-routes-tls"]
        );
        // Every StatefulSet's pod names its own ConfigMap's revision.
        for (sts, rev) in objects.stateful_sets.iter().zip(&objects.revisions) {
            let ann = sts
                .spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.clone())
                .expect("annotations");
            assert_eq!(&ann[configmap::REVISION_ANNOTATION], rev);
        }
    }

    #[test]
    fn every_story_natscluster_renders() {
        let root = sim::checkout::path("docs/stories");
        let mut seen = 0;
        for dir in std::fs::read_dir(&root).expect("stories").flatten() {
            for f in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if f.path().extension().and_then(|e| e.to_str()) != Some("yaml") {
                    continue;
                }
                let text = std::fs::read_to_string(f.path()).unwrap_or_default();
                for v in serde_yaml::Deserializer::from_str(&text)
                    .map(serde_yaml::Value::deserialize)
                    .map_while(Result::ok)
                {
                    if v.get("kind").and_then(|k| k.as_str()) != Some("NatsCluster")
                        || v.get("spec").is_none()
                    {
                        continue;
                    }
                    let c: NatsCluster = serde_yaml::from_value(v).expect("NatsCluster");
                    let o = render(&c.spec);
                    assert_eq!(
                        o.stateful_sets.len(),
                        c.spec.replicas as usize,
                        "{:?}",
                        f.path()
                    );
                    assert_eq!(o.network_policy.is_some(), c.spec.network_policy_enabled());
                    assert_eq!(
                        o.gateway_service.is_some(),
                        c.spec.gateway.as_ref().is_some_and(|g| g.service.is_some())
                    );
                    seen += 1;
                }
            }
        }
        assert!(seen >= 5, "only {seen} NatsClusters in the stories");
    }

    #[test]
    fn self_signed_route_secrets_only_without_a_named_certificate() {
        let s: NatsClusterSpec = serde_yaml::from_str(
            "version: 2.15.1\nreplicas: 1\nroutes: {tls: {secretRef: {name: r}}}\n",
        )
        .expect("spec");
        assert!(controller_secret_names(&owner(), &s, false).is_empty());
        let s: NatsClusterSpec =
            serde_yaml::from_str("version: 2.15.1\nreplicas: 1\nroutes: {tls: {enabled: false}}\n")
                .expect("spec");
        assert_eq!(
            controller_secret_names(&owner(), &s, true),
            vec!["demo-leaf-remotes"]
        );
    }
}
