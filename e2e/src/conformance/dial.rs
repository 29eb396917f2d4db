//! The host dials a story's NatsConnection as a pod would ([`connect`]): as its user (the creds
//! Secret it names), to the Service its first server names, reached at the Service's ClusterIP
//! (the host reaches Services through kube-proxy; it does not resolve cluster names). Over
//! `tls://` the server's certificate is verified against the connection's CA for the Service's
//! name, as the pod verifies it, not for the address dialled ([`ForName`]).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::Api;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::Value;

/// Connects to what NatsConnection `namespace/name` reaches, as its user.
pub async fn connect(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<async_nats::Client, String> {
    let conn = super::kinds::api_of(
        client,
        "nats.mikluko.io/v1beta1",
        "NatsConnection",
        namespace,
    )
    .get(name)
    .await
    .map_err(|e| format!("NatsConnection {namespace}/{name}: {e}"))?
    .data;
    let server = conn
        .pointer("/spec/servers/0")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("NatsConnection {namespace}/{name} names no server"))?;
    let target = service_of(server)
        .ok_or_else(|| format!("{server} does not name a Service of the cluster"))?;
    let svc = Api::<Service>::namespaced(client.clone(), target.namespace)
        .get(target.service)
        .await
        .map_err(|e| format!("Service {}/{}: {e}", target.namespace, target.service))?;
    let ip = svc.spec.and_then(|s| s.cluster_ip).ok_or_else(|| {
        format!(
            "Service {}/{} has no ClusterIP",
            target.namespace, target.service
        )
    })?;
    let creds_ref = secret_ref(&conn, "/spec/credentials/secretKeyRef", "user.creds")
        .ok_or_else(|| format!("NatsConnection {namespace}/{name} names no creds Secret"))?;
    let creds = secret_text(client, namespace, &creds_ref).await?;
    let mut options = async_nats::ConnectOptions::with_credentials(&creds)
        .map_err(|e| format!("the creds of {name}: {e}"))?
        .connection_timeout(Duration::from_secs(5));
    if target.tls {
        let ca_ref = secret_ref(&conn, "/spec/tls/ca/secretKeyRef", "ca.crt")
            .ok_or_else(|| format!("NatsConnection {namespace}/{name} dials tls:// with no CA"))?;
        let ca = secret_text(client, namespace, &ca_ref).await?;
        options = options
            .tls_client_config(for_name(ca.as_bytes(), target.host)?)
            .require_tls(true);
    }
    let url = format!(
        "{}://{ip}:{}",
        if target.tls { "tls" } else { "nats" },
        target.port
    );
    options
        .connect(url.as_str())
        .await
        .map_err(|e| format!("connecting to {url} ({server}): {e}"))
}

/// What a `nats://` or `tls://<service>.<namespace>.svc[.<domain>]:<port>` URL names.
#[derive(Debug, PartialEq, Eq)]
pub struct Target<'a> {
    pub tls: bool,
    pub host: &'a str,
    pub service: &'a str,
    pub namespace: &'a str,
    pub port: &'a str,
}

pub fn service_of(url: &str) -> Option<Target<'_>> {
    let (tls, rest) = match url.split_once("://")? {
        ("nats", rest) => (false, rest),
        ("tls", rest) => (true, rest),
        _ => return None,
    };
    let (host, port) = rest.split_once(':')?;
    let mut labels = host.split('.');
    let (service, namespace) = (labels.next()?, labels.next()?);
    (labels.next() == Some("svc")).then_some(Target {
        tls,
        host,
        service,
        namespace,
        port,
    })
}

/// (Secret name, key) at `pointer` of `conn`, the key defaulting to `default`.
fn secret_ref(conn: &Value, pointer: &str, default: &str) -> Option<(String, String)> {
    let r = conn.pointer(pointer)?;
    let name = r.get("name")?.as_str()?.to_string();
    let key = r.get("key").and_then(Value::as_str).unwrap_or(default);
    Some((name, key.to_string()))
}

/// The text of key `.1` of Secret `.0` in `namespace`, once it is there (a NatsUser's creds
/// Secret is written when the user is signed).
async fn secret_text(
    client: &kube::Client,
    namespace: &str,
    (name, key): &(String, String),
) -> Result<String, String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    sim::wait::poll(
        &format!("Secret {namespace}/{name} holds {key}"),
        Duration::from_secs(120),
        || async {
            let s = secrets.get_opt(name).await.map_err(|e| e.to_string())?;
            Ok(s.and_then(|s| s.data).and_then(|d| {
                d.get(key)
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            }))
        },
    )
    .await
    .map_err(|e| e.to_string())
}

/// A TLS client config trusting the CAs of `ca_pem` that verifies the server as `name`.
fn for_name(ca_pem: &[u8], name: &str) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| format!("the CA's PEM: {e}"))?;
        roots.add(cert).map_err(|e| format!("the CA: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("the CA: {e}"))?;
    let name = ServerName::try_from(name.to_string()).map_err(|e| format!("{name}: {e}"))?;
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ForName { inner, name }))
        .with_no_client_auth())
}

/// Verifies the server's certificate chain and name as WebPKI does, for `name` whatever address
/// was dialled.
#[derive(Debug)]
struct ForName {
    inner: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for ForName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _dialled: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rstest::rstest]
    #[case::short("nats://east.nats-system.svc:4222", Some((false, "east", "nats-system", "4222")))]
    #[case::with_the_domain("nats://demo.nats.svc.cluster.local:4222", Some((false, "demo", "nats", "4222")))]
    #[case::tls("tls://demo.nats-system.svc:4222", Some((true, "demo", "nats-system", "4222")))]
    #[case::outside("nats://gw.east.example.net:7222", None)]
    #[case::no_port("nats://demo.nats.svc", None)]
    #[case::another_scheme("ws://demo.nats.svc:443", None)]
    fn the_service_a_url_names(#[case] url: &str, #[case] want: Option<(bool, &str, &str, &str)>) {
        assert_eq!(
            service_of(url).map(|t| (t.tls, t.service, t.namespace, t.port)),
            want
        );
    }

    #[test]
    fn a_ca_that_is_not_pem_is_refused_by_name() {
        let err = for_name(b"not a certificate", "demo.nats-system.svc").err();
        assert!(err.is_some());
    }
}
