//! A server's revision names what it loads and what it runs: `<config>-<workload>`.
//!
//! The config part is the digest of the rendered nats.conf (a server reports it as `/varz`
//! config_digest, and a reload moves it alone). The workload part is the digest of what the
//! server's process or pod is built from besides its config: the nats-server version and image,
//! the container's resources (GOMEMLIMIT derives from them), the pod template merged over the
//! rendered pod and the exporter sidecar. A change there reaches a server only by restarting
//! it, so it is a rollout step like a restart-only config field (design §4.4: the pod template
//! names the revision), never a change applied to every server at once.

use nats_api::cluster::NatsClusterSpec;
use sha2::{Digest, Sha256};

/// The workload part of every server's revision of `spec`.
pub fn workload(spec: &NatsClusterSpec) -> String {
    let built_from = serde_json::json!({
        "version": spec.version,
        "image": spec.image,
        "resources": spec.resources,
        "podTemplate": spec.pod_template,
        "exporter": spec.exporter,
        "exporterImage": crate::objects::images::exporter_image(spec),
    });
    short_digest(built_from.to_string().as_bytes())
}

/// The revision of a server of `spec` whose rendered nats.conf is `conf`.
pub fn of_server(spec: &NatsClusterSpec, conf: &str) -> String {
    revision(&of_config(conf), &workload(spec))
}

/// The revision of a rendered config: the first 8 hex digits of its SHA-256, the shape the
/// stories' status shows (`3f9a1c2e`).
pub fn of_config(conf: &str) -> String {
    short_digest(conf.as_bytes())
}

/// A server's revision from its config revision and the workload part.
pub fn revision(config: &str, workload: &str) -> String {
    format!("{config}-{workload}")
}

/// `revision` with `material` (see [`crate::certificate_reload::restart_material`]) folded into
/// its workload part: a server without a system user takes rotated certificates by restarting.
pub fn with_restart_material(revision: &str, material: Option<&str>) -> String {
    match (material, revision.split_once('-')) {
        (Some(m), Some((config, workload))) => {
            self::revision(config, &short_digest(format!("{workload}:{m}").as_bytes()))
        }
        _ => revision.to_string(),
    }
}

/// The workload part of `revision`; none for a revision of another form (written before
/// revisions named the workload), which counts as another workload.
pub fn workload_part(revision: &str) -> Option<&str> {
    revision.split_once('-').map(|(_, w)| w)
}

/// Whether two revisions run the same workload: a server on one reaches the other by loading
/// a new config alone.
pub fn same_workload(a: &str, b: &str) -> bool {
    matches!((workload_part(a), workload_part(b)), (Some(x), Some(y)) if x == y)
}

fn short_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn spec(extra: &str) -> NatsClusterSpec {
        serde_yaml::from_str(&format!(
            "version: 2.15.1\nreplicas: 3\nresources: {{limits: {{memory: 2Gi}}}}\n{extra}"
        ))
        .expect("spec")
    }

    #[rstest]
    #[case::nothing_changed("", false)]
    #[case::server_tags_are_config("serverTags: {zone: a}\n", false)]
    #[case::jetstream_limits_are_config("jetstream: {limits: {maxMemoryStore: 1Gi}}\n", false)]
    #[case::the_image("image: {repository: r.example/nats, digest: 'sha256:00'}\n", true)]
    #[case::the_pod_template("podTemplate: {metadata: {labels: {team: a}}}\n", true)]
    #[case::the_exporter("exporter: {enabled: false}\n", true)]
    fn what_changes_the_workload(#[case] extra: &str, #[case] changes: bool) {
        assert_eq!(workload(&spec("")) != workload(&spec(extra)), changes);
    }

    #[test]
    fn restart_material_moves_the_workload_part_only() {
        let r = of_server(&spec(""), "port: 4222\n");
        assert_eq!(with_restart_material(&r, None), r);
        let a = with_restart_material(&r, Some("aaaa"));
        let b = with_restart_material(&r, Some("bbbb"));
        assert_ne!(a, b);
        assert_eq!(
            a.split_once('-').map(|p| p.0),
            r.split_once('-').map(|p| p.0)
        );
        assert!(!same_workload(&a, &r) && !same_workload(&a, &b));
    }

    #[test]
    fn the_version_and_resources_change_the_workload() {
        let base = spec("");
        let mut newer = base.clone();
        newer.version = "2.15.2".into();
        assert_ne!(workload(&base), workload(&newer));
        let raised: NatsClusterSpec = serde_yaml::from_str(
            "version: 2.15.1\nreplicas: 3\nresources: {limits: {memory: 4Gi}}\n",
        )
        .expect("spec");
        assert_ne!(workload(&base), workload(&raised));
    }

    #[rstest]
    #[case::same_workload_new_config("aaaa1111-w1", "bbbb2222-w1", true)]
    #[case::new_workload("aaaa1111-w1", "aaaa1111-w2", false)]
    #[case::a_revision_of_the_old_form("aaaa1111", "aaaa1111-w1", false)]
    fn same_workload_compares_the_workload_part(
        #[case] a: &str,
        #[case] b: &str,
        #[case] same: bool,
    ) {
        assert_eq!(same_workload(a, b), same);
    }

    #[test]
    fn a_revision_joins_its_parts() {
        let r = revision("c0ffee00", "0badf00d");
        assert_eq!(r, "c0ffee00-0badf00d");
        assert_eq!(workload_part(&r), Some("0badf00d"));
    }
}
