//! `cluster.nats.mikluko.io`: NatsCluster, a NATS cluster the cluster controller deploys, one
//! StatefulSet per server.
//!
//! The spec types live here, the status in [`status`], the condition vocabulary in [`condition`] and
//! [`reason`], and the names of the objects a NatsCluster renders in [`names`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, ResourceRequirements};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Credentials, ObjectReference, SecretReference};

pub mod status;

pub use status::*;

/// The API group of NatsCluster.
pub const GROUP: &str = "cluster.nats.mikluko.io";

/// The lowest nats-server version a NatsCluster may name; lower is refused at apply.
pub const MIN_VERSION: &str = "2.15.0";

/// One-shot imperatives on a NatsCluster, as annotations. The cluster controller clears
/// force-step, replace-server and restart-all once it has acted; force-delete is read only while the
/// NatsCluster is being deleted, and never cleared.
pub mod annotation {
    /// `"<server>"`: restart that waiting server now, through a closed gate and through paused.
    pub const FORCE_STEP: &str = "cluster.nats.mikluko.io/force-step";
    /// `"<server>"`: replace that server (evacuate, remove, delete, recreate) under the rollout gate.
    pub const REPLACE_SERVER: &str = "cluster.nats.mikluko.io/replace-server";
    /// Any value: let deletion proceed while JetStream data remains or the NATS cluster cannot be observed.
    pub const FORCE_DELETE: &str = "cluster.nats.mikluko.io/force-delete";
    /// Any value: when adding or removing `auth` is held (AuthChangeBlocked), restart every server
    /// at once onto the new auth plane instead. Cleared once the servers run what spec.auth says.
    pub const RESTART_ALL: &str = "cluster.nats.mikluko.io/restart-all";
}

/// Condition types of NatsCluster.
pub mod condition {
    /// Every server serves and the NATS cluster is usable.
    pub const READY: &str = "Ready";
    /// Every Raft group is current: the NATS cluster is calm enough for the next voluntary step.
    pub const SETTLED: &str = "Settled";
    /// A rollout, scale-down or replacement is under way or held.
    pub const PROGRESSING: &str = "Progressing";
    /// Every gateway remote is reachable (only with `spec.gateway`).
    pub const GATEWAYS_CONNECTED: &str = "GatewaysConnected";
    /// Every leaf remote is connected (only with `spec.leafRemotes`).
    pub const LEAFNODES_CONNECTED: &str = "LeafnodesConnected";
    /// Deletion is held by the deletion guard.
    pub const DELETING: &str = "Deleting";
}

/// Condition reasons of NatsCluster, grouped by the condition that carries them.
pub mod reason {
    // Ready
    /// Ready=True: every server's pod is Ready.
    pub const ALL_SERVERS_READY: &str = "AllServersReady";
    /// Ready=True: some server is not ready but the meta group keeps its quorum.
    pub const QUORUM_AVAILABLE: &str = "QuorumAvailable";
    /// Ready=False: too few servers answer for the meta group to keep its quorum.
    pub const QUORUM_UNAVAILABLE: &str = "QuorumUnavailable";
    /// Ready=False: an object could not be written (for example one of the same name exists and is
    /// not controlled by this NatsCluster); the message names every such object.
    pub const RECONCILE_FAILED: &str = "ReconcileFailed";
    /// Ready=False and Progressing=False: `spec.gateway` without `tls`, refused unless the cluster
    /// controller runs with `--allow-gateway-without-tls`.
    pub const GATEWAY_WITHOUT_TLS: &str = "GatewayWithoutTLS";

    // Settled
    /// Settled=True: every Raft group's members are current.
    pub const ALL_GROUPS_CURRENT: &str = "AllGroupsCurrent";
    /// Settled=True: no JetStream, nothing to wait for.
    pub const SERVERS_SILENT: &str = "ServersSilent";
    /// Settled=False: some Raft group has no leader.
    pub const GROUPS_LEADERLESS: &str = "GroupsLeaderless";
    /// Settled=False: some Raft group has members offline.
    pub const MEMBERS_OFFLINE: &str = "MembersOffline";
    /// Settled=False: some Raft group has members behind its leader.
    pub const GROUPS_CATCHING_UP: &str = "GroupsCatchingUp";
    /// Settled=Unknown or Deleting=True: the NATS cluster could not be observed.
    pub const OBSERVATION_FAILED: &str = "ObservationFailed";

