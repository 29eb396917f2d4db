//! Errors of the wire layer. Every variant names the request (its subject) and, where one server is
//! addressed or answered, that server, so a condition message built from it says what failed where.

use std::time::Duration;

/// Dialing a NatsConnection-shaped config failed.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("dialing {servers:?}: the connection names no server")]
    NoServers { servers: Vec<String> },
    #[error("dialing {servers:?}: the credentials are not a valid creds file: {source}")]
    InvalidCredentials {
        servers: Vec<String>,
        #[source]
        source: std::io::Error,
    },
    #[error("dialing {servers:?}: the CA bundle holds no usable certificate: {reason}")]
    InvalidCa {
        servers: Vec<String>,
        reason: String,
    },
    #[error("dialing {servers:?}: {source}")]
    Connect {
        servers: Vec<String>,
        #[source]
        source: async_nats::ConnectError,
    },
    #[error("dialing {servers:?}: no connection within {after:?}")]
    Timeout {
        servers: Vec<String>,
        after: Duration,
    },
}

/// A request over the system account or the JetStream API failed.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Nobody answered within the request's timeout.
    #[error("{request}{}: no answer within {after:?}", on(.server))]
    Timeout {
        request: String,
        server: Option<String>,
        after: Duration,
    },
    /// The server reported no subscriber for the subject: the request is unknown to it, the
    /// caller's account cannot reach it (not the system account), or the addressed server is gone.
    #[error("{request}{}: no responders", on(.server))]
    NoResponders {
        request: String,
        server: Option<String>,
    },
    /// Sending the request failed on the client side.
    #[error("{request}{}: sending failed: {reason}", on(.server))]
    Send {
        request: String,
        server: Option<String>,
        reason: String,
    },
    /// The answer was not the JSON the request promises.
    #[error("{request}{}: undecodable answer ({source}): {body}", on(.server))]
    Decode {
        request: String,
        server: Option<String>,
        body: String,
        #[source]
        source: serde_json::Error,
    },
    /// The server answered with an error: a `$SYS.REQ.*` answer's `error`, e.g. a RELOAD of a
    /// restart-only change, or a KICK of an unknown client id.
    #[error("{request} on server {server}: refused ({code}): {description}")]
    Refused {
        request: String,
        server: String,
        code: i64,
        description: String,
    },
    /// A `$JS.API.*` answer carried an error.
    #[error("{request}{}: JetStream error {code}/{err_code}: {description}", on(.server))]
    JetStream {
        request: String,
        server: Option<String>,
        code: i64,
        err_code: u64,
        description: String,
    },
}

impl WireError {
    /// The request (subject) this error is about.
    pub fn request(&self) -> &str {
        match self {
            WireError::Timeout { request, .. }
            | WireError::NoResponders { request, .. }
            | WireError::Send { request, .. }
            | WireError::Decode { request, .. }
            | WireError::Refused { request, .. }
            | WireError::JetStream { request, .. } => request,
        }
    }

    /// The server this error names, when one was addressed or answered.
    pub fn server(&self) -> Option<&str> {
        match self {
            WireError::Refused { server, .. } => Some(server),
            WireError::Timeout { server, .. }
            | WireError::NoResponders { server, .. }
            | WireError::Send { server, .. }
            | WireError::Decode { server, .. }
            | WireError::JetStream { server, .. } => server.as_deref(),
        }
    }
}

fn on(server: &Option<String>) -> String {
    match server {
        Some(s) => format!(" on server {s}"),
        None => String::new(),
    }
}

/// Keeps an undecodable body short enough for a log line or a condition message.
pub(crate) fn excerpt(body: &[u8]) -> String {
    const MAX: usize = 512;
    let text = String::from_utf8_lossy(body);
    if text.len() <= MAX {
        text.into_owned()
    } else {
        let mut end = MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &text[..end])
    }
}
