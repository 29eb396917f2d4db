//! The shutdown watch: every server's `$SYS.SERVER.<id>.SHUTDOWN`, heard over the connection the
//! passes dialed from `--system-connection`, recorded so the roster forgets a server that stopped
//! sooner than one that fell silent (see [`crate::roster`]). It never dials: it follows the
//! connection the passes hold, and subscribes again on each new one.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::Context;

/// How often the watch looks for a connection newly dialed by the passes.
const FOLLOW: Duration = Duration::from_secs(5);

/// Records every shutdown event heard, for the life of the process.
pub(crate) async fn shutdown_watch(ctx: Arc<Context>) {
    let Some(sc) = ctx.settings.system_connection.clone() else {
        return;
    };
    let key = format!("{}/{}", sc.namespace, sc.name);
    let mut tick = tokio::time::interval(FOLLOW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(wire) = ctx.system.held(&key) else {
            continue;
        };
        let mut events = match wire.shutdown_events().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "shutdown events: not subscribed");
                continue;
            }
        };
        tracing::debug!(
            serial = wire.serial(),
            "shutdown events: subscribed on the system connection"
        );
        // Heard until the passes hold another connection (or none).
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(m) => heard(&ctx, m.subject.as_str()),
                    None => break,
                },
                _ = tick.tick() => {
                    if ctx.system.held(&key).map(|w| w.serial()) != Some(wire.serial()) {
                        break;
                    }
                }
            }
        }
    }
}

/// One event heard: its server id recorded for the roster.
fn heard(ctx: &Context, subject: &str) {
    let Some(id) = nats_wire::events::shutdown_server_id(subject) else {
        return;
    };
    tracing::info!(
        server_id = id,
        "a server announced its shutdown: the roster forgets it after {:?} of silence",
        crate::roster::FORGET_SHUT_DOWN_AFTER
    );
    ctx.shut_down
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id.to_string(), super::time::unix_now());
}