    // Progressing
    /// Progressing=False: every server runs the target revision.
    pub const UP_TO_DATE: &str = "UpToDate";
    /// Progressing=True: the servers are being created for the first time.
    pub const CREATING: &str = "Creating";
    /// Progressing=True: servers restart one at a time onto the target revision.
    pub const ROLLING_RESTART: &str = "RollingRestart";
    /// Progressing=True: the gate has held the next step for ten minutes; the message names the
    /// groups that are not current.
    pub const GATE_BLOCKED: &str = "GateBlocked";
    /// Progressing=True: `spec.rollout.paused` holds the next step.
    pub const ROLLOUT_PAUSED: &str = "RolloutPaused";
    /// Progressing=True: a reload of the servers has been requested and not yet confirmed.
    pub const RELOAD_PENDING: &str = "ReloadPending";
    /// Progressing=True: servers beyond `spec.replicas` wait their turn for removal.
    pub const SCALE_DOWN_PENDING: &str = "ScaleDownPending";
    /// Progressing=True: a server beyond `spec.replicas` is being evacuated and removed.
    pub const SCALING_DOWN: &str = "ScalingDown";
    /// Progressing=True: a server is being replaced (volume claim template change or replace-server).
    pub const REPLACING_SERVER: &str = "ReplacingServer";
    /// Progressing=False: a stream's replica count exceeds the new size, or nothing can be
    /// evacuated without system credentials; nothing is forced.
    pub const SCALE_DOWN_BLOCKED: &str = "ScaleDownBlocked";
    /// Progressing=False: a replacement cannot proceed (for example JetStream without system credentials).
    pub const REPLACEMENT_BLOCKED: &str = "ReplacementBlocked";
    /// Progressing=True: the route certificate is not issued yet.
    pub const ROUTE_CERTIFICATE_NOT_READY: &str = "RouteCertificateNotReady";
    /// Progressing=True: the gateway certificate is not issued yet, or its Secret has no `ca.crt`.
    pub const GATEWAY_CERTIFICATE_NOT_READY: &str = "GatewayCertificateNotReady";
    /// Progressing=False: `spec.auth.trustRef` names no NatsOperatorTrust (or no grant admits it).
    pub const TRUST_NOT_FOUND: &str = "TrustNotFound";
    /// Progressing=True: the NatsOperatorTrust has no JWTs yet.
    pub const TRUST_NOT_READY: &str = "TrustNotReady";
    /// Progressing=False: the NatsOperatorTrust's JWTs do not decode or do not match.
    pub const TRUST_INVALID: &str = "TrustInvalid";
    /// Progressing=False: a NatsAccountTrust is malformed or refused.
    pub const ACCOUNT_TRUST_INVALID: &str = "AccountTrustInvalid";
    /// Progressing=True: a NatsAccountTrust has no public key yet.
    pub const ACCOUNT_TRUST_NOT_READY: &str = "AccountTrustNotReady";
    /// Progressing=False: the spec asks for something this controller cannot render (for example
    /// a leaf preloading an account without a volume and without `resolver: Cache`).
    pub const UNSUPPORTED_SPEC: &str = "UnsupportedSpec";
    /// Progressing=False: `auth` is being added or removed on a running NATS cluster, which cannot
    /// roll one server at a time; held until every server is restarted together.
    pub const AUTH_CHANGE_BLOCKED: &str = "AuthChangeBlocked";
    /// Progressing=True: this NATS cluster's own meta group is what the gate waits on.
    pub const OWN_META_GROUP: &str = "OwnMetaGroup";

    // GatewaysConnected
    /// GatewaysConnected=True: every remote of `spec.gateway.remotes` is reachable.
    pub const ALL_MEMBERS_REACHABLE: &str = "AllMembersReachable";
    /// GatewaysConnected=False: some remotes are unreachable; the message names them.
    pub const MEMBERS_UNREACHABLE: &str = "MembersUnreachable";

