//! The cluster controller: a NatsCluster becomes running NATS servers.
//!
//! The pure core — planning servers ([`plan`], [`local_layout`] for the sim's local servers),
//! rendering a server's nats.conf ([`render`]), deciding reload or restart ([`apply_mode`]), the
//! Kubernetes objects a NatsCluster renders ([`objects`]), the route CA ([`route_ca`]), what is
//! refused ([`refusals`]) — lives here; the shells that talk to Kubernetes ([`controller`],
//! [`lifecycle`]) and to NATS ([`nats`]) call it.

pub mod apply_mode;
pub mod certificate_reload;
pub mod conditions;
pub mod controller;
pub mod deletion_guard;
pub mod lifecycle;
pub mod local_layout;
pub mod nats;
pub mod objects;
pub mod observation;
pub mod plan;
pub mod quantity;
pub mod refusals;
pub mod reload;
pub mod render;
pub mod revision;
pub mod rollout;
pub mod route_ca;
