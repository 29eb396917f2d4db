//! The Kubernetes shell of the JetStream controller: one kube-rs `Controller` per kind
//! (NatsConnection, NatsStream, NatsConsumer, NatsKeyValue, NatsObjectStore,
//! NatsClusterEvacuation, NatsSystemBalancer, NatsBalancer), each run by the
//! kit's skeleton (`controller_kit::reconcile::run`) and, but for NatsConnection, under its
//! finalizer path (`controller_kit::finalizer::reconcile`). A pass gathers its inputs (the
//! resource, its NatsConnection through the pool, grants, the server object), asks the pure core
//! what to do, carries it out on the server and writes status by server-side apply; each pass is
//! a list of phases, written out in the module doc of [`objects`] and [`consumer`].
//!
//! A NATS failure, a refusal or a missing reference is reported as a condition and requeued; only
//! a failure to reach the Kubernetes API, or a deletion's cleanup that cannot finish, is an error
//! (retried with backoff). Nothing crashes the loop.
//!
//! Files: `context` (Context, Settings), `error` (Error), `outcome` (what a pass decided, how a
//! pass stops short), `write_status` (a pass's status written), `reach` (the NatsConnection
//! reached), `stream_backed` (the kinds that are one stream), `objects`, `consumer`, `connection`,
//! `evacuation`, `system_balancer` and `balancer` (the passes and their Controllers, a file per
//! phase beside each), `moves` (what those three share), `under_finalizer` (their pass on the
//! finalizer path, and the consumers').

mod balancer;
mod census;
mod connection;
mod connection_shares;
mod consumer;
mod context;
mod error;
mod evacuation;
mod in_use;
mod index;
mod lock;
mod moves;
mod objects;
mod outcome;
mod reach;
mod replica_divergence;
mod requests;
mod share;
mod stream_backed;
mod system_balancer;
mod torn_down;
mod under_finalizer;
mod write_status;

use std::sync::Arc;

pub use connection_shares::{Shares, share_of};
pub use context::{Context, DEFAULT_RESYNC, Settings, WAIT_RETRY, context};
pub use error::Error;
pub use in_use::{DELETION_POLICY_NOT_RUN, IN_USE_FINALIZER};
pub use stream_backed::StreamBacked;

/// Runs every controller of the JetStream controller until they end (they run forever).
pub async fn run(ctx: Arc<Context>) {
    futures::join!(
        connection::controller(ctx.clone()),
        objects::controller::<nats_api::jetstream::NatsStream>(ctx.clone()),
        objects::controller::<nats_api::jetstream::NatsKeyValue>(ctx.clone()),
        objects::controller::<nats_api::jetstream::NatsObjectStore>(ctx.clone()),
        consumer::controller(ctx.clone()),
        evacuation::controller(ctx.clone()),
        system_balancer::controller(ctx.clone()),
        balancer::controller(ctx.clone()),
    );
}
