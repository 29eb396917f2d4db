//! The simulation rig: real nats-server topologies, faults, traffic ledger, scenarios.

pub mod apiserver;
