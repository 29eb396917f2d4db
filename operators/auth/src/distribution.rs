//! §5.2 status.distribution — "N of M servers hold this JWT" from the STATSZ roster and each
//! server's CLAIMS.LOOKUP (the server offers no aggregate) — and §5.3's decision while a roster
//! server does not answer: RecoveringRevocations or RevocationsUnrecovered.

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

/// Whether and how to sign an account while some roster servers may not have answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Every roster server answered: sign from the record and what they hold.
    Sign,
    /// Some did not, and the account was never recorded distributed: sign, with the condition
    /// RevocationsUnrecovered True, and ask again once they answer.
    SignUnrecovered { missing: usize },
    /// Some did not, and status.distribution records the account distributed: a missing server
    /// may hold a newer JWT; do not sign (Ready False, reason RecoveringRevocations).
    Hold { missing: usize },
}

/// Decides from the roster size (with memory: silent recorded servers count), how many answered
/// the lookup, and whether the account was distributed: its status.distribution records some
/// server current, or, with the status lost, some answering server holds a JWT of it (`held`).
pub fn recovery(
    roster: usize,
    answered: usize,
    recorded: Option<&Distribution>,
    held: bool,
) -> Recovery {
    let missing = roster.saturating_sub(answered);
    if missing == 0 {
        return Recovery::Sign;
    }
    if held || recorded.is_some_and(|d| d.current > 0) {
        Recovery::Hold { missing }
    } else {
        Recovery::SignUnrecovered { missing }
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
    #[case::all_answered(3, 3, Some(recorded(3)), false, Recovery::Sign)]
    #[case::all_answered_status_lost(3, 3, None, true, Recovery::Sign)]
    #[case::distributed_account_with_a_silent_server(3, 2, Some(recorded(3)), true, Recovery::Hold { missing: 1 })]
    #[case::status_lost_but_the_servers_hold_it(3, 2, None, true, Recovery::Hold { missing: 1 })]
    #[case::new_account_with_a_silent_server(3, 2, None, false, Recovery::SignUnrecovered { missing: 1 })]
    #[case::never_distributed_account(3, 1, Some(recorded(0)), false, Recovery::SignUnrecovered { missing: 2 })]
    fn recovering_revocations(
        #[case] roster: usize,
        #[case] answered: usize,
        #[case] rec: Option<Distribution>,
        #[case] held: bool,
        #[case] want: Recovery,
    ) {
        assert_eq!(recovery(roster, answered, rec.as_ref(), held), want);
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
