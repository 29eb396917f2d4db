//! A NatsCluster's links to other NATS clusters: its gateway into a supercluster, its leafnode
//! listener for leaf nodes, the hubs it dials as a leaf, and the external Services they use.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::is_false;
use super::tls::ListenerTls;
use crate::common::ObjectReference;

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
