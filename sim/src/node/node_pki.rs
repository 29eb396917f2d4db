//! The node's PKI: one CA, a client certificate per part (the identities the Node and RBAC
//! authorizers know: `system:kube-controller-manager`, `system:node:<name>`, …), the apiserver's
//! and the kubelet's serving certificates, and the service-account signing key. rcgen, as the
//! API tier's PKI ([`crate::apiserver::apiserver_pki`]) uses it.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use rcgen::{ExtendedKeyUsagePurpose, KeyPair, SanType};

use super::NodeError;
use super::node_config::{KUBERNETES_SERVICE_IP, NODE_IP, NODE_NAME};
use crate::apiserver::apiserver_pki::{leaf, pki_error, self_signed_ca};

/// One certificate to issue: file stem, CN, O, usage and SANs.
struct Issue {
    stem: &'static str,
    cn: String,
    org: Option<&'static str>,
    server: bool,
    ips: Vec<Ipv4Addr>,
    names: Vec<&'static str>,
}

fn client(stem: &'static str, cn: &str, org: Option<&'static str>) -> Issue {
    Issue {
        stem,
        cn: cn.to_string(),
        org,
        server: false,
        ips: vec![],
        names: vec![],
    }
}

/// Every certificate the node's parts present.
fn issues() -> Vec<Issue> {
    vec![
        Issue {
            stem: "apiserver",
            cn: "kube-apiserver".into(),
            org: None,
            server: true,
            ips: vec![Ipv4Addr::LOCALHOST, NODE_IP, KUBERNETES_SERVICE_IP],
            names: vec![
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
        },
        Issue {
            stem: "kubelet-serving",
            cn: NODE_NAME.into(),
            org: None,
            server: true,
            ips: vec![NODE_IP, Ipv4Addr::LOCALHOST],
            names: vec![NODE_NAME],
        },
        client("admin", "admin", Some("system:masters")),
        client(
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            Some("system:masters"),
        ),
        client("controller-manager", "system:kube-controller-manager", None),
        client("scheduler", "system:kube-scheduler", None),
        client("kube-proxy", "system:kube-proxy", None),
        client(
            "kubelet",
            &format!("system:node:{NODE_NAME}"),
            Some("system:nodes"),
        ),
    ]
}

fn write(dir: &Path, name: &str, contents: &str) -> Result<(), NodeError> {
    let path = dir.join(name);
    std::fs::write(&path, contents).map_err(|source| NodeError::Io {
        what: "write a PKI file",
        path,
        source,
    })
}

/// Writes `ca.{crt,key}`, `<stem>.{crt,key}` for every part and `sa.{key,pub}` into `dir`.
pub fn generate(dir: &Path) -> Result<(), NodeError> {
    let (ca, ca_key) = self_signed_ca("sim node CA")?;
    write(dir, "ca.crt", &ca.pem())?;
    write(dir, "ca.key", &ca_key.serialize_pem())?;
    for i in issues() {
        let mut sans: Vec<SanType> = i
            .ips
            .iter()
            .map(|ip| SanType::IpAddress(IpAddr::V4(*ip)))
            .collect();
        for n in &i.names {
            let name = (*n)
                .to_string()
                .try_into()
                .map_err(pki_error("a certificate's DNS name"))?;
            sans.push(SanType::DnsName(name));
        }
        let usage = if i.server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        };
        let (cert, key) = leaf(
            &i.cn,
            i.org,
            usage,
            sans,
            &ca,
            &ca_key,
            "a node certificate",
        )
        .map_err(|e| NodeError::Part {
            part: "pki",
            message: e.to_string(),
        })?;
        write(dir, &format!("{}.crt", i.stem), &cert.pem())?;
        write(dir, &format!("{}.key", i.stem), &key.serialize_pem())?;
    }
    let sa = KeyPair::generate().map_err(pki_error("service-account key"))?;
    write(dir, "sa.key", &sa.serialize_pem())?;
    write(dir, "sa.pub", &sa.public_key_pem())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_has_the_identity_its_authorizer_expects() {
        let by: std::collections::BTreeMap<_, _> = issues()
            .into_iter()
            .map(|i| (i.stem, (i.cn, i.org)))
            .collect();
        assert_eq!(by["kubelet"].0, "system:node:sim-node");
        assert_eq!(by["kubelet"].1, Some("system:nodes"));
        assert_eq!(by["controller-manager"].0, "system:kube-controller-manager");
        assert_eq!(by["scheduler"].0, "system:kube-scheduler");
        assert_eq!(by["kube-proxy"].0, "system:kube-proxy");
        assert_eq!(by["admin"].1, Some("system:masters"));
    }

    #[test]
    fn the_apiserver_answers_on_its_cluster_ip_and_the_node_address() {
        let api = issues()
            .into_iter()
            .find(|i| i.stem == "apiserver")
            .expect("apiserver");
        assert!(api.ips.contains(&KUBERNETES_SERVICE_IP) && api.ips.contains(&NODE_IP));
        assert!(api.names.contains(&"kubernetes.default.svc"));
        let dir = tempfile::tempdir().expect("tempdir");
        generate(dir.path()).expect("generate");
        for f in ["ca.key", "kubelet.crt", "apiserver.key", "sa.pub"] {
            assert!(dir.path().join(f).is_file(), "{f}");
        }
    }
}