    // LeafnodesConnected
    /// LeafnodesConnected=True: every leaf remote is held by every server.
    pub const REMOTES_CONNECTED: &str = "RemotesConnected";
    /// LeafnodesConnected=False: some leaf remote is not connected on some server.
    pub const REMOTES_DISCONNECTED: &str = "RemotesDisconnected";
    /// LeafnodesConnected=False: a leaf remote's NatsConnection is not admitted by a grant and was
    /// rendered out; the message names it.
    pub const REMOTE_NOT_PERMITTED: &str = "RemoteNotPermitted";
    /// LeafnodesConnected=False: a leaf remote's NatsConnection does not exist.
    pub const REMOTE_NOT_FOUND: &str = "RemoteNotFound";

    // Deleting
    /// Deleting=True: stream groups remain on the NATS cluster; the message names them.
    pub const JETSTREAM_DATA_REMAINS: &str = "JetStreamDataRemains";
}

/// Resource defaults the cluster controller applies to the exporter sidecar when
/// `spec.exporter.resources` is omitted (controller defaults, not schema defaults).
pub mod exporter_defaults {
    /// CPU request.
    pub const CPU_REQUEST: &str = "10m";
    /// Memory request.
    pub const MEMORY_REQUEST: &str = "32Mi";
    /// CPU limit.
    pub const CPU_LIMIT: &str = "100m";
    /// Memory limit.
    pub const MEMORY_LIMIT: &str = "128Mi";
}

/// Names of the objects a NatsCluster renders.
pub mod names {
    /// server_name, StatefulSet and ConfigMap of server `i` of NatsCluster `cluster`: `<cluster>-<i>`.
    pub fn server(cluster: &str, i: u32) -> String {
        format!("{cluster}-{i}")
    }
    /// The pod of server `i`: `<cluster>-<i>-0`.
    pub fn server_pod(cluster: &str, i: u32) -> String {
        format!("{cluster}-{i}-0")
    }
    /// The client Service: the NatsCluster's own name.
    pub fn client_service(cluster: &str) -> String {
        cluster.to_string()
    }
    /// The headless Service, which also carries the monitoring port: `<cluster>-headless`.
    pub fn headless_service(cluster: &str) -> String {
        format!("{cluster}-headless")
    }
    /// The Secret holding the self-signed route CA key, mounted by no pod: `<cluster>-routes-ca`.
    pub fn routes_ca_secret(cluster: &str) -> String {
        format!("{cluster}-routes-ca")
    }
    /// The Secret the leaf remotes' creds and CAs are copied into: `<cluster>-leaf-remotes`.
    pub fn leaf_remotes_secret(cluster: &str) -> String {
        format!("{cluster}-leaf-remotes")
    }
}

