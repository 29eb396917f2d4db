//! The deletion of a NatsClusterEvacuation: every move it still has requested cancelled
//! (CANCEL_MOVE), its records in the controller and its gauges dropped.

use std::sync::Arc;

use controller_kit::finalizer::Cleanup;
use controller_kit::reconcile::describe;
use kube::ResourceExt;
use nats_api::jetstream::{NatsClusterEvacuation, event, metric};
use nats_wire::{Wire, WireError};

use super::super::context::Context;
use super::super::error::Error;
use super::super::lock::lock;
use super::super::reach::{connection_state, reach};
use super::KIND;
use crate::lifecycle_policies::ConnectionState;
use crate::references;

/// Deletion: every move still requested cancelled (CANCEL_MOVE), then the finalizer released.
/// A connection gone or no longer granted releases it without; one that cannot be reached, or
/// a cancellation that gets no answer, keeps it and is retried.
pub(super) async fn cleanup(
    obj: Arc<NatsClusterEvacuation>,
    ctx: Arc<Context>,
) -> Result<Cleanup, Error> {
    let obj = &*obj;
    let ns = obj.namespace().unwrap_or_default();
    let requested = obj
        .status
        .as_ref()
        .map(|s| s.requested.clone())
        .unwrap_or_default();
    let conn = references::absolute(&obj.spec.connection_ref, &ns);
    if !requested.is_empty() && connection_state(&ctx, obj, &conn).await? == ConnectionState::Usable
    {
        let client = reach(&ctx, obj, &conn, false)
            .await
            .map_err(|s| s.cleanup_error(obj))?;
        let wire = Wire::new(client);
        for r in &requested {
            match wire.account_stream_cancel_move(&r.account, &r.stream).await {
                Ok(_) => {
                    let message = format!(
                        "CANCEL_MOVE of stream {} of account {}: the evacuation was deleted",
                        r.stream, r.account
                    );
                    ctx.shared
                        .events
                        .publish(obj, false, event::MOVE_CANCELLED, message)
                        .await;
                }
                // Answered with an error: no move pending any more (done, or the stream gone).
                Err(WireError::JetStream { description, .. }) => {
                    tracing::info!(object = %describe(obj), stream = %r.stream,
                        "nothing to cancel: {description}");
                }
                Err(e) => {
                    return Err(Error::Cleanup {
                        object: describe(obj),
                        message: format!("CANCEL_MOVE of stream {}: {e}", r.stream),
                    });
                }
            }
        }
    }
    let m = &ctx.shared.metrics;
    let name = obj.name_any();
    let labels = [("namespace", ns.as_str()), ("name", name.as_str())];
    m.remove_gauge(metric::EVACUATION_REMAINING, &labels);
    m.remove_gauge(metric::EVACUATION_STALE_PLACEMENTS, &labels);
    m.forget(KIND, &ns, &name);
    lock(&ctx.moving.evacuations).remove(&describe(obj));
    lock(&ctx.moving.refused).remove(&describe(obj));
    ctx.moving.unsight(&describe(obj));
    ctx.census.forget(&describe(obj));
    Ok(Cleanup::Done)
}
