//! Rotated certificates reach the running servers (design §4.2: TLS certificates and keys
//! reload). A server reads its listeners' certificate files when it starts and when it reloads,
//! never otherwise, so a Secret cert-manager renewed, or the route certificate reissued once a
//! third of its year remains, is served by no server until one of those — and the servers go
//! on presenting the old certificate until it expires.
//!
//! A server reports in `/varz` the NotAfter of the certificate each TLS listener loaded; the
//! Secret's certificate has its own. A server whose listener loaded another NotAfter than the
//! Secret's is stale: with a system user it is asked to reload (which moves no `config_digest`,
//! so it is confirmed by the NotAfter it reports); without one the certificates' digest is part
//! of the workload revision ([`restart_material`]), so a rotation is a restart step under the
//! rollout gate, like any change that needs a restart.

use std::collections::BTreeMap;

use base64::Engine;
use sha2::{Digest, Sha256};

/// The certificate file of a listener's Secret.
pub const CERT_FILE: &str = "tls.crt";

/// Why a certificate's NotAfter could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CertificateError {
    #[error("no PEM CERTIFICATE block")]
    NoCertificate,
    #[error("the CERTIFICATE block is not base64: {0}")]
    Base64(String),
    #[error("the certificate's DER is malformed: {0}")]
    Der(&'static str),
    #[error("the certificate's NotAfter is not a time: {0}")]
    Time(String),
}

/// NotAfter of the first certificate in `pem` (the server's own, before any chain), as unix
/// seconds.
pub fn not_after(pem: &[u8]) -> Result<i64, CertificateError> {
    let text = String::from_utf8_lossy(pem);
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let start = text.find(BEGIN).ok_or(CertificateError::NoCertificate)? + BEGIN.len();
    let end = text[start..]
        .find(END)
        .ok_or(CertificateError::NoCertificate)?
        + start;
    let body: String = text[start..end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|e| CertificateError::Base64(e.to_string()))?;
    der_not_after(&der)
}

