//! The simulation rig: real nats-server topologies, faults, traffic ledger, scenarios.
//!
//! A library first: tests, scenarios and the `sim` CLI use the same builders.

pub mod backend;
pub mod checkout;
#[cfg(feature = "kube")]
pub mod control_plane;
#[cfg(feature = "kube")]
pub mod controlled;
pub mod duration;
#[cfg(feature = "kube")]
pub mod elected;
pub mod ensure;
pub mod install;
#[cfg(feature = "k3s")]
pub mod k3s;
#[cfg(feature = "k3s")]
pub mod k3s_cluster;
#[cfg(feature = "kube")]
pub mod k3s_outside;
#[cfg(feature = "kube")]
pub mod kube_backend;
#[cfg(test)]
mod layers;
pub mod ledger;
#[cfg(feature = "kube")]
pub mod local;
pub mod monitored;
pub mod nats_conf;
#[cfg(feature = "kube")]
pub mod node;
pub mod ports;
pub mod proxy;
pub mod scenario;
pub mod server;
#[cfg(feature = "kube")]
pub mod testkit;
pub mod timings;
pub mod topology;
pub mod traffic;
pub mod trust;
#[cfg(feature = "kube")]
pub mod up;
pub mod wait;

pub use topology::{Auth, GatewayMode, OperatorMode, Topology, TopologySpec};

/// The name the issue uses for a single-cluster topology.
pub type Cluster = Topology;

#[cfg(feature = "kube")]
pub mod apiserver;
