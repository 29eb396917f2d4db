//! The cluster controller: a NatsCluster becomes running NATS servers.
//!
//! The pure core — planning servers ([`plan`]), rendering a server's nats.conf ([`render`]),
//! deciding reload or restart ([`apply_mode`]), the Kubernetes objects a NatsCluster renders
//! ([`objects`]), the route CA ([`route_ca`]), what is refused ([`refusals`]) and how the system
//! connection dials ([`system_connection`]) — lives here; the shells that talk to Kubernetes and
//! to NATS call it. The servers are reached through the [`lifecycle`] port only; its Kubernetes
//! adapter lives here, the local one (nats-server processes) in the sim.

pub mod apply_mode;
pub mod certificate_reload;
pub mod controller;
pub mod deletion_guard;
pub mod lifecycle;
pub mod objects;
pub mod plan;
pub mod quantity;
pub mod refusals;
pub mod reload;
pub mod render;
pub mod revision;
pub mod rollout;
pub mod route_ca;
pub mod system_connection;
