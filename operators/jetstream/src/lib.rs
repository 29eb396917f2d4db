//! The JetStream controller: streams, consumers, buckets, balancing, evacuation.
//!
//! The pure core comes first: spec ↔ server config mapping per kind, drift and the update/recreate
//! decision, the lifecycle policies (§6.3) and the ownership marker. Reconcilers feed it
//! observations and carry out what it decides.

pub mod balance;
pub mod consumer_config;
pub mod controller;
pub mod dialing;
pub mod divergence;
pub mod drift;
pub mod evacuation_rules;
pub mod jsapi;
pub mod kv_config;
pub mod late_init;
pub mod lease;
pub mod lifecycle_policies;
pub mod object_config;
pub mod ownership;
pub mod pace;
pub mod pool;
pub mod references;
pub mod server_config;
pub mod server_state;
pub mod stopped_status;
pub mod stream_config;
pub mod system_view;
pub mod transfer;
pub mod units;
