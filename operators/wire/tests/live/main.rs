//! The wire against real nats-servers: a cluster, operator mode, a supercluster, TLS.

#[path = "../common/mod.rs"]
mod common;

mod live_cluster;
mod live_operator;
mod live_supercluster;
mod live_tls;
