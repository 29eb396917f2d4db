//! Getting a changed config into a running pod soon (design §4.2, a reload on Kubernetes).
//!
//! The kubelet projects a changed ConfigMap into the pods that mount it only when it next syncs
//! each pod: its periodic resync, a minute plus up to half a minute of jitter. Until then the
//! server reloads the file it already ran. Any change of the pod object makes the kubelet sync
//! that pod at once, and every sync re-projects its ConfigMap volumes. So after writing a
//! server's ConfigMap the controller sets one annotation on the server's pod, naming the
//! revision written: the pod's own fields are untouched, nothing restarts. Without it (no
//! `patch` on pods, the pod gone) the reload still confirms, within the longer window of
//! [`PROJECTION_BOUND`].

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::objects::labels;

/// The annotation naming the config revision last written for the pod's server.
pub const CONFIG_WRITTEN_ANNOTATION: &str = "cluster.nats.mikluko.io/config-written";

/// How long a written ConfigMap may take to reach the pod's file when the pod was not nudged:
/// the kubelet's resync (60 s, jittered up to 90 s) and a margin.
pub const PROJECTION_BOUND: Duration = Duration::from_secs(120);

/// The merge patch that nudges `pod`, the pod of server `server_name`, to sync for `revision`:
/// none when the pod is not that server's (another label, or not controlled by the
/// StatefulSet of that name) or already carries the annotation.
pub fn nudge(pod: &Pod, server_name: &str, revision: &str) -> Option<serde_json::Value> {
    let of_server = pod.labels().get(labels::SERVER).map(String::as_str) == Some(server_name);
    let controlled = pod
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.kind == "StatefulSet" && o.name == server_name);
    let written = pod
        .annotations()
        .get(CONFIG_WRITTEN_ANNOTATION)
        .map(String::as_str);
    (of_server && controlled && written != Some(revision)).then(|| {
        serde_json::json!({
            "metadata": { "annotations": { CONFIG_WRITTEN_ANNOTATION: revision } }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use rstest::rstest;

    fn pod(server: &str, owner: Option<(&str, &str)>, written: Option<&str>) -> Pod {
        let mut p = Pod::default();
        p.metadata.labels = Some([(labels::SERVER.to_string(), server.to_string())].into());
        p.metadata.owner_references = owner.map(|(kind, name)| {
            vec![OwnerReference {
                kind: kind.into(),
                name: name.into(),
                controller: Some(true),
                ..Default::default()
            }]
        });
        p.metadata.annotations =
            written.map(|r| [(CONFIG_WRITTEN_ANNOTATION.to_string(), r.to_string())].into());
        p
    }

    #[rstest]
    #[case::the_servers_pod(pod("demo-0", Some(("StatefulSet", "demo-0")), None), true)]
    #[case::written_before(pod("demo-0", Some(("StatefulSet", "demo-0")), Some("r1-w")), true)]
    #[case::already_nudged(pod("demo-0", Some(("StatefulSet", "demo-0")), Some("r2-w")), false)]
    #[case::another_servers_label(pod("demo-1", Some(("StatefulSet", "demo-0")), None), false)]
    #[case::not_the_statefulsets(pod("demo-0", Some(("ReplicaSet", "demo-0")), None), false)]
    #[case::no_controller(pod("demo-0", None, None), false)]
    fn only_the_servers_own_pod_is_nudged_once_per_revision(#[case] p: Pod, #[case] patched: bool) {
        let patch = nudge(&p, "demo-0", "r2-w");
        assert_eq!(patch.is_some(), patched, "{patch:?}");
        if let Some(patch) = patch {
            assert_eq!(
                patch["metadata"]["annotations"][CONFIG_WRITTEN_ANNOTATION],
                "r2-w"
            );
        }
    }
}
