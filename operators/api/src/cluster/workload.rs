//! What every server of a NatsCluster runs with: its image, JetStream and its store, the pod
//! template merged over its pod, the exporter sidecar and access to the monitoring port.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, ResourceRequirements};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::default_true;

/// The nats-server image of a NATS cluster's servers.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    /// The image repository; omitted, `nats`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub repository: Option<String>,
    /// The manifest digest pinning the image, `sha256:` and 64 lowercase hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^sha256:[a-f0-9]{64}$')").message("spec.image.digest must be sha256: followed by 64 lowercase hex digits; an image is pinned by digest, never by tag"))]
    #[schemars(length(max = 71))]
    pub digest: Option<String>,
}

/// JetStream on every server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct JetStream {
    /// The JetStream domain; a leaf running JetStream must set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub domain: Option<String>,
    /// Overrides of the store limits otherwise derived from resources.limits.memory and the volume size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<JetStreamLimits>,
    /// Each server's file store volume. A change (class, size, zone) replaces servers one at a time.
    /// Omitted, the file store lives in the pod's ephemeral storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_claim_template: Option<VolumeClaimTemplate>,
    /// When each server fsyncs its file store, rendered as nats-server's `sync_interval`:
    /// `always` (after every write, before the publish is acknowledged) or a positive duration
    /// such as `2m` (a timer; what was written since the last tick is acknowledged but only in
    /// the page cache). Omitted, `always`, not nats-server's own default of two minutes, under
    /// which a coordinated power loss (or one OS crash during a partition) loses acknowledged
    /// writes, as Jepsen's NATS 2.12.1 analysis showed (docs/durability.md). A duration trades
    /// that guarantee for publish throughput. A change restarts the servers one at a time:
    /// nats-server refuses it on reload ("config reload not supported for SyncInterval").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(SYNC_INTERVAL_RULE).message("spec.jetstream.syncInterval must be `always` or a positive duration such as 2m, 30s or 500ms"))]
    #[schemars(length(min = 1, max = 32))]
    pub sync_interval: Option<String>,
}

/// `always`, or a Go duration of `<number><unit>` terms greater than zero (nats-server parses the
/// value with `time.ParseDuration`; a zero interval would leave the store unsynced).
const SYNC_INTERVAL_RULE: &str = r"self == 'always' || (self.matches('^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s'))";

/// How a server fsyncs its file store, as `spec.jetstream.syncInterval` says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncInterval {
    /// Every write is synced before it is acknowledged (`sync_interval: always`).
    Always,
    /// Synced on a timer of this Go duration (`sync_interval: "2m"`).
    Every(String),
}

impl JetStream {
    /// The sync policy the servers run with: `always` unless a duration is given.
    pub fn sync_interval(&self) -> SyncInterval {
        match self.sync_interval.as_deref() {
            None | Some("always") => SyncInterval::Always,
            Some(d) => SyncInterval::Every(d.to_string()),
        }
    }
}

/// A server's JetStream store limits.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JetStreamLimits {
    /// The memory store limit (`max_memory_store`), such as `1Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_memory_store: Option<Quantity>,
    /// The file store limit (`max_file_store`), such as `10Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_store: Option<Quantity>,
}

/// Labels and annotations a template passes through to the rendered object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedObjectMetadata {
    /// Labels added to the rendered object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations added to the rendered object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A PersistentVolumeClaim template for each server's file store.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaimTemplate {
    /// Labels and annotations of each claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<EmbeddedObjectMetadata>,
    /// The claim's spec: storage class, access modes, requested size.
    pub spec: PersistentVolumeClaimSpec,
}

/// Metadata and a partial pod spec merged over the pod the cluster controller renders.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplate {
    /// Labels and annotations added to every server's pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<EmbeddedObjectMetadata>,
    /// A partial PodSpec merged over the rendered one (containers merged by name). The apiserver
    /// does not validate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::preserve_unknown_object_schema")]
    pub spec: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The prometheus-nats-exporter sidecar in every server's pod, republishing the monitoring port
/// as Prometheus metrics.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Exporter {
    /// Runs the sidecar; false turns it off.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The sidecar's image; omitted, the cluster controller's pinned default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ExporterImage>,
    /// Peers admitted to the metrics port besides the cluster controller's namespace, under
    /// monitor.networkPolicy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<NetworkPolicyPeer>,
    /// The sidecar's resources; omitted, small defaults (requests 10m CPU and 32Mi memory,
    /// limits 100m CPU and 128Mi memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

impl Default for Exporter {
    fn default() -> Self {
        Self {
            enabled: true,
            image: None,
            from: Vec::new(),
            resources: None,
        }
    }
}

/// The prometheus-nats-exporter image.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ExporterImage {
    /// The image repository; omitted, the cluster controller's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub repository: Option<String>,
    /// The image tag; omitted, the cluster controller's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub tag: Option<String>,
    /// The manifest digest pinning the image, `sha256:` and 64 lowercase hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^sha256:[a-f0-9]{64}$')").message("spec.exporter.image.digest must be sha256: followed by 64 lowercase hex digits"))]
    #[schemars(length(max = 71))]
    pub digest: Option<String>,
}

/// Access to the monitoring port.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Monitor {
    /// Renders a NetworkPolicy over the servers' pods admitting the monitoring port only from the
    /// cluster controller's namespace, the metrics port from there and exporter.from, the route port
    /// only from the NATS cluster's own pods, and every other rendered port from anywhere; false
    /// renders none. A port podTemplate adds is not admitted by it.
    #[serde(default = "default_true")]
    pub network_policy: bool,
}

impl Default for Monitor {
    fn default() -> Self {
        Self {
            network_policy: true,
        }
    }
}