fn default_true() -> bool {
    true
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A NATS cluster the cluster controller deploys: one StatefulSet per server, rendered configs,
/// Services, a PodDisruptionBudget and a NetworkPolicy; optionally under an auth plane, in a
/// supercluster through gateways, and a hub or leaf of other NATS clusters.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "cluster.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsCluster",
    namespaced,
    status = "NatsClusterStatus",
    derive = "PartialEq",
    category = "nats",
    doc = "A NATS cluster the cluster controller deploys, one StatefulSet per server, rolled one server at a time.",
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version"),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(
        name = "Ready Servers",
        type_ = "integer",
        json_path = ".status.readyReplicas"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Settled",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Settled\")].status"
    ),
    printcolumn(
        name = "Progress",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type==\"Progressing\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("!has(self.leafnodes) || has(self.auth)")
        .message("spec.leafnodes requires spec.auth: a leafnode listener without an auth plane admits any leaf into the global account"),
    validation = Rule::new("!has(self.leafRemotes) || size(self.leafRemotes) == 0 || !has(self.jetstream) || has(self.jetstream.domain)")
        .message("a leaf (spec.leafRemotes set) running JetStream must set spec.jetstream.domain"),
)]
#[serde(rename_all = "camelCase")]
pub struct NatsClusterSpec {
    /// The nats-server version the configuration is rendered for, MAJOR.MINOR.PATCH, 2.15.0 or
    /// later. A change may move any patch, and one minor up or down; a move of two or more minors
    /// is refused, since a newer minor writes Raft log entries an older one may not replay.
    #[x_kube(
        validation = Rule::new("isSemver(self)").message("spec.version must be a semantic version MAJOR.MINOR.PATCH, such as 2.15.1"),
        validation = Rule::new("!isSemver(self) || !semver(self).isLessThan(semver('2.15.0'))").message("spec.version must be 2.15.0 or later"),
        validation = Rule::new("!isSemver(self) || !isSemver(oldSelf) || (semver(self).major() == semver(oldSelf).major() && semver(self).minor() - semver(oldSelf).minor() <= 1 && semver(oldSelf).minor() - semver(self).minor() <= 1)")
            .message("spec.version may change its patch freely but its minor by at most one step up or down, within the same major; step through each minor in turn"),
    )]
    #[schemars(length(max = 64))]
    pub version: String,

    /// The nats-server image: repository and digest. The tag is always spec.version; an image is
    /// pinned by digest, never by another tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,

    /// The number of servers, at least 1. Lowering it removes the servers beyond it one at a time,
    /// highest ordinal first, evacuating JetStream first.
    #[x_kube(validation = Rule::new("self >= 1").message("spec.replicas must be at least 1"))]
    pub replicas: i32,

    /// Resources of the nats-server container. GOMEMLIMIT and the JetStream memory store derive
    /// from limits.memory unless jetstream.limits overrides them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Server tags rendered as `key:value` into every server's `server_tags`, which placement and
    /// evacuation match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server_tags: BTreeMap<String, String>,

    /// Enables JetStream on every server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<JetStream>,

    /// Metadata and a partial pod spec merged over every server's rendered pod, its security
    /// context and automountServiceAccountToken included: whoever may write a NatsCluster runs
    /// pods with any privilege its namespace admits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplate>,

    /// The prometheus-nats-exporter sidecar; omitted, it runs with its defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exporter: Option<Exporter>,

    /// Access to the monitoring port, which has no authentication; omitted, a NetworkPolicy is rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<Monitor>,

    /// TLS on the client listener; omitted, clients connect in the clear. With it, clients dial
    /// `tls://` and need the CA that issued the certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,

    /// The route listener; omitted, route TLS is on with a self-signed certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Routes>,

    /// Puts the NATS cluster under an auth plane (a NATS operator and its accounts); omitted,
    /// servers run with no accounts and no client authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Auth>,

    /// Joins the NATS cluster into a supercluster under the NatsCluster's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Gateway>,

    /// Opens a listener for leaf nodes (hub side); requires spec.auth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leafnodes: Option<Leafnodes>,

    /// The hubs this NATS cluster dials as a leaf, each through a NatsConnection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub leaf_remotes: Vec<LeafRemote>,

    /// Steers the rollout that restarts servers one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
}

impl NatsClusterSpec {
    /// Whether the exporter sidecar runs (`spec.exporter.enabled`, true when omitted).
    pub fn exporter_enabled(&self) -> bool {
        self.exporter.as_ref().is_none_or(|e| e.enabled)
    }

    /// Whether the NetworkPolicy is rendered (`spec.monitor.networkPolicy`, true when omitted).
    pub fn network_policy_enabled(&self) -> bool {
        self.monitor.as_ref().is_none_or(|m| m.network_policy)
    }

    /// Whether routes run under TLS (`spec.routes.tls.enabled`, true when omitted).
    pub fn route_tls_enabled(&self) -> bool {
        self.routes
            .as_ref()
            .and_then(|r| r.tls.as_ref())
            .is_none_or(|t| t.enabled)
    }

    /// Whether the rollout is paused (`spec.rollout.paused`).
    pub fn rollout_paused(&self) -> bool {
        self.rollout.as_ref().is_some_and(|r| r.paused)
    }

    /// Whether this NATS cluster is a leaf of some hub.
    pub fn is_leaf(&self) -> bool {
        !self.leaf_remotes.is_empty()
    }
}

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
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
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

