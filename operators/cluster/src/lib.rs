//! The cluster controller: a NatsCluster becomes running NATS servers.
//!
//! The pure core lives here: planning servers ([`plan`]), rendering a server's nats.conf
//! ([`render`]), a server's revision ([`revision`]), deciding reload or restart ([`apply_mode`], [`reload`]), rotated certificates
//! ([`certificate_reload`]), the Kubernetes objects a NatsCluster renders ([`objects`]), the
//! route CA ([`route_ca`]), what is refused ([`refusals`]), what the servers answered
//! ([`observation`]) and the conditions judged from it ([`conditions`]), the rollout
//! ([`rollout`]) and the deletion guard ([`deletion_guard`]). The shells call it: the reconciler
//! ([`controller`]), the server-lifecycle port ([`server_lifecycle`]: its Kubernetes
//! adapter lives here, the local one, nats-server processes, in the sim), and the NATS I/O
//! ([`nats`]).
//! [`objects::server_side_apply`] alone writes objects by server-side apply.

pub mod apply_mode;
pub mod certificate_reload;
pub mod conditions;
pub mod controller;
pub mod deletion_guard;
pub mod nats;
pub mod objects;
pub mod observation;
pub mod pace;
pub mod plan;
pub mod quantity;
pub mod refusals;
pub mod reload;
pub mod render;
pub mod revision;
pub mod rollout;
pub mod route_ca;
pub mod server_lifecycle;
