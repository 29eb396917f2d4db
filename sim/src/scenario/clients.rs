//! The `clients:` of a scenario as declared ([`ClientDecl`]) and as reported ([`ClientReport`]):
//! core-NATS clients connected with creds the auth controller wrote, each publishing at a set
//! rate and recording when the server closed its connection. `client_run` runs them.

use serde::{Deserialize, Serialize};

/// A client of the scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientDecl {
    pub name: String,
    /// The creds Secret: `Secret/<name>` (namespace `nats`) or `Secret/<namespace>/<name>`.
    pub creds: String,
    /// The key of the creds file in the Secret.
    #[serde(default = "default_creds_key")]
    pub key: String,
    /// The subject it publishes to.
    pub subject: String,
    /// Messages per second.
    pub rate: u32,
    /// The one server it connects to (a name, `c1-0`), ignoring the servers it learns of; by
    /// default any hub server. A scenario that pauses a server pins its clients to another, so
    /// a connection closed is the server's doing, not a stalled socket.
    #[serde(default)]
    pub server: Option<String>,
}

fn default_creds_key() -> String {
    "user.creds".into()
}

/// What a client did, for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientReport {
    pub name: String,
    /// The user's public key (the subject of its JWT).
    pub user: String,
    pub server: Option<String>,
    pub connected_at_ms: Option<u64>,
    pub published: u64,
    pub publish_errors: u64,
    /// When the server closed the connection (ms since the run began).
    pub closed_at_ms: Option<u64>,
    /// The last error the server sent before it closed the connection, if any.
    pub closed_because: Option<String>,
    /// Reconnects after the close the servers refused.
    pub refused_reconnects: u64,
}

impl ClientReport {
    /// One line for the summary.
    pub fn summary(&self) -> String {
        let closed = match self.closed_at_ms {
            Some(at) => format!(
                "closed by the server at {:.1} s{}, {} reconnect(s) refused",
                at as f64 / 1000.0,
                self.closed_because
                    .as_ref()
                    .map(|b| format!(" ({b})"))
                    .unwrap_or_default(),
                self.refused_reconnects
            ),
            None => "still connected at the end".into(),
        };
        format!(
            "client {}{}: published {} ({} errors), {closed}",
            self.name,
            self.server
                .as_ref()
                .map(|s| format!(" on {s}"))
                .unwrap_or_default(),
            self.published,
            self.publish_errors
        )
    }
}