/// One DER element: its tag, its content and what follows it.
fn element(der: &[u8]) -> Result<(u8, &[u8], &[u8]), CertificateError> {
    let (&tag, rest) = der
        .split_first()
        .ok_or(CertificateError::Der("truncated"))?;
    let (&first, rest) = rest
        .split_first()
        .ok_or(CertificateError::Der("no length"))?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return Err(CertificateError::Der("bad length"));
        }
        let len = rest[..n].iter().fold(0usize, |l, b| (l << 8) | *b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return Err(CertificateError::Der("content beyond the end"));
    }
    Ok((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { \[0\] version OPTIONAL, serialNumber,
/// signature, issuer, validity SEQUENCE { notBefore, notAfter }, ... }, ... } (RFC 5280 §4.1).
fn der_not_after(der: &[u8]) -> Result<i64, CertificateError> {
    let (tag, cert, _) = element(der)?;
    if tag != SEQUENCE {
        return Err(CertificateError::Der("not a SEQUENCE"));
    }
    let (tag, tbs, _) = element(cert)?;
    if tag != SEQUENCE {
        return Err(CertificateError::Der("tbsCertificate not a SEQUENCE"));
    }
    let (tag, _, mut rest) = element(tbs)?;
    if tag == VERSION {
        rest = element(rest)?.2; // the serial number after the version
    }
    let rest = element(rest)?.2; // signature algorithm
    let rest = element(rest)?.2; // issuer
    let (tag, validity, _) = element(rest)?;
    if tag != SEQUENCE {
        return Err(CertificateError::Der("validity not a SEQUENCE"));
    }
    let after = element(validity)?.2;
    let (tag, time, _) = element(after)?;
    let text = std::str::from_utf8(time).map_err(|_| CertificateError::Der("time not ASCII"))?;
    match tag {
        UTC_TIME => parse_time(text, false),
        GENERALIZED_TIME => parse_time(text, true),
        _ => Err(CertificateError::Der("NotAfter not a time")),
    }
}

/// `YYMMDDHHMMSSZ` (UTCTime, years 1950–2049) or `YYYYMMDDHHMMSSZ` (GeneralizedTime).
fn parse_time(text: &str, generalized: bool) -> Result<i64, CertificateError> {
    let bad = || CertificateError::Time(text.to_string());
    let digits = text.strip_suffix('Z').ok_or_else(bad)?;
    let year_len = if generalized { 4 } else { 2 };
    if digits.len() != year_len + 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let num = |from: usize, len: usize| -> i64 {
        digits[from..from + len]
            .bytes()
            .fold(0, |n, b| n * 10 + (b - b'0') as i64)
    };
    let mut year = num(0, year_len);
    if !generalized {
        year += if year >= 50 { 1900 } else { 2000 };
    }
    let at = year_len;
    let month = u8::try_from(num(at, 2)).map_err(|_| bad())?;
    let month = time::Month::try_from(month).map_err(|_| bad())?;
    let date = time::Date::from_calendar_date(
        i32::try_from(year).map_err(|_| bad())?,
        month,
        u8::try_from(num(at + 2, 2)).map_err(|_| bad())?,
    )
    .map_err(|_| bad())?;
    let clock = time::Time::from_hms(
        u8::try_from(num(at + 4, 2)).map_err(|_| bad())?,
        u8::try_from(num(at + 6, 2)).map_err(|_| bad())?,
        u8::try_from(num(at + 8, 2)).map_err(|_| bad())?,
    )
    .map_err(|_| bad())?;
    Ok(time::PrimitiveDateTime::new(date, clock)
        .assume_utc()
        .unix_timestamp())
}

/// NotAfter of each listener's certificate as its Secret holds it (`listeners`: listener →
/// file name → content). A certificate that cannot be read is left out, named in the second
/// part: no server is judged by it.
pub fn desired(
    listeners: &BTreeMap<&'static str, BTreeMap<String, Vec<u8>>>,
) -> (BTreeMap<String, i64>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut unreadable = vec![];
    for (listener, files) in listeners {
        let Some(pem) = files.get(CERT_FILE) else {
            continue;
        };
        match not_after(pem) {
            Ok(t) => {
                out.insert(listener.to_string(), t);
            }
            Err(e) => unreadable.push(format!("{listener} {CERT_FILE}: {e}")),
        }
    }
    (out, unreadable)
}

/// The listeners of one server whose loaded certificate is not the Secret's. A listener the
/// server does not report (it has not answered, or serves no TLS there yet) is not judged.
pub fn stale(desired: &BTreeMap<String, i64>, loaded: &BTreeMap<String, i64>) -> Vec<String> {
    desired
        .iter()
        .filter(|(l, want)| loaded.get(*l).is_some_and(|got| got != *want))
        .map(|(l, _)| l.clone())
        .collect()
}

/// The servers to reload, each with its stale listeners: of `current` (servers running their
/// target revision, which no step touches now), those whose answer shows a stale listener.
pub fn to_reload(
    current: &[String],
    desired: &BTreeMap<String, i64>,
    loaded: &BTreeMap<String, BTreeMap<String, i64>>,
) -> Vec<(String, Vec<String>)> {
    current
        .iter()
        .filter_map(|server| {
            let stale = stale(desired, loaded.get(server)?);
            (!stale.is_empty()).then(|| (server.clone(), stale))
        })
        .collect()
}

/// What a server without a system user restarts for: a digest of every listener's certificate
/// and key, folded into its workload revision so that a rotation is a restart step. `None` with
/// a system user (a rotation then reloads) or without TLS material.
pub fn restart_material(
    listeners: &BTreeMap<&'static str, BTreeMap<String, Vec<u8>>>,
    system_user: bool,
) -> Option<String> {
    if system_user || listeners.is_empty() {
        return None;
    }
    let mut h = Sha256::new();
    for (listener, files) in listeners {
        for (name, content) in files {
            h.update(listener.as_bytes());
            h.update([0]);
            h.update(name.as_bytes());
            h.update([0]);
            h.update((content.len() as u64).to_be_bytes());
            h.update(content);
        }
    }
    Some(
        h.finalize()
            .iter()
            .take(4)
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use time::OffsetDateTime;

    fn at(y: i32, mo: u8, d: u8, h: u8, mi: u8, s: u8) -> OffsetDateTime {
        let date =
            time::Date::from_calendar_date(y, time::Month::try_from(mo).unwrap(), d).unwrap();
        time::PrimitiveDateTime::new(date, time::Time::from_hms(h, mi, s).unwrap()).assume_utc()
    }

    fn cert_until(not_after: OffsetDateTime) -> Vec<u8> {
        let mut p = rcgen::CertificateParams::new(vec!["demo".to_string()]).unwrap();
        p.not_before = at(2026, 1, 1, 0, 0, 0);
        p.not_after = not_after;
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().pem().into_bytes()
    }

    #[rstest]
    #[case::utc_time(at(2027, 2, 28, 5, 26, 24))]
    #[case::utc_time_last_year(at(2049, 12, 31, 23, 59, 59))]
    #[case::generalized_time(at(2051, 6, 1, 12, 0, 0))]
    fn reads_the_not_after_rcgen_wrote(#[case] when: OffsetDateTime) {
        assert_eq!(not_after(&cert_until(when)), Ok(when.unix_timestamp()));
    }

    #[test]
    fn the_first_certificate_of_a_chain_is_the_servers() {
        let mut chain = cert_until(at(2027, 1, 1, 0, 0, 0));
        chain.extend(cert_until(at(2036, 1, 1, 0, 0, 0)));
        assert_eq!(
            not_after(&chain),
            Ok(at(2027, 1, 1, 0, 0, 0).unix_timestamp())
        );
    }

    #[rstest]
    #[case::empty(b"".to_vec(), CertificateError::NoCertificate)]
    #[case::a_key(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec(), CertificateError::NoCertificate)]
    #[case::not_base64(b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n".to_vec(), CertificateError::Base64("Invalid symbol 33, offset 0.".into()))]
    #[case::not_der(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec(), CertificateError::Der("not a SEQUENCE"))]
    #[case::length_cut(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".to_vec(), CertificateError::Der("bad length"))]
    #[case::content_cut(b"-----BEGIN CERTIFICATE-----\nMAUC\n-----END CERTIFICATE-----\n".to_vec(), CertificateError::Der("content beyond the end"))]
    fn refuses_what_is_no_certificate(#[case] pem: Vec<u8>, #[case] want: CertificateError) {
        assert_eq!(not_after(&pem), Err(want));
    }

    #[rstest]
    #[case::utc("270228052624Z", false, Some(at(2027, 2, 28, 5, 26, 24)))]
    #[case::utc_1950s("500101000000Z", false, Some(at(1950, 1, 1, 0, 0, 0)))]
    #[case::generalized("20510601120000Z", true, Some(at(2051, 6, 1, 12, 0, 0)))]
    #[case::no_zone("270228052624", false, None)]
    #[case::month_13("271328052624Z", false, None)]
    #[case::letters("27022805262xZ", false, None)]
    fn times(#[case] text: &str, #[case] generalized: bool, #[case] want: Option<OffsetDateTime>) {
        assert_eq!(
            parse_time(text, generalized).ok(),
            want.map(|t| t.unix_timestamp())
        );
    }

    fn map(entries: &[(&str, i64)]) -> BTreeMap<String, i64> {
        entries.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[rstest]
    #[case::same(&[("routes", 10)], &[("routes", 10)], &[])]
    #[case::rotated(&[("routes", 20), ("client", 5)], &[("routes", 10), ("client", 5)], &["routes"])]
    #[case::not_reported(&[("client", 20)], &[], &[])]
    #[case::reported_without_a_secret(&[], &[("routes", 10)], &[])]
    fn stale_listeners(
        #[case] desired: &[(&str, i64)],
        #[case] loaded: &[(&str, i64)],
        #[case] want: &[&str],
    ) {
        assert_eq!(stale(&map(desired), &map(loaded)), want);
    }

    #[test]
    fn only_current_servers_that_answered_are_reloaded() {
        let desired = map(&[("routes", 20)]);
        let loaded: BTreeMap<String, BTreeMap<String, i64>> = [
            ("demo-0".to_string(), map(&[("routes", 10)])),
            ("demo-1".to_string(), map(&[("routes", 20)])),
            ("demo-2".to_string(), map(&[("routes", 10)])),
        ]
        .into();
        let current = [
            "demo-0".to_string(),
            "demo-1".to_string(),
            "demo-3".to_string(),
        ];
        assert_eq!(
            to_reload(&current, &desired, &loaded),
            vec![("demo-0".to_string(), vec!["routes".to_string()])],
            "demo-1 is current, demo-2 is being stepped, demo-3 did not answer"
        );
    }

    #[test]
    fn desired_names_unreadable_certificates() {
        let listeners: BTreeMap<&'static str, BTreeMap<String, Vec<u8>>> = [
            (
                "routes",
                [(CERT_FILE.to_string(), cert_until(at(2027, 1, 1, 0, 0, 0)))].into(),
            ),
            ("client", [(CERT_FILE.to_string(), b"junk".to_vec())].into()),
            ("gateway", [("ca.crt".to_string(), b"x".to_vec())].into()),
        ]
        .into();
        let (got, unreadable) = desired(&listeners);
        assert_eq!(
            got,
            map(&[("routes", at(2027, 1, 1, 0, 0, 0).unix_timestamp())])
        );
        assert_eq!(unreadable, vec!["client tls.crt: no PEM CERTIFICATE block"]);
    }

    #[test]
    fn restart_material_moves_with_any_file_and_only_without_a_system_user() {
        let files = |crt: &[u8]| -> BTreeMap<&'static str, BTreeMap<String, Vec<u8>>> {
            [("routes", [(CERT_FILE.to_string(), crt.to_vec())].into())].into()
        };
        let a = restart_material(&files(b"a"), false);
        assert!(a.is_some());
        assert_eq!(a, restart_material(&files(b"a"), false));
        assert_ne!(a, restart_material(&files(b"b"), false));
        assert_eq!(restart_material(&files(b"a"), true), None);
        assert_eq!(restart_material(&BTreeMap::new(), false), None);
    }
}
