//! The self-signed route CA (design §4.1): when route TLS names no certificate, the controller
//! keeps a CA key in the Secret `<name>-routes-ca`, which no pod mounts, and issues the servers'
//! route certificate under it into `<name>-routes-tls`, valid for a year and reissued under the
//! same CA key once a third of that remains.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use nats_api::cluster::names;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

use crate::objects::{Owner, labels};

/// How long a route certificate is valid.
pub const CERT_VALIDITY: Duration = Duration::days(365);
/// How long the route CA is valid; it outlives many route certificates, since replacing it
/// would need every server to trust the old and the new at once.
pub const CA_VALIDITY: Duration = Duration::days(3650);

pub const CA_CERT_KEY: &str = "ca.crt";
pub const CA_KEY_KEY: &str = "ca.key";
pub const TLS_CERT_KEY: &str = "tls.crt";
pub const TLS_KEY_KEY: &str = "tls.key";
/// Where the route certificate's validity is recorded on its Secret, so the reissue decision
/// needs no certificate parser.
pub const NOT_BEFORE_ANNOTATION: &str = "cluster.nats.mikluko.io/not-before";
pub const NOT_AFTER_ANNOTATION: &str = "cluster.nats.mikluko.io/not-after";

#[derive(Debug, thiserror::Error)]
pub enum RouteCaError {
    #[error("NatsCluster {cluster}: Secret {secret} lacks key {key}")]
    MissingKey {
        cluster: String,
        secret: String,
        key: String,
    },
    #[error("NatsCluster {cluster}: the route CA in Secret {secret} is unusable: {source}")]
    Unusable {
        cluster: String,
        secret: String,
        source: rcgen::Error,
    },
    #[error("NatsCluster {cluster}: issuing the route certificate failed: {source}")]
    Issue {
        cluster: String,
        source: rcgen::Error,
    },
}

/// The route certificate `<name>-routes-tls`'s Secret name.
pub fn routes_tls_secret(cluster: &str) -> String {
    format!("{cluster}-routes-tls")
}

/// Whether a certificate valid from `not_before` to `not_after` is reissued at `now`: once a
/// third of its validity remains (or it has lapsed, or its validity is empty).
pub fn needs_reissue(
    now: OffsetDateTime,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
) -> bool {
    let total = not_after - not_before;
    if total <= Duration::ZERO {
        return true;
    }
    let remaining = not_after - now;
    remaining * 3 <= total
}

/// The names a route certificate covers: every pod behind the headless Service, as routes dial
/// them, plus loopback for local servers.
pub fn route_dns_names(cluster: &str, namespace: &str, cluster_domain: &str) -> Vec<String> {
    let headless = names::headless_service(cluster);
    vec![
        format!("*.{headless}.{namespace}.svc.{cluster_domain}"),
        format!("*.{headless}.{namespace}.svc"),
        format!("*.{headless}.{namespace}"),
        format!("*.{headless}"),
        "localhost".into(),
    ]
}

fn ca_params(cluster: &str, now: OffsetDateTime) -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("{cluster} route CA"));
    dn.push(DnType::OrganizationName, "nats-cluster-controller");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p.not_before = now;
    p.not_after = now + CA_VALIDITY;
    p
}

/// The route CA: its certificate and key, as kept in `<name>-routes-ca`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteCa {
    pub cluster: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// A route certificate issued under the route CA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedCert {
    pub cert_pem: String,
    pub key_pem: String,
    pub ca_pem: String,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

