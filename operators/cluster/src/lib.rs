//! The cluster controller: a NatsCluster becomes running NATS servers.
//!
//! The pure core — rendering a server's nats.conf, deciding reload or restart — lives in
//! [`render`] and [`apply_mode`]; the shells that talk to Kubernetes and to NATS call it.

pub mod apply_mode;
pub mod local_layout;
pub mod objects;
pub mod plan;
pub mod quantity;
pub mod refusals;
pub mod render;
pub mod route_ca;
