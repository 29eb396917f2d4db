//! §5.2 status.distribution — "N of M servers hold this JWT" from the STATSZ roster (with memory,
//! [`crate::roster`]) and each server's CLAIMS.LOOKUP (the server offers no aggregate) — and §5.3's
//! decision while a roster server does not answer: RecoveringRevocations or RevocationsUnrecovered.
//!
//! The hold guards against signing from an incomplete revocation list, which only a lost or stale
//! record can be: the record is written before the JWT it signs, so while status.jwt is there and
//! no answering server holds a newer JWT, the record is the newest list, and a deleted user's
//! revocation is signed and pushed to the servers that answer (the finalizer then waits for the
//! silent one). With the status lost, or a newer JWT held than status.jwt (a restored backup), a
//! silent server may hold the only copy of a revocation: nothing is signed until it answers.

use nats_api::auth::Distribution;
use nats_wire::sys::LookupAnswer;

/// `current` of `servers`: how many lookup answers hold exactly `jwt`, out of the roster size.
/// Lookup answers carry no server identity, so they are counted, never more than the roster.
pub fn distribution(roster: usize, lookups: &[LookupAnswer], jwt: &str) -> Distribution {
    let current = lookups.iter().filter(|a| a.jwt() == Some(jwt)).count();
    let servers = u32::try_from(roster).unwrap_or(u32::MAX);
    Distribution {
        servers,
        current: u32::try_from(current.min(roster)).unwrap_or(u32::MAX),
        ..Default::default()
    }
}

/// "N of M servers hold this JWT", naming the roster's silent servers.
pub fn describe(d: &Distribution) -> String {
    let mut s = format!("{} of {} servers hold this JWT", d.current, d.servers);
    if let Some(p) = silent_phrase(d) {
        s.push_str("; ");
        s.push_str(&p);
    }
    s
}

/// "c1-2 does not answer" for the silent servers of `d`'s roster.
pub fn silent_phrase(d: &Distribution) -> Option<String> {
    let silent: Vec<&str> = d
        .roster
        .iter()
        .filter(|r| r.silent_since.is_some())
        .map(|r| r.name.as_str())
        .collect();
    crate::roster::silent_phrase(&silent)
}

/// Every server current: what a deleted user's finalizer waits on.
pub fn all_current(d: &Distribution) -> bool {
    d.servers > 0 && d.current == d.servers
}

/// What an account's status record is worth while a roster server does not answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// status.jwt is there and no answering server holds a newer JWT: the record is complete
    /// (every revocation is recorded before the JWT carrying it is signed), so what a silent
    /// server holds is at most what it records.
    Kept,
    /// status.jwt is there but an answering server holds a newer JWT: the status was restored
    /// from a backup, or something else signs; a silent server may hold newer still.
    Stale,
    /// No status.jwt: the status was lost, or the account is new. `distributed`: its
    /// status.distribution records a server current, or an answering server holds a JWT of it.
    Lost { distributed: bool },
}

/// The iat of an account JWT, unverified (what a server holds is compared, not trusted).
pub fn issued_at(jwt: Option<&str>) -> Option<i64> {
    nats_claims::decode_unverified::<nats_claims::Account>(jwt?)
        .ok()
        .map(|c| c.issued_at)
}

/// Judges the record from the iat of status.jwt, the iats of the JWTs the answering servers
/// hold, and status.distribution.
pub fn record(
    status_iat: Option<i64>,
    held_iats: &[i64],
    recorded: Option<&Distribution>,
) -> Record {
    match status_iat {
        Some(ours) if held_iats.iter().any(|h| *h > ours) => Record::Stale,
        Some(_) => Record::Kept,
        None => Record::Lost {
            distributed: !held_iats.is_empty() || recorded.is_some_and(|d| d.current > 0),
        },
    }
}

/// Whether and how to sign an account while some roster servers may not have answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Every roster server answered: sign from the record and what they hold.
    Sign,
    /// Some did not, and the record is kept: sign from it (a deletion's revocation is pushed to
    /// those that answer; a silent server takes it when it answers again).
    SignFromRecord { missing: usize },
    /// Some did not, and the account was never distributed: sign, with the condition
    /// RevocationsUnrecovered True, and ask again once they answer.
    SignUnrecovered { missing: usize },
    /// Some did not, and the account was distributed with its record lost or stale: a missing
    /// server may hold a newer JWT; do not sign (Ready False, reason RecoveringRevocations).
    Hold { missing: usize },
}

