//! How the controller's own system connection reaches a NATS cluster it deploys (design §4.1):
//! through the client Service, `tls://` when the client listener runs TLS, trusting the client
//! certificate Secret's ca.crt, or the system roots when that Secret has none.

use nats_api::cluster::{NatsClusterSpec, names};

use crate::objects::tls_secret_name;

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
