//! The simulation rig: real nats-server topologies, faults, traffic ledger, scenarios.
//!
//! A library first: tests, scenarios and the `sim` CLI use the same builders.

pub mod config;
pub mod install;
pub mod ports;
pub mod proxy;
pub mod server;
pub mod topology;
pub mod wait;

pub use topology::{Auth, GatewayMode, OperatorMode, Topology, TopologySpec};

/// The name the issue uses for a single-cluster topology.
pub type Cluster = Topology;

pub mod apiserver;
