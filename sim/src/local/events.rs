//! The local server lifecycle's log: every start, lame duck, restart, revival and delete of a server,
//! in order, for the sim's timeline and its restart order.

use std::sync::{Arc, Mutex};

/// What happened to a server, for the sim's timeline and its restart order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalEvent {
    /// First start (or a start after a delete).
    Started,
    /// Put in lame duck to restart under a new revision or binary.
    LameDuck,
    /// Started again under the new revision after the lame-duck exit.
    Restarted,
    /// Started again after it died on its own (the kubelet's restart).
    Revived,
    /// Stopped and deleted.
    Deleted,
    /// Its config rewritten with no restart: what the controller does before it asks the
    /// server to reload.
    ConfigWritten,
}

/// One [`LocalEvent`] of server `server` (its server name) at `at`.
#[derive(Clone, Debug)]
pub struct ServerLifecycleEvent {
    pub at: std::time::Instant,
    pub server: String,
    pub event: LocalEvent,
    /// The revision the server runs (or is to run) after the event, where the event knows it.
    pub revision: Option<String>,
}

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
