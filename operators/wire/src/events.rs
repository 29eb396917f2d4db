//! The server events a controller listens to, rather than asks for. One so far: the event a
//! server sends as it shuts down (events.go shutdownEventSubj, sent from `shutdownEventing` on a
//! clean shutdown: SIGTERM, lame duck's end, SIGINT; never when the process is killed), which
//! tells a server that has stopped from one that is cut off.

use crate::{Wire, WireError};

/// `$SYS.SERVER.<id>.SHUTDOWN` of every server.
pub const SHUTDOWN_EVENTS: &str = "$SYS.SERVER.*.SHUTDOWN";

/// The server id a shutdown event's subject names; `None` for any other subject.
pub fn shutdown_server_id(subject: &str) -> Option<&str> {
    let id = subject
        .strip_prefix("$SYS.SERVER.")?
        .strip_suffix(".SHUTDOWN")?;
    (!id.is_empty() && !id.contains('.')).then_some(id)
}

impl Wire {
    /// Subscribes to every server's shutdown event. The subscription lives as long as the
    /// returned subscriber and this connection; the server refusing it (a permission the user
    /// lacks) arrives on the connection's error events, not here.
    pub async fn shutdown_events(&self) -> Result<async_nats::Subscriber, WireError> {
        self.client()
            .subscribe(SHUTDOWN_EVENTS)
            .await
            .map_err(|e| WireError::Send {
                request: SHUTDOWN_EVENTS.to_string(),
                server: None,
                reason: e.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::a_shutdown("$SYS.SERVER.NABC.SHUTDOWN", Some("NABC"))]
    #[case::statsz("$SYS.SERVER.NABC.STATSZ", None)]
    #[case::lame_duck("$SYS.SERVER.NABC.LAMEDUCK", None)]
    #[case::no_id("$SYS.SERVER..SHUTDOWN", None)]
    #[case::two_tokens("$SYS.SERVER.A.B.SHUTDOWN", None)]
    #[case::another_prefix("$SYS.ACCOUNT.NABC.SHUTDOWN", None)]
    fn shutdown_ids(#[case] subject: &str, #[case] id: Option<&str>) {
        assert_eq!(shutdown_server_id(subject), id);
    }
}