/// Where a listener's certificate comes from: exactly one of a Secret or cert-manager.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new("has(self.secretRef) != has(self.certManager)")
    .message("a listener's tls sets exactly one of secretRef and certManager"))]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    /// A `kubernetes.io/tls` Secret holding `tls.crt`, `tls.key` and, to verify peers or for
    /// clients to trust, `ca.crt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    /// Has cert-manager issue the certificate, for the names the listener is reached at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<CertManagerCertificate>,
}

/// A certificate cert-manager issues into the NatsCluster's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertManagerCertificate {
    /// The issuer, copied into the Certificate the cluster controller creates.
    pub issuer_ref: IssuerReference,
}

/// A cert-manager Issuer or ClusterIssuer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuerReference {
    /// Name of an Issuer in the NatsCluster's namespace, or of a ClusterIssuer.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Kind of the issuer: `Issuer` when omitted, or `ClusterIssuer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub kind: Option<String>,
    /// API group of the issuer: `cert-manager.io` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub group: Option<String>,
}

/// The route listener.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Routes {
    /// TLS on routes; omitted, on with a self-signed certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<RoutesTls>,
}

/// Route TLS: on unless turned off, self-signed (valid a year, reissued under the same CA key
/// from the Secret `<name>-routes-ca`) unless a certificate is named.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(
    validation = Rule::new("!(has(self.secretRef) && has(self.certManager))")
        .message("spec.routes.tls sets at most one of secretRef and certManager"),
    validation = Rule::new("!has(self.enabled) || self.enabled || (!has(self.secretRef) && !has(self.certManager))")
        .message("spec.routes.tls names a certificate only while route TLS is enabled"),
)]
#[serde(rename_all = "camelCase")]
pub struct RoutesTls {
    /// Route TLS on; false turns it off (routes have no authentication of their own).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// A `kubernetes.io/tls` Secret with the route certificate and `ca.crt`; omitted, self-signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    /// Has cert-manager issue the route certificate; omitted, self-signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<CertManagerCertificate>,
}

impl Default for RoutesTls {
    fn default() -> Self {
        Self {
            enabled: true,
            secret_ref: None,
            cert_manager: None,
        }
    }
}

/// The auth plane a NATS cluster runs under.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Auth {
    /// The NatsOperatorTrust holding the trust roots: the NATS operator JWT and the system
    /// account JWT, preloaded so a server boots before its gateways are up.
    pub trust_ref: ObjectReference,
    /// Creds of a user of the system account the cluster controller connects as, to reload
    /// servers, observe Raft groups and evacuate servers. Omitted, every config change restarts
    /// and scale-down with JetStream is blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_credentials: Option<Credentials>,
    /// The account resolver: `Full` (a directory kept in sync) or `Cache`. Omitted, Full, except on a
    /// leaf that preloads no account, which runs Cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::common::optional_enum_field)]
    pub resolver: Option<ResolverType>,
    /// NatsAccountTrusts of accounts the servers preload (their JWTs rendered into the resolver),
    /// such as accounts of a supercluster nobody here signs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub account_trust_refs: Vec<ObjectReference>,
}

/// A NATS account resolver type. `Memory` is not offered: accounts arrive over the network.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ResolverType {
    /// A full resolver: every account JWT kept in a directory, synced with the other servers.
    Full,
    /// A cache resolver: accounts fetched on demand and cached.
    Cache,
}

/// Joins a NATS cluster into a supercluster.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Gateway {
    /// How remotes are rendered: `Explicit` (every remote, reject_unknown on) or `Gossip` (remotes
    /// as seeds, reject_unknown off; gossip completes the mesh).
    pub discovery: GatewayDiscovery,
    /// Every member of the supercluster, this NATS cluster's own entry included (skipped when
    /// rendered); the same list in every member. Any change restarts the servers.
    #[x_kube(
        validation = Rule::new("size(self) >= 1").message("spec.gateway.remotes must list at least one member of the supercluster"),
        merge_strategy = ListMerge::Map(vec!["name".into()]),
    )]
    #[schemars(length(max = 64))]
    pub remotes: Vec<GatewayRemote>,
    /// TLS on the gateway listener, verifying peers both ways against the Secret's `ca.crt`.
    /// Omitted, the NatsCluster is refused (GatewayWithoutTLS) unless the cluster controller runs
    /// with --allow-gateway-without-tls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,
    /// Template of the external gateway Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceTemplate>,
    /// The host:port the servers advertise for gateway connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub advertise: Option<String>,
}

