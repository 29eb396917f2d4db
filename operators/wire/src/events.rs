//! The server events a controller listens to, rather than asks for: a server announcing its
//! shutdown. A server stopped cleanly says so twice: `$SYS.SERVER.<id>.LAMEDUCK` as lame duck
//! mode starts (events.go lameDuckEventSubj: what a pod's preStop does, while the server and its
//! routes are still up) and `$SYS.SERVER.<id>.SHUTDOWN` as it shuts down (shutdownEventSubj,
//! from `shutdownEventing`, also without lame duck: SIGTERM, SIGINT). A server killed, paused or
//! cut off says neither, which is what tells a server that stopped from one that fell silent.
//! When a whole NATS cluster goes at once its SHUTDOWN events may reach nobody (every server is
//! closing its clients), while the LAMEDUCK events went out with everything still up.

use futures::StreamExt;
use futures::stream::BoxStream;

use crate::{Wire, WireError};

/// `$SYS.SERVER.<id>.LAMEDUCK` of every server.
pub const LAME_DUCK_EVENTS: &str = "$SYS.SERVER.*.LAMEDUCK";
/// `$SYS.SERVER.<id>.SHUTDOWN` of every server.
pub const SHUTDOWN_EVENTS: &str = "$SYS.SERVER.*.SHUTDOWN";

/// The server id a lame duck or shutdown event's subject names; `None` for any other subject.
pub fn shutdown_server_id(subject: &str) -> Option<&str> {
    let rest = subject.strip_prefix("$SYS.SERVER.")?;
    let id = rest
        .strip_suffix(".SHUTDOWN")
        .or_else(|| rest.strip_suffix(".LAMEDUCK"))?;
    (!id.is_empty() && !id.contains('.')).then_some(id)
}

impl Wire {
    /// Subscribes to every server's lame duck and shutdown events, as one stream of messages. The
    /// subscriptions live as long as the stream and this connection; the server refusing them (a
    /// permission the user lacks) arrives on the connection's error events, not here.
    pub async fn shutdown_events(
        &self,
    ) -> Result<BoxStream<'static, async_nats::Message>, WireError> {
        let subscribe = async |subject: &str| {
            self.client()
                .subscribe(subject.to_string())
                .await
                .map_err(|e| WireError::Send {
                    request: subject.to_string(),
                    server: None,
                    reason: e.to_string(),
                })
        };
        let lame_duck = subscribe(LAME_DUCK_EVENTS).await?;
        let shutdown = subscribe(SHUTDOWN_EVENTS).await?;
        Ok(futures::stream::select(lame_duck, shutdown).boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::a_shutdown("$SYS.SERVER.NABC.SHUTDOWN", Some("NABC"))]
    #[case::lame_duck("$SYS.SERVER.NABC.LAMEDUCK", Some("NABC"))]
    #[case::statsz("$SYS.SERVER.NABC.STATSZ", None)]
    #[case::no_id("$SYS.SERVER..SHUTDOWN", None)]
    #[case::two_tokens("$SYS.SERVER.A.B.SHUTDOWN", None)]
    #[case::another_prefix("$SYS.ACCOUNT.NABC.SHUTDOWN", None)]
    fn shutdown_ids(#[case] subject: &str, #[case] id: Option<&str>) {
        assert_eq!(shutdown_server_id(subject), id);
    }
}