impl RouteCa {
    /// A new CA with a fresh key.
    pub fn generate(cluster: &str, now: OffsetDateTime) -> Result<Self, RouteCaError> {
        let issue = |source| RouteCaError::Issue {
            cluster: cluster.into(),
            source,
        };
        let key = KeyPair::generate().map_err(issue)?;
        let cert = ca_params(cluster, now).self_signed(&key).map_err(issue)?;
        Ok(Self {
            cluster: cluster.into(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The CA as kept in its Secret.
    pub fn from_secret(cluster: &str, secret: &Secret) -> Result<Self, RouteCaError> {
        let name = names::routes_ca_secret(cluster);
        let get = |key: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .and_then(|b| String::from_utf8(b.0.clone()).ok())
                .ok_or_else(|| RouteCaError::MissingKey {
                    cluster: cluster.into(),
                    secret: name.clone(),
                    key: key.into(),
                })
        };
        Ok(Self {
            cluster: cluster.into(),
            cert_pem: get(CA_CERT_KEY)?,
            key_pem: get(CA_KEY_KEY)?,
        })
    }

    /// The Secret `<name>-routes-ca` holding the CA and its key; no pod mounts it.
    pub fn secret(&self, owner: &Owner) -> Secret {
        Secret {
            metadata: owner.meta(
                names::routes_ca_secret(&owner.name),
                labels::cluster(&owner.name),
            ),
            data: Some(BTreeMap::from([
                (
                    CA_CERT_KEY.into(),
                    ByteString(self.cert_pem.clone().into_bytes()),
                ),
                (
                    CA_KEY_KEY.into(),
                    ByteString(self.key_pem.clone().into_bytes()),
                ),
            ])),
            type_: Some("Opaque".into()),
            ..Default::default()
        }
    }

    /// A route certificate for `dns_names` (and `ips`), valid for [`CERT_VALIDITY`] from `now`,
    /// signed by the CA's key. It serves both ways: routes verify each other.
    pub fn issue(
        &self,
        dns_names: &[String],
        ips: &[std::net::IpAddr],
        now: OffsetDateTime,
    ) -> Result<IssuedCert, RouteCaError> {
        let unusable = |source| RouteCaError::Unusable {
            cluster: self.cluster.clone(),
            secret: names::routes_ca_secret(&self.cluster),
            source,
        };
        let ca_key = KeyPair::from_pem(&self.key_pem).map_err(unusable)?;
        // The issuer is rebuilt from the kept key: a child names its issuer by subject and key
        // identifier, both of which the rebuilt CA shares with the kept certificate.
        let issuer = ca_params(&self.cluster, now)
            .self_signed(&ca_key)
            .map_err(unusable)?;
        let issue = |source| RouteCaError::Issue {
            cluster: self.cluster.clone(),
            source,
        };
        let mut p = CertificateParams::new(dns_names.to_vec()).map_err(issue)?;
        p.subject_alt_names
            .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, format!("{} routes", self.cluster));
        p.distinguished_name = dn;
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        // Whole seconds, so the recorded validity reads back exactly.
        let now = now.replace_nanosecond(0).unwrap_or(now);
        p.not_before = now;
        p.not_after = now + CERT_VALIDITY;
        let key = KeyPair::generate().map_err(issue)?;
        let cert = p.signed_by(&key, &issuer, &ca_key).map_err(issue)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            ca_pem: self.cert_pem.clone(),
            not_before: now,
            not_after: now + CERT_VALIDITY,
        })
    }
}

impl IssuedCert {
    /// The Secret `<name>-routes-tls` every server mounts, recording the validity.
    pub fn secret(&self, owner: &Owner) -> Secret {
        let mut meta = owner.meta(routes_tls_secret(&owner.name), labels::cluster(&owner.name));
        meta.annotations = Some(validity_annotations(self.not_before, self.not_after));
        Secret {
            metadata: meta,
            data: Some(BTreeMap::from([
                (
                    TLS_CERT_KEY.into(),
                    ByteString(self.cert_pem.clone().into_bytes()),
                ),
                (
                    TLS_KEY_KEY.into(),
                    ByteString(self.key_pem.clone().into_bytes()),
                ),
                (
                    CA_CERT_KEY.into(),
                    ByteString(self.ca_pem.clone().into_bytes()),
                ),
            ])),
            type_: Some("kubernetes.io/tls".into()),
            ..Default::default()
        }
    }
}

/// The annotations recording a route certificate's validity on its Secret (read back by
/// [`recorded_validity`]).
pub fn validity_annotations(
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
) -> BTreeMap<String, String> {
    let fmt = |t: OffsetDateTime| t.format(&Rfc3339).unwrap_or_default();
    BTreeMap::from([
        (NOT_BEFORE_ANNOTATION.into(), fmt(not_before)),
        (NOT_AFTER_ANNOTATION.into(), fmt(not_after)),
    ])
}

