//! Dialing a NatsConnection: the servers list, the CA that issued the client listener's
//! certificate, the creds of the user whose account decides what the connection may do, and the
//! inbox prefix a controller preset is confined to.

use std::sync::Arc;
use std::time::Duration;

use async_nats::rustls;
use async_nats::rustls::pki_types::CertificateDer;
use async_nats::rustls::pki_types::pem::PemObject;

use crate::error::DialError;
use crate::{DEFAULT_REQUEST_TIMEOUT, Wire};

/// A NatsConnection resolved to material: what the controllers read from the NatsConnection spec
/// and the Secrets it names.
#[derive(Clone, Default)]
pub struct ConnectionConfig {
    /// Server URLs (`nats://host:port`, `tls://host:port`); at least one.
    pub servers: Vec<String>,
    /// PEM bundle of the CA(s) to trust (the Secret's `ca.crt`). Set, the connection requires TLS
    /// and trusts these on top of the system roots.
    pub ca_pem: Option<Vec<u8>>,
    /// The text of a creds file (JWT + seed).
    pub creds: Option<String>,
    /// Custom inbox prefix, e.g. `_INBOX.cluster-controller`: a controller preset may subscribe only
    /// under `_INBOX.<preset>.>`, so its replies must come back there.
    pub inbox_prefix: Option<String>,
    /// Connection name shown in CONNZ.
    pub name: Option<String>,
    /// How long the first connect may take.
    pub connect_timeout: Option<Duration>,
    /// Default timeout of a single request; pings take their own deadline.
    pub request_timeout: Option<Duration>,
    /// How often the client PINGs an idle server (async-nats' default, 60 s, when unset). The
    /// client gives the connection up after three PINGs without a PONG: a server that is paused
    /// or cut off keeps its TCP connection open, and only this notices it.
    pub ping_interval: Option<Duration>,
}

impl std::fmt::Debug for ConnectionConfig {
    // Creds hold a seed: never print them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionConfig")
            .field("servers", &self.servers)
            .field("ca_pem", &self.ca_pem.as_ref().map(|c| c.len()))
            .field("creds", &self.creds.as_ref().map(|_| "<redacted>"))
            .field("inbox_prefix", &self.inbox_prefix)
            .field("name", &self.name)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("ping_interval", &self.ping_interval)
            .finish()
    }
}

impl ConnectionConfig {
    pub fn new<S: Into<String>>(servers: impl IntoIterator<Item = S>) -> Self {
        ConnectionConfig {
            servers: servers.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    pub fn with_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    pub fn with_creds(mut self, creds: impl Into<String>) -> Self {
        self.creds = Some(creds.into());
        self
    }

    pub fn with_inbox_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.inbox_prefix = Some(prefix.into());
        self
    }

    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    pub fn with_ping_interval(mut self, every: Duration) -> Self {
        self.ping_interval = Some(every);
        self
    }

    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }
}

