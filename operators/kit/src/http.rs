//! The kit's HTTP endpoints (/metrics, /healthz, /readyz) on hyper's HTTP/1.1 server: a GET's
//! path in, a status and a text body out. Plain on the probe port; over TLS on the metrics port
//! when a serving certificate is given ([`crate::tls`]), so the metrics are never in the clear
//! (story 12).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

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

    fn into_hyper(self) -> hyper::Response<Full<Bytes>> {
        let code = self
            .status
            .split_whitespace()
            .next()
            .and_then(|c| c.parse::<u16>().ok())
            .and_then(|c| StatusCode::from_u16(c).ok())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = hyper::Response::new(Full::new(Bytes::from(self.body)));
        *response.status_mut() = code;
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        response
    }
}

/// Serves `listener` forever (over TLS when `tls` is given): each GET's path goes to `route`;
/// any other method is answered 405.
pub async fn serve<F>(listener: TcpListener, tls: Option<TlsAcceptor>, route: F)
where
    F: Fn(&str) -> Response + Send + Sync + 'static,
{
    let route = Arc::new(route);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let (route, tls) = (route.clone(), tls.clone());
        tokio::spawn(async move {
            match tls {
                Some(acceptor) => match acceptor.accept(tcp).await {
                    Ok(stream) => connection(stream, route).await,
                    Err(e) => tracing::debug!(error = %e, "a TLS handshake failed"),
                },
                None => connection(tcp, route).await,
            }
        });
    }
}

async fn connection<S, F>(stream: S, route: Arc<F>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(&str) -> Response + Send + Sync + 'static,
{
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let route = route.clone();
        async move {
            let response = if req.method() == Method::GET || req.method() == Method::HEAD {
                route(req.uri().path())
            } else {
                Response::text("405 Method Not Allowed", "")
            };
            Ok::<_, Infallible>(response.into_hyper())
        }
    });
    // A client that opens a connection and sends nothing holds it for at most this long.
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(std::time::Duration::from_secs(10))
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_keeps_its_status_code_and_content_type() {
        let r = Response::text("503 Service Unavailable", "waiting").into_hyper();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            r.headers()[CONTENT_TYPE],
            HeaderValue::from_static("text/plain; charset=utf-8")
        );
        assert_eq!(
            Response::not_found().into_hyper().status(),
            StatusCode::NOT_FOUND
        );
    }
}
