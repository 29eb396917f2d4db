//! Live test of dialing a client listener under TLS: the CA from a NatsConnection's `tls.ca` is
//! what makes the connection verify, a foreign CA does not, and requests then run over it.

use crate::common;

use std::time::Duration;

use common::{roster, urls_with_user};
use nats_wire::{Collect, ConnectionConfig, DialError, ServerFilter, dial};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use sim::topology::{SYS_USER, Topology, TopologySpec};

struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let cert = params.self_signed(&key).unwrap();
    Ca { cert, key }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dial_trusts_the_named_ca_and_nothing_else() {
    let issuer = ca("wire-test-ca");
    let server_key = KeyPair::generate().unwrap();
    let server_cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".into()])
        .unwrap()
        .signed_by(&server_key, &issuer.cert, &issuer.key)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cert_file = dir.path().join("server.crt");
    let key_file = dir.path().join("server.key");
    std::fs::write(&cert_file, server_cert.pem()).unwrap();
    std::fs::write(&key_file, server_key.serialize_pem()).unwrap();
    let spec = TopologySpec::cluster(1).with_extra_config(&format!(
        "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n}}\n",
        cert_file.display(),
        key_file.display()
    ));
    let topo = Topology::start(spec).await.expect("a TLS server boots");
    let urls: Vec<String> = urls_with_user(&topo, SYS_USER)
        .into_iter()
        .map(|u| u.replacen("nats://", "tls://", 1))
        .collect();

    let wire = dial(
        &ConnectionConfig::new(urls.clone())
            .with_ca_pem(issuer.cert.pem())
            .with_connect_timeout(Duration::from_secs(5)),
    )
    .await
    .expect("the named CA verifies the server");
    roster(&wire, 1).await;
    let varz = wire
        .ping_varz(
            &ServerFilter::all(),
            Collect::expecting(1, Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(varz.replies.len(), 1);

    // A CA that did not issue the server's certificate: the handshake fails.
    let stranger = ca("someone-else");
    let err = dial(
        &ConnectionConfig::new(urls.clone())
            .with_ca_pem(stranger.cert.pem())
            .with_connect_timeout(Duration::from_secs(3)),
    )
    .await
    .err();
    assert!(
        matches!(
            err,
            Some(DialError::Connect { .. } | DialError::Timeout { .. })
        ),
        "{err:?}"
    );
    // Errors never show the password from the URL.
    let shown = format!("{}", err.unwrap());
    assert!(!shown.contains(":sys@"), "{shown}");

    // A CA Secret without a certificate in it.
    let err = dial(&ConnectionConfig::new(urls).with_ca_pem("garbage"))
        .await
        .err();
    assert!(matches!(err, Some(DialError::InvalidCa { .. })), "{err:?}");
}
