//! A supplied activation token (an import by public key, its token read from a Secret) judged as
//! nats-server judges it before it accepts the account JWT carrying it (nats-io/jwt v2
//! `Import.Validate`, every fault an error): a token a server would refuse makes every server
//! refuse the whole account JWT, which then never reaches them (Distributed False, ServersBehind,
//! with nothing naming why). So the import is reported unresolved instead, naming the fault, and
//! the JWT the servers hold stays.

use nats_claims::{Activation, ExportType, decode};

/// What the import expects of its token.
#[derive(Clone, Copy, Debug)]
pub struct Expected<'a> {
    /// The exporting account the import names (`publicKey`).
    pub exporter: &'a str,
    /// This account's public key.
    pub importer: &'a str,
    pub kind: ExportType,
    /// The import's subject.
    pub subject: &'a str,
    /// Unix seconds.
    pub now: i64,
}

/// Why nats-server would refuse `token` for the import, if it would.
pub fn fault(token: &str, want: &Expected<'_>) -> Option<String> {
    let act = match decode::<Activation>(token) {
        Ok(a) => a,
        Err(e) => return Some(format!("is not a valid activation token: {e}")),
    };
    if act.issuer != want.exporter && act.nats.issuer_account != want.exporter {
        return Some(format!(
            "was issued by {}, not by the exporting account {}",
            act.issuer, want.exporter
        ));
    }
    if act.subject != want.importer {
        return Some(format!(
            "grants account {}, not this account {}",
            act.subject, want.importer
        ));
    }
    if act.nats.import_type != Some(want.kind) {
        return Some(format!(
            "is for a {} import, not a {} one",
            kind_name(act.nats.import_type),
            kind_name(Some(want.kind))
        ));
    }
    if act.expires != 0 && act.expires < want.now {
        return Some(format!("expired at {} (unix seconds)", act.expires));
    }
    if act.not_before != 0 && act.not_before > want.now {
        return Some(format!(
            "is not valid before {} (unix seconds)",
            act.not_before
        ));
    }
    if !within(want.subject, &act.nats.import_subject) {
        return Some(format!(
            "grants {:?}, which does not cover the import's subject {:?}",
            act.nats.import_subject, want.subject
        ));
    }
    None
}

fn kind_name(k: Option<ExportType>) -> &'static str {
    match k {
        Some(ExportType::Stream) => "stream",
        Some(ExportType::Service) => "service",
        None => "untyped",
    }
}

/// Whether every subject `subject` matches is matched by `pattern` (`*` one token, `>` the
/// rest): a wildcard in `subject` is covered only by the same or a wider one.
pub fn within(subject: &str, pattern: &str) -> bool {
    let (s, p): (Vec<&str>, Vec<&str>) =
        (subject.split('.').collect(), pattern.split('.').collect());
    for (i, pt) in p.iter().enumerate() {
        let Some(st) = s.get(i) else {
            return false;
        };
        match *pt {
            ">" => return true,
            "*" if *st != ">" => {}
            t if t == *st => {}
            _ => return false,
        }
    }
    s.len() == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_claims::{ActivationClaims, KeyKind, NKey};

    #[rstest::rstest]
    #[case::the_same("partner.rates.>", "partner.rates.>", true)]
    #[case::narrower("partner.rates.eur", "partner.rates.>", true)]
    #[case::one_token("partner.rates.eur", "partner.*.eur", true)]
    #[case::wider("partner.>", "partner.rates.>", false)]
    #[case::a_star_under_a_literal("partner.*", "partner.rates", false)]
    #[case::a_tail_under_a_star("partner.>", "partner.*", false)]
    #[case::shorter("partner", "partner.rates", false)]
    #[case::longer("partner.rates.eur", "partner.rates", false)]
    fn a_subject_within_a_pattern(
        #[case] subject: &str,
        #[case] pattern: &str,
        #[case] want: bool,
    ) {
        assert_eq!(within(subject, pattern), want);
    }

    const NOW: i64 = 1_790_000_000;

    /// One row per refusal nats-server makes of an import's token (jwt v2 `Import.Validate`).
    #[test]
    fn a_supplied_token_row_by_row() {
        let exporter = NKey::generate(KeyKind::Account);
        let stranger = NKey::generate(KeyKind::Account);
        let me = NKey::generate(KeyKind::Account).public_key();
        let other = NKey::generate(KeyKind::Account).public_key();
        let ex = exporter.public_key();
        let want = Expected {
            exporter: &ex,
            importer: &me,
            kind: ExportType::Service,
            subject: "partner.rates.>",
            now: NOW,
        };
        let token = |signer: &NKey, sub: &str, kind: ExportType, subject: &str, exp: i64| {
            let mut c = ActivationClaims::new(sub, subject, kind);
            c.expires = exp;
            c.encode_issued_at(signer, NOW - 10).expect("signed")
        };
        let cases: Vec<(&str, String, Option<&str>)> = vec![
            (
                "the exporter's, for this account: accepted",
                token(&exporter, &me, ExportType::Service, "partner.rates.>", 0),
                None,
            ),
            (
                "not a JWT",
                "garbage".into(),
                Some("is not a valid activation token"),
            ),
            (
                "another account's (the docs' partner key, a run's own key)",
                token(&stranger, &me, ExportType::Service, "partner.rates.>", 0),
                Some("not by the exporting account"),
            ),
            (
                "for another importer",
                token(&exporter, &other, ExportType::Service, "partner.rates.>", 0),
                Some("not this account"),
            ),
            (
                "for a stream import",
                token(&exporter, &me, ExportType::Stream, "partner.rates.>", 0),
                Some("is for a stream import, not a service one"),
            ),
            (
                "expired",
                token(
                    &exporter,
                    &me,
                    ExportType::Service,
                    "partner.rates.>",
                    NOW - 1,
                ),
                Some("expired at"),
            ),
            (
                "for a narrower subject",
                token(&exporter, &me, ExportType::Service, "partner.rates.eur", 0),
                Some("does not cover the import's subject"),
            ),
        ];
        for (case, t, want_fault) in cases {
            let got = fault(&t, &want);
            match (got.as_deref(), want_fault) {
                (None, None) => {}
                (Some(g), Some(w)) => assert!(g.contains(w), "{case}: {g}"),
                (g, w) => panic!("{case}: got {g:?}, wanted {w:?}"),
            }
        }
    }
}
