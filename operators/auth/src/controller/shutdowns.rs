//! The shutdown watch: every server's `$SYS.SERVER.<id>.LAMEDUCK` and `.SHUTDOWN`, heard over
//! the connection the passes dialed from `--system-connection`, recorded so the roster forgets a
//! server that stopped sooner than one that fell silent (see [`crate::roster`]). It never dials:
//! it follows the connection the passes hold, and subscribes again on each new one.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::Context;

/// How often the watch looks for a connection newly dialed by the passes (a lookup in memory):
/// an announcement made before the watch subscribed is missed.
const FOLLOW: Duration = Duration::from_secs(1);

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
        // The server this connection is on announces its lame duck mode to the other servers'
        // clients, and to this one only by the INFO it sends its own.
        let mut notices = wire.lame_duck_notices();
        if let Some(r) = notices.as_mut() {
            // Only notices from here on: one before was for a server since left behind.
            r.borrow_and_update();
        }
        // Heard until the passes hold another connection (or none).
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(m) => {
                        if let Some(id) = nats_wire::events::shutdown_server_id(m.subject.as_str()) {
                            heard(&ctx, id);
                        }
                    }
                    None => break,
                },
                notice = lame_duck_notice(&mut notices) => {
                    if notice {
                        heard(&ctx, &wire.client().server_info().server_id);
                    } else {
                        notices = None;
                    }
                }
                _ = tick.tick() => {
                    if ctx.system.held(&key).map(|w| w.serial()) != Some(wire.serial()) {
                        break;
                    }
                }
            }
        }
    }
}

/// The next lame duck notice of the connection's own server (false: there will be none).
async fn lame_duck_notice(notices: &mut Option<tokio::sync::watch::Receiver<u64>>) -> bool {
    match notices {
        Some(r) => r.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

/// One server heard announcing its shutdown: its id recorded for the roster.
fn heard(ctx: &Context, id: &str) {
    if id.is_empty() {
        return;
    }
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
