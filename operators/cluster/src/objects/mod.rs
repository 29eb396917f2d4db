//! The Kubernetes objects a NatsCluster renders (design §4.1), as pure functions of the spec and
//! the server plans; [`server_side_apply`] alone writes them (server-side apply of what the NatsCluster
//! controls), for the reconciler and the Kubernetes server lifecycle.

pub mod cert_manager_certificates;
pub mod claims;
pub mod cluster;
pub mod configmap;
pub mod endpoints;
pub mod images;
pub mod labels;
pub mod leaf_remotes;
pub mod network_policy;
pub mod pdb;
pub mod pod_merge;
pub mod server_side_apply;
pub mod services;
pub mod statefulset;
#[cfg(test)]
mod upgrade_goldens;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use nats_api::cluster::{ListenerTls, NatsCluster};

/// Port names shared by the containers, Services and the NetworkPolicy.
pub mod port_name {
    pub const CLIENT: &str = "client";
    pub const CLUSTER: &str = "cluster";
    pub const MONITOR: &str = "monitor";
    pub const GATEWAY: &str = "gateway";
    pub const LEAFNODES: &str = "leafnodes";
    pub const METRICS: &str = "metrics";
}

/// The port the exporter sidecar serves its metrics on.
pub const METRICS_PORT: u16 = 7777;

/// Why an object cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ObjectsError {
    #[error("NatsCluster {0:?} has no namespace, name or uid to own its objects by")]
    Unowned(String),
    #[error("NatsCluster {cluster}: spec.podTemplate does not merge into a pod template: {reason}")]
    PodTemplate { cluster: String, reason: String },
    #[error("NatsCluster {cluster}: {source}")]
    Quantity {
        cluster: String,
        source: crate::quantity::QuantityError,
    },
    #[error("NatsCluster {cluster}: server {server} has no plan")]
    MissingPlan { cluster: String, server: String },
}

/// The NatsCluster every rendered object belongs to: its name, namespace and the controller
/// owner reference its objects carry.
#[derive(Clone, Debug, PartialEq)]
pub struct Owner {
    pub name: String,
    pub namespace: String,
    pub reference: OwnerReference,
}

impl Owner {
    /// The owner of `cluster`'s objects; `controller: true`, so a foreign controller's object of
    /// the same name is told apart from ours.
    pub fn of(cluster: &NatsCluster) -> Result<Self, ObjectsError> {
        let unowned = || ObjectsError::Unowned(cluster.metadata.name.clone().unwrap_or_default());
        let name = cluster.metadata.name.clone().ok_or_else(unowned)?;
        let namespace = cluster.metadata.namespace.clone().ok_or_else(unowned)?;
        let reference = cluster.controller_owner_ref(&()).ok_or_else(unowned)?;
        Ok(Self {
            name,
            namespace,
            reference,
        })
    }

    /// Metadata of an object named `name` in the cluster's namespace, owned by the NatsCluster.
    pub fn meta(
        &self,
        name: impl Into<String>,
        labels: std::collections::BTreeMap<String, String>,
    ) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some(self.namespace.clone()),
            labels: Some(labels),
            owner_references: Some(vec![self.reference.clone()]),
            ..Default::default()
        }
    }
}

/// The Secret holding a listener's certificate: the one `secretRef` names, else the one
/// cert-manager (or, for routes, the controller's own route CA) writes, `<name>-<listener>-tls`.
pub fn tls_secret_name(cluster: &str, listener: &str, tls: Option<&ListenerTls>) -> String {
    match tls.and_then(|t| t.secret_ref.as_ref()) {
        Some(s) => s.name.clone(),
        None => format!("{cluster}-{listener}-tls"),
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::Owner;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use nats_api::cluster::NatsClusterSpec;

    pub fn spec(yaml: &str) -> NatsClusterSpec {
        serde_yaml::from_str(yaml).expect("spec")
    }

    pub fn owner() -> Owner {
        Owner {
            name: "demo".into(),
            namespace: "nats".into(),
            reference: OwnerReference {
                api_version: "cluster.nats.mikluko.io/v1beta1".into(),
                kind: "NatsCluster".into(),
                name: "demo".into(),
                uid: "uid-1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::cluster::NatsCluster;

    #[test]
    fn the_owner_reference_is_a_controller_reference() {
        let mut c = NatsCluster::new("demo", testing::spec("version: 2.15.1\nreplicas: 1\n"));
        assert!(Owner::of(&c).is_err(), "no namespace, no uid");
        c.metadata.namespace = Some("nats".into());
        c.metadata.uid = Some("u1".into());
        let o = Owner::of(&c).expect("owner");
        assert_eq!(o.reference.controller, Some(true));
        assert_eq!(o.reference.kind, "NatsCluster");
        assert_eq!(o.reference.uid, "u1");
        let m = o.meta("x", Default::default());
        assert_eq!(m.owner_references.expect("refs")[0].name, "demo");
    }

    #[test]
    fn tls_secret_names() {
        use nats_api::common::SecretReference;
        let named = ListenerTls {
            secret_ref: Some(SecretReference {
                name: "mine".into(),
            }),
            cert_manager: None,
        };
        assert_eq!(tls_secret_name("demo", "client", Some(&named)), "mine");
        assert_eq!(tls_secret_name("demo", "routes", None), "demo-routes-tls");
    }
}
