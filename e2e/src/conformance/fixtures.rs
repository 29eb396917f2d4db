//! What a story leaves to the platform team and the conformance run therefore brings itself
//! ([`before`]): story 02's `demo-client-tls`, "from the platform's PKI", is a Secret of a CA
//! made for the run and a serving certificate it signed for the NatsCluster's names.
//!
//! rcgen, as the sim's PKIs use it; the key stays in the Secret, in the node's etcd.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use serde_json::{Value, json};

/// A Secret of `tls.crt`, `tls.key` and `ca.crt` (the shape cert-manager writes) for the
/// client listener of NatsCluster `cluster` in `namespace`: its Service, the headless Service's
/// pods, and the cluster domain's long forms of each.
pub fn server_tls(name: &str, namespace: &str, cluster: &str) -> Result<Value, rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, "conformance platform CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::default();
    leaf.distinguished_name
        .push(DnType::CommonName, format!("{cluster}.{namespace}.svc"));
    leaf.subject_alt_names = server_names(namespace, cluster)
        .into_iter()
        .map(|n| n.try_into().map(SanType::DnsName))
        .collect::<Result<_, _>>()?;
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = leaf.signed_by(&key, &ca, &ca_key)?;
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "kubernetes.io/tls",
        "stringData": {
            "tls.crt": cert.pem(),
            "tls.key": key.serialize_pem(),
            "ca.crt": ca.pem(),
        },
    }))
}

/// The names a client of NatsCluster `cluster` dials it by.
fn server_names(namespace: &str, cluster: &str) -> Vec<String> {
    let mut names = vec![cluster.to_string(), format!("{cluster}.{namespace}")];
    for base in [
        format!("{cluster}.{namespace}.svc"),
        format!("*.{cluster}-headless.{namespace}.svc"),
    ] {
        names.push(format!("{base}.cluster.local"));
        names.push(base);
    }
    names
}

/// The objects applied before `story`'s first step.
pub fn before(story: &str) -> Result<Vec<Value>, rcgen::Error> {
    Ok(match story.split_once('-').map_or(story, |(n, _)| n) {
        "02" => vec![server_tls("demo-client-tls", "nats-system", "demo")?],
        _ => vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auth_planes_listener_secret_names_every_way_to_the_cluster() {
        let secret = server_tls("demo-client-tls", "nats-system", "demo").expect("issued");
        let data = &secret["stringData"];
        for key in ["tls.crt", "tls.key", "ca.crt"] {
            assert!(
                data[key]
                    .as_str()
                    .is_some_and(|p| p.starts_with("-----BEGIN")),
                "{key}"
            );
        }
        assert_eq!(
            server_names("nats-system", "demo"),
            [
                "demo",
                "demo.nats-system",
                "demo.nats-system.svc.cluster.local",
                "demo.nats-system.svc",
                "*.demo-headless.nats-system.svc.cluster.local",
                "*.demo-headless.nats-system.svc",
            ]
        );
        assert_eq!(before("02-auth-plane").expect("issued").len(), 1);
        assert!(before("01-quickstart").expect("none").is_empty());
    }
}
