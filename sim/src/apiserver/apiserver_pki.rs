//! A throwaway PKI per instance: a CA, the server's serving certificate, an admin client certificate
//! (group system:masters, so RBAC lets it do everything) and the service-account signing key.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

use super::ApiServerError;

/// Paths of the PEM files written into the instance's `pki/` directory.
#[derive(Clone, Debug)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    /// Signs service-account tokens; kube-apiserver 1.20 refuses to start without one.
    pub service_account_key: PathBuf,
    /// Its public half, which verifies the tokens (PKIX PEM: 1.20 does not read it out of a PKCS#8 key).
    pub service_account_pub: PathBuf,
}

pub(crate) fn pki_error(what: &'static str) -> impl FnOnce(rcgen::Error) -> ApiServerError {
    move |source| ApiServerError::Pki { what, source }
}

pub(crate) fn leaf(
    common_name: &str,
    organization: Option<&str>,
    usage: ExtendedKeyUsagePurpose,
    sans: Vec<SanType>,
    ca: &Certificate,
    ca_key: &KeyPair,
    what: &'static str,
) -> Result<(Certificate, KeyPair), ApiServerError> {
    let key = KeyPair::generate().map_err(pki_error(what))?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    params.distinguished_name = dn;
    params.subject_alt_names = sans;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    let cert = params
        .signed_by(&key, ca, ca_key)
        .map_err(pki_error(what))?;
    Ok((cert, key))
}

fn write(path: &Path, contents: &str) -> Result<(), ApiServerError> {
    std::fs::write(path, contents).map_err(|source| ApiServerError::Io {
        what: "write a PKI file",
        path: path.to_path_buf(),
        source,
    })
}

/// A self-signed CA named `common_name`, and its key.
pub(crate) fn self_signed_ca(common_name: &str) -> Result<(Certificate, KeyPair), ApiServerError> {
    let ca_key = KeyPair::generate().map_err(pki_error("CA key"))?;
    let mut ca_params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    ca_params.distinguished_name = dn;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params
        .self_signed(&ca_key)
        .map_err(pki_error("CA certificate"))?;
    Ok((ca, ca_key))
}

/// Generates the PKI into `dir` (which must exist).
pub fn generate(dir: &Path) -> Result<Pki, ApiServerError> {
    let (ca, ca_key) = self_signed_ca("nats-operators test CA")?;

    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let localhost = "localhost"
        .to_owned()
        .try_into()
        .map_err(pki_error("server certificate SAN"))?;
    let (server, server_key) = leaf(
        "apiserver",
        None,
        ExtendedKeyUsagePurpose::ServerAuth,
        vec![SanType::IpAddress(loopback), SanType::DnsName(localhost)],
        &ca,
        &ca_key,
        "server certificate",
    )?;
    let (admin, admin_key) = leaf(
        "admin",
        Some("system:masters"),
        ExtendedKeyUsagePurpose::ClientAuth,
        Vec::new(),
        &ca,
        &ca_key,
        "admin client certificate",
    )?;
    let service_account = KeyPair::generate().map_err(pki_error("service-account key"))?;

    let pki = Pki::at(dir);
    write(&pki.ca_cert, &ca.pem())?;
    write(&pki.server_cert, &server.pem())?;
    write(&pki.server_key, &server_key.serialize_pem())?;
    write(&pki.admin_cert, &admin.pem())?;
    write(&pki.admin_key, &admin_key.serialize_pem())?;
    write(&pki.service_account_key, &service_account.serialize_pem())?;
    write(&pki.service_account_pub, &service_account.public_key_pem())?;
    Ok(pki)
}

impl Pki {
    /// The files of a PKI [`generate`]d into `dir` (a pool's pair lent to a test is read there).
    pub(crate) fn at(dir: &Path) -> Self {
        Pki {
            ca_cert: dir.join("ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
            admin_cert: dir.join("admin.crt"),
            admin_key: dir.join("admin.key"),
            service_account_key: dir.join("sa.key"),
            service_account_pub: dir.join("sa.pub"),
        }
    }
}
