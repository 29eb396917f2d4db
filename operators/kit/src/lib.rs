//! Controller plumbing shared by the three controllers: conditions, status written by server-side
//! apply, the finalizer split, NatsReferenceGrant admission, events, metrics, the reconcile span
//! and the error backoff.

pub mod backoff;
pub mod conditions;
pub mod events;
pub mod finalizer;
pub mod grants;
pub mod metrics;
pub mod relist;
pub mod start;
pub mod status;
pub mod trace;
