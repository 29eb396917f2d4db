//! The local server lifecycle's log: every [`LocalEvent`] of every server, in order.

use std::sync::{Arc, Mutex};

use crate::server::events::{LocalEvent, ServerLifecycleEvent};

/// The log every clone of a server lifecycle and every server entry appends to.
pub(super) type EventLog = Arc<Mutex<Vec<ServerLifecycleEvent>>>;

pub(super) fn log(events: &EventLog, server: &str, event: LocalEvent, revision: Option<&str>) {
    events
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(ServerLifecycleEvent {
            at: std::time::Instant::now(),
            server: server.to_string(),
            event,
            revision: revision.map(str::to_string),
        });
}

/// Every event so far, in order.
pub(super) fn all(events: &EventLog) -> Vec<ServerLifecycleEvent> {
    events.lock().unwrap_or_else(|p| p.into_inner()).clone()
}
