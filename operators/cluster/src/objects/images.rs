//! The images a server's pod runs: nats-server by spec.image or the version's tag, and the
//! prometheus-nats-exporter sidecar pinned by digest unless spec.exporter.image names another.
//! A server's workload revision is built from them ([`crate::revision`]).

use nats_api::cluster::NatsClusterSpec;

/// The nats-server image repository when spec.image names none.
pub const DEFAULT_NATS_REPOSITORY: &str = "docker.io/library/nats";
/// The prometheus-nats-exporter image, pinned by digest (design §4.1).
pub const DEFAULT_EXPORTER_IMAGE: &str = "docker.io/natsio/prometheus-nats-exporter@sha256:26c826662ac8424597cc9bdf89ea5b606eb66e3c11db9b1215c27d2076bbb01b";

/// The nats-server image: the repository and digest spec.image names, else the version's tag.
pub fn nats_image(spec: &NatsClusterSpec) -> String {
    let image = spec.image.as_ref();
    let repo = image
        .and_then(|i| i.repository.as_deref())
        .unwrap_or(DEFAULT_NATS_REPOSITORY);
    match image.and_then(|i| i.digest.as_deref()) {
        Some(d) => format!("{repo}@{d}"),
        None => format!("{repo}:{}", spec.version),
    }
}

/// The exporter image: the default pinned one unless spec.exporter.image names another.
pub fn exporter_image(spec: &NatsClusterSpec) -> String {
    let Some(img) = spec.exporter.as_ref().and_then(|e| e.image.as_ref()) else {
        return DEFAULT_EXPORTER_IMAGE.into();
    };
    let repo = img
        .repository
        .as_deref()
        .unwrap_or("docker.io/natsio/prometheus-nats-exporter");
    match (&img.digest, &img.tag) {
        (Some(d), _) => format!("{repo}@{d}"),
        (None, Some(t)) => format!("{repo}:{t}"),
        (None, None) => DEFAULT_EXPORTER_IMAGE.into(),
    }
}
