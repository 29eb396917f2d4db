//! A server's ConfigMap: its rendered nats.conf and the revision that names the content.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::{Owner, labels};
use crate::render::{self, ServerPlan};
use nats_api::cluster::NatsClusterSpec;

/// The key nats.conf is stored under; also its file name in the config volume.
pub const CONFIG_KEY: &str = "nats.conf";
/// Carries the config revision on the ConfigMap and on the pod template, so a new revision
/// restarts the pod through its StatefulSet (design §4.4).
pub const REVISION_ANNOTATION: &str = "cluster.nats.mikluko.io/config-revision";
/// The plan the config was rendered from (JSON): a controller that restarted reads it to tell
/// which fields the next change touches, and so whether it reloads (design §4.2).
pub const PLAN_ANNOTATION: &str = "cluster.nats.mikluko.io/plan";

/// The name of server `server`'s ConfigMap.
pub fn name(server: &str) -> String {
    format!("{server}-config")
}

/// The revision of a rendered config ([`crate::revision::of_config`]).
pub fn revision(conf: &str) -> String {
    crate::revision::of_config(conf)
}

/// The ConfigMap of one server with its nats.conf; returns it with the server's revision
/// (config and workload, see [`crate::revision`]), which it is annotated with.
pub fn config_map(owner: &Owner, spec: &NatsClusterSpec, plan: &ServerPlan) -> (ConfigMap, String) {
    let conf = render::render(plan);
    let rev = crate::revision::of_server(spec, &conf);
    let mut meta = owner.meta(
        name(&plan.server_name),
        labels::server(&owner.name, &plan.server_name),
    );
    let mut annotations = BTreeMap::from([(REVISION_ANNOTATION.into(), rev.clone())]);
    if let Ok(plan) = serde_json::to_string(plan) {
        annotations.insert(PLAN_ANNOTATION.into(), plan);
    }
    meta.annotations = Some(annotations);
    let cm = ConfigMap {
        metadata: meta,
        data: Some(BTreeMap::from([(CONFIG_KEY.into(), conf)])),
        ..Default::default()
    };
    (cm, rev)
}

/// The plan `cm` was rendered from, when it holds the config of `revision`.
pub fn stored_plan(cm: &ConfigMap, revision: &str) -> Option<ServerPlan> {
    let a = cm.metadata.annotations.as_ref()?;
    if a.get(REVISION_ANNOTATION).map(String::as_str) != Some(revision) {
        return None;
    }
    serde_json::from_str(a.get(PLAN_ANNOTATION)?).ok()
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
        let yaml = "version: 2.15.1\nreplicas: 2\njetstream: {}\n";
        let p = plans(yaml);
        let (cm, rev) = config_map(&owner(), &spec(yaml), &p[1]);
        assert_eq!(cm.metadata.name.as_deref(), Some("demo-1-config"));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("nats"));
        let conf = &cm.data.as_ref().expect("data")[CONFIG_KEY];
        assert_eq!(conf, &render::render(&p[1]));
        // <config>-<workload>, 8 hex digits each.
        assert_eq!(rev.len(), 17);
        assert!(rev.chars().all(|c| c.is_ascii_hexdigit() || c == '-'));
        assert!(rev.starts_with(&revision(conf)));
        assert_eq!(
            cm.metadata.annotations.expect("ann")[REVISION_ANNOTATION],
            rev
        );
        assert_eq!(
            cm.metadata.labels.expect("labels")[labels::SERVER],
            "demo-1"
        );
    }

    #[test]
    fn carries_the_plan_it_was_rendered_from() {
        let yaml = "version: 2.15.1\nreplicas: 2\njetstream: {}\n";
        let p = plans(yaml);
        let (cm, rev) = config_map(&owner(), &spec(yaml), &p[0]);
        assert_eq!(stored_plan(&cm, &rev), Some(p[0].clone()));
        assert_eq!(
            stored_plan(&cm, "another"),
            None,
            "only for its own revision"
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
    #[case::the_version_alone(
        "version: 2.15.1\nreplicas: 1\n",
        "version: 2.15.2\nreplicas: 1\n",
        false
    )]
    fn the_revision_follows_the_content(#[case] a: &str, #[case] b: &str, #[case] same: bool) {
        let (_, ra) = config_map(&owner(), &spec(a), &plans(a)[0]);
        let (_, rb) = config_map(&owner(), &spec(b), &plans(b)[0]);
        assert_eq!(ra == rb, same);
    }
}
