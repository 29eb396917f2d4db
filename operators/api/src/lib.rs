//! Every CRD type of the four API groups (`nats`, `cluster`, `auth`, `jetstream` under `nats.mikluko.io`),
//! their CEL rules and their condition vocabulary.
//!
//! The types are the API: the CRD YAML under `deploy/crds/` is generated from them by `crdgen`,
//! and the story manifests under `docs/stories/` are decoded strictly into them by tests.

// `#[kube(printcolumn(...))]` repeats `type_ = "string"` once per column, which clippy mistakes
// for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]
// Doc comments become the CRD descriptions `kubectl explain` shows: every public item has one.
#![warn(missing_docs)]

pub mod auth;
#[cfg(feature = "cel-cases")]
pub mod cel_cases;
pub mod cluster;
pub mod common;
pub mod crds;
pub mod jetstream;
pub mod nats;
pub mod quantity;

/// The API version every group serves.
pub const VERSION: &str = "v1beta1";