/// Decides from the roster size (with memory: silent recorded servers count), how many answered
/// the lookup, and what the status record is worth (§5.3: an account distributed is not signed
/// while a server that may hold a newer JWT is silent; a new one is signed unrecovered).
pub fn recovery(roster: usize, answered: usize, record: Record) -> Recovery {
    let missing = roster.saturating_sub(answered);
    if missing == 0 {
        return Recovery::Sign;
    }
    match record {
        Record::Kept => Recovery::SignFromRecord { missing },
        Record::Stale | Record::Lost { distributed: true } => Recovery::Hold { missing },
        Record::Lost { distributed: false } => Recovery::SignUnrecovered { missing },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn holds(j: &str) -> LookupAnswer {
        LookupAnswer::Holds(j.into())
    }

    #[rstest]
    #[case::all_three_current(3, vec![holds("J"), holds("J"), holds("J")], "3 of 3 servers hold this JWT", true)]
    #[case::one_behind(3, vec![holds("J"), holds("OLD"), holds("J")], "2 of 3 servers hold this JWT", false)]
    #[case::one_absent(3, vec![holds("J"), LookupAnswer::Absent, holds("J")], "2 of 3 servers hold this JWT", false)]
    #[case::one_silent(3, vec![holds("J"), holds("J")], "2 of 3 servers hold this JWT", false)]
    #[case::never_more_than_the_roster(2, vec![holds("J"), holds("J"), holds("J")], "2 of 2 servers hold this JWT", true)]
    #[case::empty_roster(0, vec![], "0 of 0 servers hold this JWT", false)]
    fn n_of_m(
        #[case] roster: usize,
        #[case] lookups: Vec<LookupAnswer>,
        #[case] text: &str,
        #[case] current: bool,
    ) {
        let d = distribution(roster, &lookups, "J");
        assert_eq!(describe(&d), text);
        assert_eq!(all_current(&d), current);
    }

    fn recorded(current: u32) -> Distribution {
        Distribution {
            servers: 3,
            current,
            ..Default::default()
        }
    }

    // "While any server of the STATSZ roster does not answer ... an account whose
    // status.distribution records it distributed is not signed ... RecoveringRevocations; any
    // other, a new account among them, is signed with the condition RevocationsUnrecovered True"
    #[rstest]
    #[case::all_answered(3, 3, Record::Kept, Recovery::Sign)]
    #[case::all_answered_status_lost(3, 3, Record::Lost { distributed: true }, Recovery::Sign)]
    #[case::record_kept_with_a_silent_server(3, 2, Record::Kept, Recovery::SignFromRecord { missing: 1 })]
    #[case::record_stale_with_a_silent_server(3, 2, Record::Stale, Recovery::Hold { missing: 1 })]
    #[case::status_lost_but_distributed(3, 2, Record::Lost { distributed: true }, Recovery::Hold { missing: 1 })]
    #[case::new_account_with_a_silent_server(3, 2, Record::Lost { distributed: false }, Recovery::SignUnrecovered { missing: 1 })]
    fn recovering_revocations(
        #[case] roster: usize,
        #[case] answered: usize,
        #[case] rec: Record,
        #[case] want: Recovery,
    ) {
        assert_eq!(recovery(roster, answered, rec), want);
    }

    #[rstest]
    #[case::kept(Some(100), vec![100, 90], None, Record::Kept)]
    #[case::kept_nothing_held(Some(100), vec![], None, Record::Kept)]
    #[case::stale_a_server_holds_newer(Some(100), vec![100, 120], None, Record::Stale)]
    #[case::lost_held_by_a_server(None, vec![100], None, Record::Lost { distributed: true })]
    #[case::lost_recorded_current(None, vec![], Some(recorded(3)), Record::Lost { distributed: true })]
    #[case::lost_never_current(None, vec![], Some(recorded(0)), Record::Lost { distributed: false })]
    #[case::new(None, vec![], None, Record::Lost { distributed: false })]
    fn the_record_judged(
        #[case] ours: Option<i64>,
        #[case] held: Vec<i64>,
        #[case] rec: Option<Distribution>,
        #[case] want: Record,
    ) {
        assert_eq!(record(ours, &held, rec.as_ref()), want);
    }

    #[test]
    fn describe_names_the_silent_servers() {
        let mut d = recorded(2);
        d.roster = vec![
            nats_api::auth::RosterServer {
                name: "c1-0".into(),
                id: "A".into(),
                silent_since: None,
            },
            nats_api::auth::RosterServer {
                name: "c1-2".into(),
                id: "C".into(),
                silent_since: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::from_second(1).unwrap(),
                )),
            },
        ];
        assert_eq!(
            describe(&d),
            "2 of 3 servers hold this JWT; c1-2 does not answer"
        );
    }
}
