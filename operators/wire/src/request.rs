//! The two shapes every request takes: one request answered once (with a timeout), and a ping
//! answered by every server (collected until a deadline or an expected count).

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::excerpt;
use crate::{ServerInfo, Wire, WireError};

/// How long a ping collects answers, and how many it expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Collect {
    /// Stop collecting after this long.
    pub deadline: Duration,
    /// Stop as soon as this many servers answered (e.g. the size of the STATSZ roster).
    pub expect: Option<usize>,
}

impl Collect {
    /// Collect until `deadline`.
    pub fn until(deadline: Duration) -> Self {
        Collect {
            deadline,
            expect: None,
        }
    }

    /// Collect until `count` servers answered, or `deadline`.
    pub fn expecting(count: usize, deadline: Duration) -> Self {
        Collect {
            deadline,
            expect: Some(count),
        }
    }
}

impl Default for Collect {
    fn default() -> Self {
        Collect::until(Duration::from_secs(2))
    }
}

/// One server's answer.
#[derive(Clone, Debug)]
pub struct Reply<T> {
    pub server: ServerInfo,
    pub data: T,
}

/// A failed answer to a ping: the error names the server when it said who it is.
pub type Failure = WireError;

/// Every answer a ping collected.
#[derive(Debug)]
pub struct PingReplies<T> {
    /// The subject the ping went to.
    pub request: String,
    /// Answers carrying data.
    pub replies: Vec<Reply<T>>,
    /// Answers carrying an error, or not decodable; each names its server where it could.
    pub failures: Vec<Failure>,
    /// The expected count the ping was sent with.
    pub expected: Option<usize>,
}

impl<T> PingReplies<T> {
    /// How many servers answered, with data or an error.
    pub fn answered(&self) -> usize {
        self.replies.len() + self.failures.len()
    }

    /// Whether as many servers answered as expected (always true without an expectation).
    pub fn is_complete(&self) -> bool {
        self.expected.is_none_or(|n| self.answered() >= n)
    }

    /// The names of the servers that answered with data, sorted.
    pub fn server_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.replies.iter().map(|r| r.server.name.clone()).collect();
        names.sort();
        names
    }

    /// The answer of the server named `name`.
    pub fn from_server(&self, name: &str) -> Option<&Reply<T>> {
        self.replies.iter().find(|r| r.server.name == name)
    }
}

/// The error block of a `$SYS.REQ.*` answer.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SysError {
    pub code: i64,
    pub description: String,
}

/// A `$SYS.REQ.*` answer: who answered, and data or an error. STATSZ puts its data under
/// `statsz`, the rest under `data`.
#[derive(Debug, Deserialize)]
pub(crate) struct Envelope<T> {
    #[serde(default)]
    pub server: Option<ServerInfo>,
    #[serde(default = "none", alias = "statsz")]
    pub data: Option<T>,
    #[serde(default)]
    pub error: Option<SysError>,
}

fn none<T>() -> Option<T> {
    None
}

/// Renders a request body: an empty body for `{}`-equivalent options, JSON otherwise.
pub(crate) fn json_body<B: serde::Serialize>(body: &B) -> Bytes {
    match serde_json::to_vec(body) {
        Ok(v) if v == b"{}" || v == b"null" => Bytes::new(),
        Ok(v) => Bytes::from(v),
        // Serializing plain option structs cannot fail; an empty body asks for defaults.
        Err(_) => Bytes::new(),
    }
}

impl Wire {
    /// One request, one answer, within the request timeout. `server` names the addressed server
    /// for errors.
    pub(crate) async fn request_raw(
        &self,
        subject: &str,
        payload: Bytes,
        server: Option<&str>,
    ) -> Result<Bytes, WireError> {
        self.request_raw_within(subject, payload, server, self.request_timeout)
            .await
    }

