//! What happened to a server under a server lifecycle (the local one, or the node's pods): every
//! start, lame duck, restart, revival and delete, for the sim's timeline and its restart order.

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