/// The inbox prefix a controller preset dials with: `_INBOX.<preset>`.
pub fn preset_inbox_prefix(preset: &str) -> String {
    format!("_INBOX.{preset}")
}

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Dials the connection. The client reconnects on its own afterwards; only the first connect is
/// bounded by `connect_timeout`.
pub async fn dial(config: &ConnectionConfig) -> Result<Wire, DialError> {
    // Errors carry the servers without any password in them.
    let servers: Vec<String> = config.servers.iter().map(|s| redact_userinfo(s)).collect();
    if servers.is_empty() {
        return Err(DialError::NoServers { servers });
    }
    let mut options = async_nats::ConnectOptions::new();
    if let Some(creds) = &config.creds {
        options = options
            .credentials(creds)
            .map_err(|source| DialError::InvalidCredentials {
                servers: servers.clone(),
                source,
            })?;
    }
    if let Some(pem) = &config.ca_pem {
        let tls = client_tls_config(pem).map_err(|reason| DialError::InvalidCa {
            servers: servers.clone(),
            reason,
        })?;
        options = options.tls_client_config(tls).require_tls(true);
    }
    if let Some(prefix) = &config.inbox_prefix {
        options = options.custom_inbox_prefix(prefix);
    }
    if let Some(name) = &config.name {
        options = options.name(name);
    }
    // The server's lame duck INFO, counted for Wire::lame_duck_notices. The callback holds only
    // the sender: nothing in it refers back to the client, which would keep it alive.
    let (lame_duck, notices) = tokio::sync::watch::channel(0u64);
    // What went wrong since the connection was last up ([`Wire::trouble`]).
    let (trouble_tx, trouble) = tokio::sync::watch::channel(None::<crate::Trouble>);
    options = options.event_callback(move |event| {
        match &event {
            async_nats::Event::LameDuckMode => lame_duck.send_modify(|n| *n += 1),
            async_nats::Event::Connected => {
                trouble_tx.send_if_modified(|t| t.take().is_some());
            }
            async_nats::Event::Disconnected => {
                trouble_tx.send_modify(|t| {
                    t.get_or_insert_with(|| crate::Trouble {
                        what: "disconnected".into(),
                        since: std::time::SystemTime::now(),
                    });
                });
            }
            // An error while disconnected (a failed reconnect) says why; one while connected (a
            // permission refused) is not the connection's trouble.
            async_nats::Event::ServerError(_) | async_nats::Event::ClientError(_) => {
                let what = event.to_string();
                trouble_tx.send_if_modified(|t| match t {
                    Some(t) if t.what != what => {
                        t.what = what;
                        true
                    }
                    _ => false,
                });
            }
            _ => {}
        }
        async {}
    });
    if let Some(every) = config.ping_interval {
        options = options.ping_interval(every);
    }
    let connect_timeout = config.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    let request_timeout = config.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT);
    options = options
        .connection_timeout(connect_timeout)
        .request_timeout(Some(request_timeout));
    let addrs: Vec<async_nats::ServerAddr> = config
        .servers
        .iter()
        .map(|s| s.parse::<async_nats::ServerAddr>())
        .collect::<Result<_, _>>()
        .map_err(|e| DialError::Connect {
            servers: servers.clone(),
            source: async_nats::ConnectError::with_source(
                async_nats::ConnectErrorKind::ServerParse,
                e,
            ),
        })?;
    let addrs = crate::names::expand(addrs);
    // async-nats parses `nats://user:pass@host` but does not send the user; nats.go does, and a
    // NatsConnection's servers may carry one, so apply the first one found (creds take precedence).
    if config.creds.is_none()
        && let Some((user, pass)) = addrs.iter().find_map(|a| {
            a.has_user_pass().then(|| {
                (
                    a.username().unwrap_or_default().to_string(),
                    a.password().unwrap_or_default().to_string(),
                )
            })
        })
    {
        options = options.user_and_password(user, pass);
    }
    let client = tokio::time::timeout(connect_timeout, options.connect(addrs))
        .await
        .map_err(|_| DialError::Timeout {
            servers: servers.clone(),
            after: connect_timeout,
        })?
        .map_err(|source| DialError::Connect {
            servers: servers.clone(),
            source,
        })?;
    Ok(Wire::new(client)
        .with_request_timeout(request_timeout)
        .with_lame_duck_notices(notices)
        .with_trouble(trouble))
}

/// `nats://user:pass@host:4222` → `nats://***@host:4222`.
fn redact_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    match rest.split_once('@') {
        Some((_, host)) if scheme.is_empty() => format!("***@{host}"),
        Some((_, host)) => format!("{scheme}://***@{host}"),
        None => url.to_string(),
    }
}

/// A rustls client config trusting the PEM bundle (and the system roots, as async-nats does when
/// no CA is named).
fn client_tls_config(pem: &[u8]) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("PEM parse: {e}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block".to_string());
    }
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| format!("certificate rejected: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preset_prefix_is_under_inbox() {
        assert_eq!(
            preset_inbox_prefix("cluster-controller"),
            "_INBOX.cluster-controller"
        );
    }

    #[test]
    fn userinfo_is_redacted() {
        assert_eq!(redact_userinfo("nats://sys:pw@h:4222"), "nats://***@h:4222");
        assert_eq!(redact_userinfo("h:4222"), "h:4222");
        assert_eq!(redact_userinfo("u:p@h:4222"), "***@h:4222");
    }

    #[test]
    fn ca_without_certificate_is_refused() {
        let err = client_tls_config(b"not a pem").unwrap_err();
        assert!(err.contains("no CERTIFICATE"), "{err}");
    }

    #[test]
    fn debug_redacts_creds() {
        let c = ConnectionConfig::new(["nats://a:4222"]).with_creds("SUAxxx seed");
        let shown = format!("{c:?}");
        assert!(!shown.contains("SUAxxx"), "{shown}");
    }

    #[tokio::test]
    async fn dial_without_servers_is_refused() {
        let err = dial(&ConnectionConfig::default()).await.err();
        assert!(matches!(err, Some(DialError::NoServers { .. })), "{err:?}");
    }

    #[tokio::test]
    async fn dial_with_garbage_creds_is_refused() {
        let c = ConnectionConfig::new(["nats://127.0.0.1:1"]).with_creds("garbage");
        let err = dial(&c).await.err();
        assert!(
            matches!(err, Some(DialError::InvalidCredentials { .. })),
            "{err:?}"
        );
    }
}
