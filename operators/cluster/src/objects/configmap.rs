//! A server's ConfigMap: its rendered nats.conf and the revision that names the content.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use sha2::{Digest, Sha256};

use super::{Owner, labels};
use crate::render::{self, ServerPlan};

/// The key nats.conf is stored under; also its file name in the config volume.
pub const CONFIG_KEY: &str = "nats.conf";
/// Carries the config revision on the ConfigMap and on the pod template, so a new revision
/// restarts the pod through its StatefulSet (design §4.4).
pub const REVISION_ANNOTATION: &str = "cluster.nats.mikluko.io/config-revision";

/// The name of server `server`'s ConfigMap.
pub fn name(server: &str) -> String {
    format!("{server}-config")
}

/// The revision of a rendered config: the first 8 hex digits of its SHA-256, the shape the
/// stories' status shows (`3f9a1c2e`).
pub fn revision(conf: &str) -> String {
    let digest = Sha256::digest(conf.as_bytes());
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// The ConfigMap of one server with its nats.conf; returns it with the revision.
pub fn config_map(owner: &Owner, plan: &ServerPlan) -> (ConfigMap, String) {
    let conf = render::render(plan);
    let rev = revision(&conf);
    let mut meta = owner.meta(
        name(&plan.server_name),
        labels::server(&owner.name, &plan.server_name),
    );
    meta.annotations = Some(BTreeMap::from([(REVISION_ANNOTATION.into(), rev.clone())]));
    let cm = ConfigMap {
        metadata: meta,
        data: Some(BTreeMap::from([(CONFIG_KEY.into(), conf)])),
        ..Default::default()
    };
    (cm, rev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::{owner, spec};
    use crate::plan::{ClusterInputs, KubernetesLayout, plan_servers};

    fn plans(yaml: &str) -> Vec<ServerPlan> {
        let s = spec(yaml);
        plan_servers(
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
        .expect("plans")
    }

    #[test]
    fn holds_the_rendered_config_and_its_revision() {
        let p = plans("version: 2.15.1\nreplicas: 2\njetstream: {}\n");
        let (cm, rev) = config_map(&owner(), &p[1]);
        assert_eq!(cm.metadata.name.as_deref(), Some("demo-1-config"));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("nats"));
        let conf = &cm.data.as_ref().expect("data")[CONFIG_KEY];
        assert_eq!(conf, &render::render(&p[1]));
        assert_eq!(rev.len(), 8);
        assert!(rev.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            cm.metadata.annotations.expect("ann")[REVISION_ANNOTATION],
            rev
        );
        assert_eq!(
            cm.metadata.labels.expect("labels")[labels::SERVER],
            "demo-1"
        );
    }

    #[rstest::rstest]
    #[case(
        "version: 2.15.1\nreplicas: 1\n",
        "version: 2.15.1\nreplicas: 1\n",
        true
    )]
    #[case(
        "version: 2.15.1\nreplicas: 1\n",
        "version: 2.15.1\nreplicas: 1\njetstream: {}\n",
        false
    )]
    #[case(
        "version: 2.15.1\nreplicas: 1\n",
        "version: 2.15.1\nreplicas: 1\nserverTags: {az: a}\n",
        false
    )]
    fn the_revision_follows_the_content(#[case] a: &str, #[case] b: &str, #[case] same: bool) {
        let (_, ra) = config_map(&owner(), &plans(a)[0]);
        let (_, rb) = config_map(&owner(), &plans(b)[0]);
        assert_eq!(ra == rb, same);
    }
}