    pub(crate) async fn request_raw_within(
        &self,
        subject: &str,
        payload: Bytes,
        server: Option<&str>,
        timeout: Duration,
    ) -> Result<Bytes, WireError> {
        use async_nats::RequestErrorKind;
        let request = async_nats::Request::new()
            .payload(payload)
            .timeout(Some(timeout));
        let answer = tokio::time::timeout(
            timeout + Duration::from_millis(250),
            self.client.send_request(subject.to_string(), request),
        )
        .await;
        match answer {
            Err(_) => Err(WireError::Timeout {
                request: subject.to_string(),
                server: server.map(str::to_string),
                after: timeout,
            }),
            Ok(Ok(msg)) => Ok(msg.payload),
            Ok(Err(e)) => match e.kind() {
                RequestErrorKind::TimedOut => Err(WireError::Timeout {
                    request: subject.to_string(),
                    server: server.map(str::to_string),
                    after: timeout,
                }),
                RequestErrorKind::NoResponders => Err(WireError::NoResponders {
                    request: subject.to_string(),
                    server: server.map(str::to_string),
                }),
                _ => Err(WireError::Send {
                    request: subject.to_string(),
                    server: server.map(str::to_string),
                    reason: e.to_string(),
                }),
            },
        }
    }

    /// One `$SYS.REQ.SERVER.<id>.<X>`-style request: decodes the envelope and turns an error
    /// answer into [`WireError::Refused`]. `Ok(None)` is a success without data (RELOAD, KICK).
    pub(crate) async fn sys_request<T: DeserializeOwned>(
        &self,
        subject: &str,
        payload: Bytes,
        server_id: &str,
    ) -> Result<Reply<Option<T>>, WireError> {
        let body = self.request_raw(subject, payload, Some(server_id)).await?;
        decode_envelope::<T>(subject, Some(server_id), &body)
    }

    /// A ping answered by every server: publishes once with a private inbox as reply subject and
    /// collects until the deadline or the expected count.
    pub(crate) async fn ping_raw(
        &self,
        subject: &str,
        payload: Bytes,
        collect: Collect,
    ) -> Result<Vec<Bytes>, WireError> {
        let send_err = |reason: String| WireError::Send {
            request: subject.to_string(),
            server: None,
            reason,
        };
        let until = tokio::time::Instant::now() + collect.deadline;
        let timed_out = || WireError::Timeout {
            request: subject.to_string(),
            server: None,
            after: collect.deadline,
        };
        // A dropped connection makes flush wait for a reconnect that may never come; the
        // request's own deadline bounds sending as well as collecting.
        let inbox = self.client.new_inbox();
        let send = async {
            let sub = self
                .client
                .subscribe(inbox.clone())
                .await
                .map_err(|e| send_err(e.to_string()))?;
            self.client
                .publish_with_reply(subject.to_string(), inbox, payload)
                .await
                .map_err(|e| send_err(e.to_string()))?;
            self.client
                .flush()
                .await
                .map_err(|e| send_err(e.to_string()))?;
            Ok::<_, WireError>(sub)
        };
        let mut sub = tokio::time::timeout_at(until, send)
            .await
            .map_err(|_| timed_out())??;
        let mut bodies = Vec::new();
        let mut no_responders = false;
        loop {
            if collect.expect.is_some_and(|n| bodies.len() >= n) {
                break;
            }
            match tokio::time::timeout_at(until, sub.next()).await {
                Err(_) | Ok(None) => break,
                Ok(Some(msg)) => {
                    if msg.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
                        no_responders = true;
                        break;
                    }
                    bodies.push(msg.payload);
                }
            }
        }
        // Best effort: the subscription goes away with `sub` either way.
        let _ = sub.unsubscribe().await;
        if bodies.is_empty() {
            return Err(if no_responders {
                WireError::NoResponders {
                    request: subject.to_string(),
                    server: None,
                }
            } else {
                WireError::Timeout {
                    request: subject.to_string(),
                    server: None,
                    after: collect.deadline,
                }
            });
        }
        Ok(bodies)
    }

    /// A ping whose answers are `$SYS` envelopes.
    pub(crate) async fn ping<T: DeserializeOwned>(
        &self,
        subject: &str,
        payload: Bytes,
        collect: Collect,
    ) -> Result<PingReplies<T>, WireError> {
        let bodies = self.ping_raw(subject, payload, collect).await?;
        let mut out = PingReplies {
            request: subject.to_string(),
            replies: Vec::new(),
            failures: Vec::new(),
            expected: collect.expect,
        };
        for body in bodies {
            match decode_envelope::<T>(subject, None, &body) {
                Ok(Reply {
                    server,
                    data: Some(data),
                }) => out.replies.push(Reply { server, data }),
                Ok(Reply { server, data: None }) => out.failures.push(WireError::Refused {
                    request: subject.to_string(),
                    server: server.label(),
                    code: 0,
                    description: "answer without data".to_string(),
                }),
                Err(e) => out.failures.push(e),
            }
        }
        Ok(out)
    }
}

