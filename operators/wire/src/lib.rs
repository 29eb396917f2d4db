//! NATS plumbing shared by the controllers: dialing a NatsConnection, typed $SYS.REQ.* and $JS.API.* requests.
//!
//! One async function per request the design names, each bounded by a timeout and failing with a
//! [`WireError`] that names the request and the server. Pings (`$SYS.REQ.SERVER.PING.<X>`) collect
//! every server's answer until a deadline or an expected count ([`Collect`]); the per-server forms
//! (`$SYS.REQ.SERVER.<id>.<X>`) address one server by its id.
//!
//! Response types carry only the fields the controllers read and ignore the rest, so a newer
//! server adding fields never breaks decoding.

mod dial;
mod error;
pub mod events;
pub mod jsapi;
pub mod monitor;
pub mod names;
mod request;
pub mod sys;

use std::time::Duration;

pub use dial::{ConnectionConfig, dial, preset_inbox_prefix};
pub use error::{DialError, WireError};
pub use request::{Collect, Failure, PingReplies, Reply};

use serde::{Deserialize, Serialize};

/// Timeout of a single request when the connection sets none.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A dialed connection and the request settings every typed request uses.
#[derive(Clone, Debug)]
pub struct Wire {
    client: async_nats::Client,
    request_timeout: Duration,
    js_api_prefix: String,
    /// Which connection this is: every [`Wire::new`] takes the next number.
    serial: u64,
    /// Counts the times the server this connection was on said it entered lame duck mode (a
    /// dialed connection only; see [`Wire::lame_duck_notices`]).
    lame_duck: Option<tokio::sync::watch::Receiver<u64>>,
    /// What went wrong since the connection was last up (a dialed connection only).
    trouble: Option<tokio::sync::watch::Receiver<Option<Trouble>>>,
}

/// What the client reported going wrong since its connection was last up: the latest
/// disconnect or error event, and when the first of them came. Cleared when it reconnects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trouble {
    /// The latest event, as async-nats words it ("disconnected", "client error: …").
    pub what: String,
    /// When the first event since the connection was up came.
    pub since: std::time::SystemTime,
}

/// The serial the next [`Wire::new`] takes.
static NEXT_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Wire {
    /// Wraps an already connected client (e.g. one a test dialed itself).
    pub fn new(client: async_nats::Client) -> Self {
        Wire {
            client,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            js_api_prefix: "$JS.API".to_string(),
            serial: NEXT_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            lame_duck: None,
            trouble: None,
        }
    }

    pub(crate) fn with_trouble(mut self, r: tokio::sync::watch::Receiver<Option<Trouble>>) -> Self {
        self.trouble = Some(r);
        self
    }

    /// What went wrong since the connection was last up, changing with every disconnect, error
    /// and reconnect; `None` for a client wrapped by [`Wire::new`] rather than dialed.
    pub fn trouble(&self) -> Option<tokio::sync::watch::Receiver<Option<Trouble>>> {
        self.trouble.clone()
    }

    pub(crate) fn with_lame_duck_notices(mut self, r: tokio::sync::watch::Receiver<u64>) -> Self {
        self.lame_duck = Some(r);
        self
    }

    /// Changes each time the server this connection is on tells it that it entered lame duck
    /// mode (an INFO the server sends its own clients; its `$SYS.SERVER.<id>.LAMEDUCK` event
    /// reaches only the clients of the other servers). `None` for a client wrapped by
    /// [`Wire::new`] rather than dialed.
    pub fn lame_duck_notices(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.lame_duck.clone()
    }

    /// Which connection this is: equal for clones of one [`Wire::new`] (whatever their request
    /// settings), different for another dial.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sends `$JS.API.*` requests to the JetStream domain `domain` (`$JS.<domain>.API.*`), as a
    /// hub addresses a leaf's own domain.
    pub fn with_js_domain(mut self, domain: &str) -> Self {
        self.js_api_prefix = format!("$JS.{domain}.API");
        self
    }

    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The `$JS.API` prefix requests go to (domain-qualified when set).
    pub fn js_api_prefix(&self) -> &str {
        &self.js_api_prefix
    }
}

/// Who answered: the `server` block every `$SYS` answer carries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerInfo {
    pub name: String,
    pub host: String,
    pub id: String,
    pub cluster: String,
    pub domain: String,
    #[serde(rename = "ver")]
    pub version: String,
    pub tags: Vec<String>,
    pub jetstream: bool,
    pub seq: u64,
}

impl ServerInfo {
    /// `name (id)` for messages.
    pub fn label(&self) -> String {
        if self.name.is_empty() || self.name == self.id {
            self.id.clone()
        } else {
            format!("{} ({})", self.name, self.id)
        }
    }
}

/// The filter every `$SYS.REQ.SERVER.PING.<X>` accepts: only servers matching it answer.
/// Matching is by substring unless `exact_match` is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServerFilter {
    #[serde(rename = "server_name", skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub exact_match: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
}

impl ServerFilter {
    /// Every server.
    pub fn all() -> Self {
        Self::default()
    }

    /// The servers of one NATS cluster, matched exactly (a balancer's Settled gate reads only its
    /// own NATS cluster).
    pub fn cluster(name: &str) -> Self {
        ServerFilter {
            cluster: name.to_string(),
            exact_match: true,
            ..Default::default()
        }
    }

    /// One server by name, matched exactly.
    pub fn server_name(name: &str) -> Self {
        ServerFilter {
            name: name.to_string(),
            exact_match: true,
            ..Default::default()
        }
    }

    /// Servers of a JetStream domain.
    pub fn domain(domain: &str) -> Self {
        ServerFilter {
            domain: domain.to_string(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_filter_serializes_to_empty_object() {
        assert_eq!(serde_json::to_string(&ServerFilter::all()).unwrap(), "{}");
    }

    #[test]
    fn cluster_filter_is_exact() {
        let v = serde_json::to_value(ServerFilter::cluster("east")).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"cluster": "east", "exact_match": true})
        );
    }

    #[test]
    fn server_info_tolerates_unknown_fields() {
        let s: ServerInfo = serde_json::from_str(
            r#"{"name":"n1","host":"0.0.0.0","id":"NABC","cluster":"c","ver":"2.15.1",
                "jetstream":true,"flags":3,"seq":7,"time":"2026-01-01T00:00:00Z","feature_flags":{}}"#,
        )
        .unwrap();
        assert_eq!(s.name, "n1");
        assert_eq!(s.version, "2.15.1");
        assert_eq!(s.label(), "n1 (NABC)");
    }
}
