//! The JetStream controller against real nats-servers, through a real kube-apiserver where a test
//! needs one.

#[path = "../common/mod.rs"]
mod common;

mod api_binary;
mod api_blackhole;
mod api_disconnected;
mod api_live;
mod api_replicas;
mod api_scope;
mod live_balancer;
mod live_balancer_abandon;
mod live_balancer_account;
mod live_balancer_consumer;
mod live_configs;
mod live_connection;
mod live_divergence;
mod live_evacuation;
mod live_partial;
mod live_placement;
mod live_placement_account;
mod live_tarpit;
mod live_tenant_cost;
mod live_transfer;