pub(crate) fn decode_envelope<T: DeserializeOwned>(
    subject: &str,
    addressed: Option<&str>,
    body: &[u8],
) -> Result<Reply<Option<T>>, WireError> {
    let env: Envelope<T> = serde_json::from_slice(body).map_err(|source| WireError::Decode {
        request: subject.to_string(),
        server: addressed.map(str::to_string),
        body: excerpt(body),
        source,
    })?;
    let server = env.server.unwrap_or_default();
    let label = if server.id.is_empty() {
        addressed.unwrap_or("?").to_string()
    } else {
        server.label()
    };
    if let Some(err) = env.error {
        return Err(WireError::Refused {
            request: subject.to_string(),
            server: label,
            code: err.code,
            description: err.description,
        });
    }
    Ok(Reply {
        server,
        data: env.data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct D {
        x: u32,
    }

    #[test]
    fn envelope_with_data() {
        let r = decode_envelope::<D>(
            "S",
            None,
            br#"{"server":{"name":"a","id":"NA"},"data":{"x":1,"y":2}}"#,
        )
        .unwrap();
        assert_eq!(r.server.name, "a");
        assert_eq!(r.data, Some(D { x: 1 }));
    }

    #[test]
    fn statsz_envelope_reads_statsz_key() {
        let r = decode_envelope::<D>(
            "S",
            None,
            br#"{"server":{"name":"a","id":"NA"},"statsz":{"x":3}}"#,
        )
        .unwrap();
        assert_eq!(r.data, Some(D { x: 3 }));
    }

    #[test]
    fn error_answer_is_refused_naming_the_server() {
        let e = decode_envelope::<D>(
            "$SYS.REQ.SERVER.NA.RELOAD",
            Some("NA"),
            br#"{"server":{"name":"a","id":"NA"},"error":{"code":500,"description":"config reload not supported for Gateway"}}"#,
        )
        .unwrap_err();
        match e {
            WireError::Refused {
                server,
                code,
                description,
                request,
            } => {
                assert_eq!(server, "a (NA)");
                assert_eq!(code, 500);
                assert!(description.contains("not supported"));
                assert_eq!(request, "$SYS.REQ.SERVER.NA.RELOAD");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn success_without_data() {
        let r =
            decode_envelope::<D>("S", Some("NA"), br#"{"server":{"name":"a","id":"NA"}}"#).unwrap();
        assert!(r.data.is_none());
    }

    #[test]
    fn garbage_is_a_decode_error_naming_the_addressed_server() {
        let e = decode_envelope::<D>("S", Some("NA"), b"nope").unwrap_err();
        assert_eq!(e.server(), Some("NA"));
        assert!(matches!(e, WireError::Decode { .. }));
    }

    #[test]
    fn completeness_counts_failures_too() {
        let p: PingReplies<()> = PingReplies {
            request: "S".into(),
            replies: vec![Reply {
                server: ServerInfo::default(),
                data: (),
            }],
            failures: vec![WireError::NoResponders {
                request: "S".into(),
                server: None,
            }],
            expected: Some(2),
        };
        assert!(p.is_complete());
        let q: PingReplies<()> = PingReplies {
            expected: Some(3),
            ..p
        };
        assert!(!q.is_complete());
    }

    #[test]
    fn empty_options_send_an_empty_body() {
        assert!(json_body(&crate::ServerFilter::all()).is_empty());
        assert!(!json_body(&crate::ServerFilter::cluster("c")).is_empty());
    }
}
