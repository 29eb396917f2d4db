//! The one HTTP/1.1 responder the kit serves with (/metrics, /healthz, /readyz): a GET's path in,
//! a status line and a text body out, one request per connection. Nothing here needs more, so no
//! web framework is pulled in.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What a route answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status line's code and reason, e.g. `200 OK`.
    pub status: &'static str,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Response {
    /// `200 OK` with a plain-text `body`.
    pub fn ok(body: impl Into<String>) -> Self {
        Self::text("200 OK", body)
    }

    /// `404 Not Found`, empty.
    pub fn not_found() -> Self {
        Self::text("404 Not Found", "")
    }

    /// `status` with a plain-text `body`.
    pub fn text(status: &'static str, body: impl Into<String>) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }
}

/// Serves `listener` forever: each connection's first request line's path goes to `route`.
pub async fn serve<F>(listener: TcpListener, route: F)
where
    F: Fn(&str) -> Response + Clone + Send + Sync + 'static,
{
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            continue;
        };
        let route = route.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let n = socket.read(&mut buf).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or("");
            let Response {
                status,
                content_type,
                body,
            } = route(path);
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        });
    }
}
