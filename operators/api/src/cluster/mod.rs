//! `cluster.nats.mikluko.io`: NatsCluster, a NATS cluster the cluster controller deploys, one
//! StatefulSet per server.
//!
//! The spec lives here and in files by part — what each server runs with (`workload`), its
//! listeners' certificates (`tls`), its auth plane (`auth`), its gateway and leaf links (`links`),
//! all re-exported here — the status in [`status`], the condition vocabulary in [`condition`] and
//! [`reason`], and the names of the objects a NatsCluster renders in [`names`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod auth_plane;
mod links;
pub mod reason;
pub mod status;
mod tls;
mod workload;

pub use auth_plane::*;
pub use links::*;
pub use status::*;
pub use tls::*;
pub use workload::*;

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

pub(crate) fn default_true() -> bool {
    true
}

pub(crate) fn is_false(b: &bool) -> bool {
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

    /// The number of servers, 1 to 64. Lowering it removes the servers beyond it one at a time,
    /// highest ordinal first, evacuating JetStream first. At most 64: the servers of one NATS
    /// cluster route to each other in a full mesh (64 servers already hold about 6,000 route
    /// connections with the default route pool) and all take part in the JetStream meta group,
    /// so a larger system is a supercluster of gateways; the bound stops a typo (`1000` for
    /// `10`) from asking for a thousand pods and volumes.
    #[x_kube(validation = Rule::new("self >= 1").message("spec.replicas must be at least 1"))]
    #[schemars(range(max = 64))]
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

/// Steers a NATS cluster's one-server-at-a-time rollout.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// Stops a rollout before its next step; a removal once begun is carried through.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
}
