//! A change to `jetstream.volumeClaimTemplate` replaces servers (design §4.5): a server whose
//! volume was made from another claim shape (class, size, access modes, selector — where a
//! zone is chosen) is evacuated, removed and recreated under the same name on a new volume.
//! A StatefulSet's claim template cannot change in place, and a volume cannot be moved to
//! another class or zone, so nothing short of a replacement applies such a change. Which
//! observed servers that comes to is [`super::rollout_inputs::volume_mismatches`].

use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
use nats_api::cluster::NatsClusterSpec;
/// What of a claim a server's volume is made from, as compared for replacement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimShape {
    pub storage_class: Option<String>,
    /// The requested size in bytes (`None`: none requested, or not a quantity).
    pub size: Option<i64>,
    pub access_modes: Vec<String>,
    /// The label selector as JSON (a zone or a particular volume is chosen there).
    pub selector: Option<String>,
}

/// The shape of a claim spec.
pub fn shape_of(spec: &PersistentVolumeClaimSpec) -> ClaimShape {
    let mut access_modes = spec.access_modes.clone().unwrap_or_default();
    access_modes.sort();
    ClaimShape {
        storage_class: spec.storage_class_name.clone(),
        size: spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .and_then(|q| crate::quantity::bytes("storage", &q.0).ok()),
        access_modes,
        selector: spec
            .selector
            .as_ref()
            .and_then(|s| serde_json::to_string(s).ok()),
    }
}

/// The shape `spec` asks for; none without a claim template.
pub fn desired_shape(spec: &NatsClusterSpec) -> Option<ClaimShape> {
    spec.jetstream
        .as_ref()?
        .volume_claim_template
        .as_ref()
        .map(|t| shape_of(&t.spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_desired_shape_comes_from_the_template() {
        let spec: NatsClusterSpec = serde_yaml::from_str(
            "version: 2.15.1\nreplicas: 1\njetstream:\n  volumeClaimTemplate:\n    spec: {storageClassName: fast, resources: {requests: {storage: 1Gi}}}\n",
        )
        .expect("spec");
        let s = desired_shape(&spec).expect("a template");
        assert_eq!(s.storage_class.as_deref(), Some("fast"));
        assert_eq!(s.size, Some(1 << 30));
        let none: NatsClusterSpec =
            serde_yaml::from_str("version: 2.15.1\nreplicas: 1\njetstream: {}\n").expect("spec");
        assert_eq!(desired_shape(&none), None);
    }
}
