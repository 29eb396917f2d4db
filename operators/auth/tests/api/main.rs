//! The auth controller's API tier: a real kube-apiserver 1.20 (each test its own) and the
//! controller in-process or as its binary, without NATS: keys, signing, refusals, stories.

#[path = "../apirig/mod.rs"]
mod apirig;

mod api_binary;
mod api_refusals;
mod api_replicas;
mod api_signing;
mod api_stories;