/// How gateway remotes are rendered.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum GatewayDiscovery {
    /// Every remote rendered, unknown gateways rejected.
    Explicit,
    /// Remotes rendered as seeds, unknown gateways accepted; gossip completes the mesh.
    Gossip,
}

/// One member of a supercluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayRemote {
    /// The member's gateway name: its NatsCluster's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Where the member's gateway is dialled, such as `nats://west-gw.example.com:7222`.
    #[schemars(length(min = 1, max = 2048))]
    pub url: String,
}

/// The template of an external Service (gateway or leafnode listener).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(
    validation = Rule::new("!has(self.loadBalancerSourceRanges) || (has(self.type) && self.type == 'LoadBalancer')")
        .message("loadBalancerSourceRanges is set only with type LoadBalancer"),
    validation = Rule::new("!has(self.loadBalancerClass) || (has(self.type) && self.type == 'LoadBalancer')")
        .message("loadBalancerClass is set only with type LoadBalancer"),
    validation = Rule::new("!(has(self.type) && self.type == 'LoadBalancer' && has(oldSelf.type) && oldSelf.type == 'LoadBalancer') || (has(self.loadBalancerClass) == has(oldSelf.loadBalancerClass) && (!has(self.loadBalancerClass) || self.loadBalancerClass == oldSelf.loadBalancerClass))")
        .message("loadBalancerClass is immutable while the Service is of type LoadBalancer"),
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceTemplate {
    /// Type of the Service: `ClusterIP` when omitted, `NodePort` or `LoadBalancer`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::common::optional_enum_field)]
    pub type_: Option<ServiceType>,
    /// Annotations set on the Service, such as a cloud load balancer's settings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// CIDRs admitted by the cloud load balancer; only with type LoadBalancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(r, isCIDR(r))").message("every loadBalancerSourceRanges entry must be a CIDR such as 10.0.0.0/8"))]
    #[schemars(length(max = 64), inner(length(max = 64)))]
    pub load_balancer_source_ranges: Option<Vec<String>>,
    /// The load balancer implementation; only with type LoadBalancer, and immutable while it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub load_balancer_class: Option<String>,
}

/// The type of a rendered external Service.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ServiceType {
    /// Reachable inside the Kubernetes cluster only.
    ClusterIP,
    /// Exposed on a port of every node.
    NodePort,
    /// Exposed through a cloud load balancer.
    LoadBalancer,
}

/// The hub side of leaf connections.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Leafnodes {
    /// TLS on the leafnode listener; omitted, leaf connections run in the clear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,
    /// Template of the external leafnode Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceTemplate>,
    /// The host:port the servers advertise for leaf connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub advertise: Option<String>,
}

/// A hub this NATS cluster dials as a leaf, and the local account the connection binds. With
/// neither localAccountTrustRef nor localSystemAccount it binds the global account.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new("!(has(self.localAccountTrustRef) && has(self.localSystemAccount) && self.localSystemAccount)")
    .message("a leafRemotes entry sets at most one of localAccountTrustRef and localSystemAccount"))]
#[serde(rename_all = "camelCase")]
pub struct LeafRemote {
    /// The NatsConnection holding the hub's URL, CA and credentials; another namespace's only where
    /// a NatsReferenceGrant there admits it.
    pub connection_ref: ObjectReference,
    /// The NatsAccountTrust of the local account the remote binds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_account_trust_ref: Option<ObjectReference>,
    /// Binds the remote to this NATS cluster's system account; the hub-side user must then be a
    /// user of the hub's system account.
    #[serde(default, skip_serializing_if = "is_false")]
    pub local_system_account: bool,
}

/// Steers a NATS cluster's one-server-at-a-time rollout.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// Stops a rollout before its next step; a removal once begun is carried through.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
}