/// The validity recorded on a route certificate's Secret; `None` when unrecorded, which the
/// reconciler treats as due for reissue.
pub fn recorded_validity(secret: &Secret) -> Option<(OffsetDateTime, OffsetDateTime)> {
    let a = secret.metadata.annotations.as_ref()?;
    let read = |k: &str| OffsetDateTime::parse(a.get(k)?, &Rfc3339).ok();
    Some((read(NOT_BEFORE_ANNOTATION)?, read(NOT_AFTER_ANNOTATION)?))
}

/// Whether the route certificate in `secret` is due at `now`.
pub fn secret_needs_reissue(secret: &Secret, now: OffsetDateTime) -> bool {
    recorded_validity(secret).is_none_or(|(nb, na)| needs_reissue(now, nb, na))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::owner;

    fn day(y: i32, m: u8, d: u8) -> OffsetDateTime {
        time::Date::from_calendar_date(y, time::Month::try_from(m).expect("month"), d)
            .expect("date")
            .midnight()
            .assume_utc()
    }

    #[rstest::rstest]
    // Fresh: not due.
    #[case(day(2026, 1, 1), false)]
    // Just over a third left (122 of 365 days): not due.
    #[case(day(2026, 9, 1), false)]
    // A third left (at most 121.67 days): due.
    #[case(day(2026, 9, 2), true)]
    #[case(day(2026, 12, 31), true)]
    // Lapsed.
    #[case(day(2027, 6, 1), true)]
    fn reissued_once_a_third_remains(#[case] now: OffsetDateTime, #[case] due: bool) {
        let nb = day(2026, 1, 1);
        let na = nb + CERT_VALIDITY;
        assert_eq!(needs_reissue(now, nb, na), due, "{now}");
    }

    #[test]
    fn an_empty_validity_is_due() {
        let t = day(2026, 1, 1);
        assert!(needs_reissue(t, t, t));
    }

    #[test]
    fn the_ca_round_trips_through_its_secret_and_reissues_under_the_same_key() {
        let now = day(2026, 1, 1);
        let ca = RouteCa::generate("demo", now).expect("ca");
        let s = ca.secret(&owner());
        assert_eq!(s.metadata.name.as_deref(), Some("demo-routes-ca"));
        let back = RouteCa::from_secret("demo", &s).expect("from secret");
        assert_eq!(back, ca);
        let names = route_dns_names("demo", "nats", "cluster.local");
        assert_eq!(names[0], "*.demo-headless.nats.svc.cluster.local");
        let a = back.issue(&names, &[], now).expect("issue");
        let b = back
            .issue(&names, &[], now + Duration::days(250))
            .expect("reissue");
        assert_ne!(a.cert_pem, b.cert_pem);
        assert_eq!(a.ca_pem, b.ca_pem, "the same CA certificate stays trusted");
        assert_eq!(a.not_after - a.not_before, CERT_VALIDITY);

        let tls = a.secret(&owner());
        assert_eq!(tls.metadata.name.as_deref(), Some("demo-routes-tls"));
        let data = tls.data.clone().expect("data");
        for k in [TLS_CERT_KEY, TLS_KEY_KEY, CA_CERT_KEY] {
            assert!(data.contains_key(k), "{k}");
        }
        assert!(
            !data.contains_key(CA_KEY_KEY),
            "the CA key stays in the CA Secret"
        );
        assert_eq!(recorded_validity(&tls), Some((a.not_before, a.not_after)));
        assert!(!secret_needs_reissue(&tls, now + Duration::days(200)));
        assert!(secret_needs_reissue(&tls, now + Duration::days(250)));
        assert!(secret_needs_reissue(&Secret::default(), now));
    }

    #[test]
    fn a_ca_secret_without_its_key_names_what_is_missing() {
        let mut s = RouteCa::generate("demo", day(2026, 1, 1))
            .expect("ca")
            .secret(&owner());
        s.data.as_mut().expect("data").remove(CA_KEY_KEY);
        let e = RouteCa::from_secret("demo", &s).unwrap_err();
        assert!(e.to_string().contains("ca.key"), "{e}");
    }
}
