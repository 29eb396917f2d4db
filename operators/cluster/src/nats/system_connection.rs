//! The controller's own system connection to the servers of a NATS cluster it deploys (design
//! §4.1): dialed with the system user `auth.systemCredentials` names, under the controller's
//! name and its preset inbox prefix, trusting the client listener's CA; and the rule for how it
//! reaches a NATS cluster through the client Service (`tls://` when the client listener runs
//! TLS, trusting the client certificate Secret's ca.crt, or the system roots when that Secret
//! has none).

use std::time::Duration;

use nats_api::cluster::{NatsClusterSpec, names};
use nats_wire::ConnectionConfig;

use crate::objects::tls_secret_name;
use crate::server_lifecycle::ServerAddress;

/// How long one request to the servers may wait for them (connect, each request).
pub const OBSERVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The system user the controller asks with.
#[derive(Clone)]
pub struct SystemAccess {
    pub creds: String,
    /// The client listener's CA (the client Secret's ca.crt), when it runs TLS with one.
    pub ca_pem: Option<Vec<u8>>,
}

/// Dials the system connection to `servers` (a reload asks over it).
pub async fn dial_system(
    servers: &[(String, ServerAddress)],
    access: &SystemAccess,
) -> Result<nats_wire::Wire, nats_wire::DialError> {
    nats_wire::dial(&system_config(servers, access)).await
}

/// The system connection's settings: the controller's name and its preset inbox prefix
/// (`_INBOX.cluster-controller`, the only inbox the auth plane's cluster-controller user may
/// subscribe to; any other system user may use it too).
fn system_config(servers: &[(String, ServerAddress)], access: &SystemAccess) -> ConnectionConfig {
    let mut config = ConnectionConfig::new(servers.iter().map(|(_, a)| a.client_url.clone()))
        .with_creds(access.creds.clone())
        .with_name("cluster-controller")
        .with_inbox_prefix(nats_wire::preset_inbox_prefix("cluster-controller"))
        .with_connect_timeout(OBSERVE_TIMEOUT)
        .with_request_timeout(OBSERVE_TIMEOUT);
    if let Some(ca) = &access.ca_pem {
        config = config.with_ca_pem(ca.clone());
    }
    config
}

/// What the system connection verifies the servers' client certificate against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerTrust {
    /// The client listener runs in the clear.
    Plain,
    /// The `ca.crt` of this Secret.
    SecretCa { secret: String },
    /// The system's root certificates: the Secret carries no ca.crt (a public issuer).
    SystemRoots,
}

/// The system connection's URL and trust. `client_secret_has_ca` says whether the client
/// certificate's Secret holds `ca.crt`.
pub fn system_connection(
    name: &str,
    namespace: &str,
    spec: &NatsClusterSpec,
    client_port: u16,
    client_secret_has_ca: bool,
) -> (String, ServerTrust) {
    let host = format!("{}.{namespace}.svc", names::client_service(name));
    match spec.tls.as_ref() {
        None => (format!("nats://{host}:{client_port}"), ServerTrust::Plain),
        Some(tls) => (
            format!("tls://{host}:{client_port}"),
            if client_secret_has_ca {
                ServerTrust::SecretCa {
                    secret: tls_secret_name(name, "client", Some(tls)),
                }
            } else {
                ServerTrust::SystemRoots
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::spec;

    #[rstest::rstest]
    #[case("", false, "nats://demo.nats.svc:4222", ServerTrust::Plain)]
    #[case("tls: {secretRef: {name: c}}\n", true, "tls://demo.nats.svc:4222", ServerTrust::SecretCa { secret: "c".into() })]
    #[case("tls: {certManager: {issuerRef: {name: ca}}}\n", true, "tls://demo.nats.svc:4222", ServerTrust::SecretCa { secret: "demo-client-tls".into() })]
    #[case(
        "tls: {secretRef: {name: c}}\n",
        false,
        "tls://demo.nats.svc:4222",
        ServerTrust::SystemRoots
    )]
    fn url_and_trust(
        #[case] extra: &str,
        #[case] has_ca: bool,
        #[case] url: &str,
        #[case] trust: ServerTrust,
    ) {
        let s = spec(&format!("version: 2.15.1\nreplicas: 1\n{extra}"));
        assert_eq!(
            system_connection("demo", "nats", &s, 4222, has_ca),
            (url.to_string(), trust)
        );
    }
}
