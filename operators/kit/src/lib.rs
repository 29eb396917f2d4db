//! Controller plumbing shared by the three controllers, and the skeleton every controller is
//! built on: the run loop ([`reconcile`]: span, count, due skip, relist redrive, error policy
//! with the per-object [`backoff`]), the shared Context parts ([`context`]), the finalizer path
//! ([`finalizer`]), decided conditions ([`conditions`]), refusals ([`blocked`]) and the error
//! convention ([`error`]). Besides: status written by server-side apply, NatsReferenceGrant
//! admission, events, metrics, the reconcile span and the binaries' start: leader election on a
//! Lease ([`leader`]), the process the run loops obey ([`process_state`]), the probes ([`probes`]), the
//! metrics' serving certificate ([`tls`]), the graceful shutdown ([`start`]) and connections
//! shared by key, each dialed under its own lock with a backoff on failure ([`dials`]).

pub mod backoff;
pub mod blocked;
pub mod conditions;
pub mod context;
pub mod dials;
pub mod due;
pub mod echoes;
pub mod error;
pub mod events;
pub mod finalizer;
pub mod grants;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod object;
pub mod probes;
pub mod process_state;
pub mod ratelimit;
pub mod reconcile;
pub mod relist;
pub mod scope;
pub mod start;
pub mod status;
pub mod tls;
pub mod trace;
pub mod uninstall;
pub mod watch;
pub mod watched;
