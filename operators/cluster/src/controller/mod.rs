//! The cluster controller's reconciler, generic over the [`ServerLifecycle`] port: the binary
//! runs it with the Kubernetes implementation, the sim with its local one.
//!
//! It is built on the kit's skeleton: [`watch`] says what calls for a pass and hands the controller
//! to `controller_kit::reconcile::run` (a fresh read, the span, the count, the error policy);
//! [`reconcile`] runs under the kit's finalizer path (`controller_kit::finalizer`) and either
//! guards a deletion ([`deletion`]) or runs one pass ([`pass`]), whose phases have a file each:
//! [`gather`], [`observe_servers`], [`refuse`], [`plan_servers`], [`apply`] (with
//! [`listener_certificates`]), [`step_rollout`] (with [`restart`], [`remove_server`] and
//! [`push_rotated_certificates`]), [`judge`] and [`write_status`]; [`written`] is what the writes
//! came to. The rules the phases apply are pure and live outside the shell: [`crate::refusals`],
//! [`crate::plan`], [`crate::conditions`], [`crate::rollout`].
//!
//! A refusal, an object in the way or a failing port is a condition, retried with a backoff;
//! only a failure to reach the Kubernetes API or to write the finalizer is an [`Error`]. Nothing
//! crashes the loop. [`context`] is what every pass shares, the kit's `Shared` among it.
//!
//! [`ServerLifecycle`]: crate::server_lifecycle::ServerLifecycle

pub mod apply;
pub mod context;
pub mod deletion;
pub mod error;
pub mod gather;
pub mod gauges;
pub mod judge;
pub mod listener_certificates;
pub mod observe_servers;
pub mod pass;
pub mod plan_servers;
pub mod push_rotated_certificates;
pub mod read;
pub mod reconcile;
pub mod refuse;
pub mod remove_server;
pub mod restart;
pub mod step_rollout;
pub mod watch;
pub mod write_status;
pub mod written;

pub use context::{Context, RECHECK, RESYNC, Settings, context};
pub use error::Error;
pub use plan_servers::cluster_revision;
pub use watch::{refers_to, run, secrets_read};
