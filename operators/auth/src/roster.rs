//! The roster with memory (§5.3). Who the servers are is not only who answers STATSZ now: a
//! server that stops answering (paused, partitioned, down) must count as down, or an account is
//! signed from an incomplete revocation list and a deleted user's finalizer releases before the
//! silent server took the revocation. So the roster is every server that answered, plus every
//! server recorded before (in a distribution's status, or by this process) that has not answered
//! since: those are marked silent from the first pass that missed them.
//!
//! A recorded server silent for longer than [`FORGET_SILENT_AFTER`] is forgotten, since a server
//! scaled away never answers again and would otherwise hold every distributed account for good.
//! What that gives up is bounded: a forgotten server that comes back is heard again, and what it
//! holds (a newer JWT, more revocations) is taken back from its CLAIMS.LOOKUP answer before the
//! account is signed again.
//!
//! A server that announced its shutdown (`$SYS.SERVER.<id>.LAMEDUCK` or `.SHUTDOWN`, sent on a
//! clean stop and never by a server cut off, see `nats_wire::events`) is forgotten sooner, after [`FORGET_SHUT_DOWN_AFTER`]: a stopped
//! server admits no client while it is down, which is what the memory guards against, and a server
//! scaled away or a NatsCluster deleted would otherwise hold every account for the full window.
//! The short wait keeps a server restarting in place (a rolling restart's pod) counted as down
//! until it answers again under its name.
//!
//! A roster is one NATS deployment's, and one deployment trusts one operator: the controller
//! keeps one per NATS operator public key, and merges an account's record only when the JWT it
//! was recorded with was issued under that operator ([`recorded_under`]). The servers another
//! operator's objects recorded belong to another deployment (a second supercluster, or the one
//! a moved system connection used to reach) and would otherwise be counted as this deployment's
//! silent servers.

use std::collections::BTreeSet;
use std::time::Duration;

use nats_api::auth::RosterServer;

/// How long a recorded server may stay silent before the roster forgets it.
pub const FORGET_SILENT_AFTER: Duration = Duration::from_secs(15 * 60);

/// How long a recorded server that announced its shutdown may stay silent before it is forgotten.
pub const FORGET_SHUT_DOWN_AFTER: Duration = Duration::from_secs(30);

/// How long the roster remembers silent servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forget {
    /// A server that stopped answering without a word.
    pub silent: Duration,
    /// A server that announced its shutdown.
    pub shut_down: Duration,
}

impl Forget {
    /// The windows the controller runs with.
    pub const DEFAULT: Forget = Forget {
        silent: FORGET_SILENT_AFTER,
        shut_down: FORGET_SHUT_DOWN_AFTER,
    };
}

/// A server that answered STATSZ: its name and its id of this start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub name: String,
    pub id: String,
}

/// The roster of one pass: sorted by name, silent servers marked with the unix second they were
/// first missed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Roster {
    pub servers: Vec<Member>,
}

/// One server of a [`Roster`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub id: String,
    /// Unix seconds since it has not answered; `None` while it answers.
    pub silent_since: Option<i64>,
}

impl Roster {
    /// Every server counted: those answering and those silent.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// How many answered STATSZ.
    pub fn answering(&self) -> usize {
        self.servers
            .iter()
            .filter(|m| m.silent_since.is_none())
            .count()
    }

    /// The names of the servers that did not answer.
    pub fn silent(&self) -> Vec<&str> {
        self.servers
            .iter()
            .filter(|m| m.silent_since.is_some())
            .map(|m| m.name.as_str())
            .collect()
    }

    /// As status.distribution.roster records it.
    pub fn to_status(
        &self,
        time_of: impl Fn(i64) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    ) -> Vec<RosterServer> {
        self.servers
            .iter()
            .map(|m| RosterServer {
                name: m.name.clone(),
                id: m.id.clone(),
                silent_since: m.silent_since.map(&time_of),
            })
            .collect()
    }

    /// Read back from status.distribution.roster.
    pub fn from_status(recorded: &[RosterServer]) -> Roster {
        Roster {
            servers: recorded
                .iter()
                .map(|r| Member {
                    name: r.name.clone(),
                    id: r.id.clone(),
                    silent_since: r.silent_since.as_ref().map(|t| t.0.as_second()),
                })
                .collect(),
        }
    }
}

/// Whether an announced shutdown heard at a unix second is still kept at `now`: for as long as
/// a silent server is remembered at all, since any record (a status, this process) may name its
/// server silent until then, and judged without the announcement it would be held for the full
/// window again.
pub fn keep_shutdown(now: i64) -> impl Fn(i64) -> bool {
    let window = i64::try_from(FORGET_SILENT_AFTER.as_secs()).unwrap_or(i64::MAX);
    move |heard_at| now.saturating_sub(heard_at) <= window
}

/// Whether a CLAIMS.LOOKUP that expected `asked` answers (the servers this process knew of when
/// it asked, alongside STATSZ) heard enough of a roster of `roster` servers: one that expected
/// fewer may have stopped before a server the roster has since gained answered, and is asked
/// again expecting them all; one that expected more waited its deadline for a server gone
/// silent, as one asking after STATSZ would have.
pub fn lookup_heard_enough(asked: usize, roster: usize) -> bool {
    asked >= roster
}

/// The phrase a hold names the silent servers with: "c1-2 does not answer".
pub fn silent_phrase(silent: &[&str]) -> Option<String> {
    match silent {
        [] => None,
        [one] => Some(format!("{one} does not answer")),
        many => Some(format!("{} do not answer", many.join(", "))),
    }
}

/// Whether an account's status record describes the deployment of the operator whose JWT is
/// `operator_jwt`: the account JWT it was recorded with (`recorded_jwt`) was issued by the
/// operator's identity or a signing key that JWT lists. An account of a NatsOperator deleted and
/// made again under its name with new keys (stories 02, 06 and 09 each make `nats-system/demo`)
/// recorded another deployment's servers, which would count silent here for the full window.
/// What cannot be judged (no JWT recorded, a JWT that does not decode) counts as this
/// deployment's: a server wrongly counted silent only delays, a silent one dropped could let an
/// account be signed without the revocations it holds.
pub fn recorded_under(operator_jwt: &str, recorded_jwt: Option<&str>) -> bool {
    use nats_claims::{Account, Operator, decode_unverified};
    let (Ok(op), Some(Ok(acct))) = (
        decode_unverified::<Operator>(operator_jwt),
        recorded_jwt.map(decode_unverified::<Account>),
    ) else {
        return true;
    };
    acct.issuer == op.subject || op.nats.signing_keys.contains(&acct.issuer)
}

/// This pass's roster: every server of `answered` (its id as it answered, not silent), and every
/// server of `recorded` that did not answer, silent since it was first missed (`now` if this is
/// the first pass to miss it), unless that was longer than `forget.silent` ago, or
/// `forget.shut_down` ago for a server whose id is among `shut_down` (it announced its shutdown).
/// `recorded` may hold the same server more than once (several records merged); the newest
/// silence wins, so a server that answered in one record since it was missed in another is not
/// silent for longer.
pub fn remember(
    recorded: &[Member],
    answered: &[Answer],
    shut_down: &BTreeSet<String>,
    now: i64,
    forget: Forget,
) -> Roster {
    let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    let mut servers: Vec<Member> = answered
        .iter()
        .map(|a| Member {
            name: a.name.clone(),
            id: a.id.clone(),
            silent_since: None,
        })
        .collect();
    for r in recorded {
        if servers
            .iter()
            .any(|m| m.name == r.name && m.silent_since.is_none())
        {
            continue;
        }
        let since = r.silent_since.unwrap_or(now);
        let window = if shut_down.contains(&r.id) {
            forget.shut_down
        } else {
            forget.silent
        };
        if now.saturating_sub(since) > secs(window) {
            continue;
        }
        match servers.iter_mut().find(|m| m.name == r.name) {
            Some(m) => {
                if m.silent_since.is_some_and(|s| since > s) {
                    m.silent_since = Some(since);
                    m.id = r.id.clone();
                }
            }
            None => servers.push(Member {
                name: r.name.clone(),
                id: r.id.clone(),
                silent_since: Some(since),
            }),
        }
    }
    servers.sort_by(|a, b| a.name.cmp(&b.name));
    servers.dedup_by(|a, b| a.name == b.name);
    Roster { servers }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_claims::{KeyKind, NKey};
    use rstest::rstest;

    /// An operator JWT (identity `op`, listing `signing`) and an account JWT issued by `issuer`.
    fn jwts(op: &NKey, signing: &NKey, issuer: &NKey) -> (String, String) {
        let claims = crate::operator::operator_claims(
            "demo",
            &op.public_key(),
            &[signing.public_key()],
            "ASYS",
        );
        let operator = claims.encode(op).expect("operator claims encode");
        let account =
            nats_claims::AccountClaims::new(NKey::generate(KeyKind::Account).public_key())
                .encode(issuer)
                .expect("account claims encode");
        (operator, account)
    }

    #[rstest]
    #[case::the_roster_known(3, 3, true)]
    #[case::a_server_forgotten_since(3, 2, true)]
    #[case::a_server_new_since(2, 3, false)]
    #[case::none_known(0, 3, false)]
    fn a_lookup_asked_with_statsz_is_asked_again_only_for_a_new_server(
        #[case] asked: usize,
        #[case] roster: usize,
        #[case] enough: bool,
    ) {
        assert_eq!(lookup_heard_enough(asked, roster), enough);
    }

    #[rstest]
    #[case::by_a_listed_signing_key("signing", true)]
    #[case::by_the_identity("identity", true)]
    #[case::by_another_operators_key("other", false)]
    fn a_record_counts_only_under_the_operator_that_issued_its_jwt(
        #[case] issuer: &str,
        #[case] want: bool,
    ) {
        let (op, signing, other) = (
            NKey::generate(KeyKind::Operator),
            NKey::generate(KeyKind::Operator),
            NKey::generate(KeyKind::Operator),
        );
        let by = match issuer {
            "signing" => &signing,
            "identity" => &op,
            _ => &other,
        };
        let (operator, account) = jwts(&op, &signing, by);
        assert_eq!(recorded_under(&operator, Some(&account)), want);
    }

    #[rstest]
    #[case::no_jwt_recorded(None)]
    #[case::a_jwt_that_does_not_decode(Some("not.a.jwt"))]
    fn what_cannot_be_judged_counts_as_this_deployments(#[case] recorded: Option<&str>) {
        let (op, signing) = (
            NKey::generate(KeyKind::Operator),
            NKey::generate(KeyKind::Operator),
        );
        let (operator, _) = jwts(&op, &signing, &signing);
        assert!(recorded_under(&operator, recorded));
    }

    const NOW: i64 = 10_000;
    const FORGET: Forget = Forget {
        silent: Duration::from_secs(900),
        shut_down: Duration::from_secs(30),
    };

    fn up(name: &str, id: &str) -> Member {
        Member {
            name: name.into(),
            id: id.into(),
            silent_since: None,
        }
    }

    fn silent(name: &str, id: &str, since: i64) -> Member {
        Member {
            name: name.into(),
            id: id.into(),
            silent_since: Some(since),
        }
    }

    fn answer(name: &str, id: &str) -> Answer {
        Answer {
            name: name.into(),
            id: id.into(),
        }
    }

    #[rstest]
    #[case::all_answer(vec![up("c1-0", "A"), up("c1-1", "B")], vec![answer("c1-0", "A"), answer("c1-1", "B")], vec![up("c1-0", "A"), up("c1-1", "B")])]
    #[case::nothing_recorded(vec![], vec![answer("c1-1", "B"), answer("c1-0", "A")], vec![up("c1-0", "A"), up("c1-1", "B")])]
    #[case::a_recorded_server_falls_silent_now(vec![up("c1-0", "A"), up("c1-2", "C")], vec![answer("c1-0", "A")], vec![up("c1-0", "A"), silent("c1-2", "C", NOW)])]
    #[case::silent_since_is_kept(vec![silent("c1-2", "C", NOW - 60)], vec![answer("c1-0", "A")], vec![up("c1-0", "A"), silent("c1-2", "C", NOW - 60)])]
    #[case::forgotten_past_the_window(vec![silent("c1-2", "C", NOW - 901)], vec![answer("c1-0", "A")], vec![up("c1-0", "A")])]
    #[case::kept_at_the_window(vec![silent("c1-2", "C", NOW - 900)], vec![answer("c1-0", "A")], vec![up("c1-0", "A"), silent("c1-2", "C", NOW - 900)])]
    #[case::back_under_a_new_id(vec![silent("c1-2", "C", NOW - 60)], vec![answer("c1-2", "C2")], vec![up("c1-2", "C2")])]
    #[case::newest_silence_of_two_records(vec![silent("c1-2", "C", NOW - 600), silent("c1-2", "C", NOW - 30)], vec![], vec![silent("c1-2", "C", NOW - 30)])]
    #[case::answered_in_one_record_missed_now(vec![up("c1-2", "C"), silent("c1-2", "C", NOW - 600)], vec![], vec![silent("c1-2", "C", NOW)])]
    fn roster_with_memory(
        #[case] recorded: Vec<Member>,
        #[case] answered: Vec<Answer>,
        #[case] want: Vec<Member>,
    ) {
        let none = BTreeSet::new();
        assert_eq!(
            remember(&recorded, &answered, &none, NOW, FORGET).servers,
            want
        );
    }

    /// A server that announced its shutdown is forgotten after the short window; the id decides,
    /// so a server back under its name with a new id and stopped again is judged by its new id.
    #[rstest]
    #[case::announced_and_silent_past_the_short_window(vec![silent("c1-2", "C", NOW - 31)], &["C"], vec![])]
    #[case::announced_kept_within_it(vec![silent("c1-2", "C", NOW - 30)], &["C"], vec![silent("c1-2", "C", NOW - 30)])]
    #[case::announced_first_missed_now(vec![up("c1-2", "C")], &["C"], vec![silent("c1-2", "C", NOW)])]
    #[case::unannounced_kept(vec![silent("c1-2", "C", NOW - 600)], &["D"], vec![silent("c1-2", "C", NOW - 600)])]
    #[case::an_earlier_id_announced(vec![silent("c1-2", "C2", NOW - 600)], &["C"], vec![silent("c1-2", "C2", NOW - 600)])]
    fn announced_shutdowns(
        #[case] recorded: Vec<Member>,
        #[case] shut_down: &[&str],
        #[case] want: Vec<Member>,
    ) {
        let shut_down: BTreeSet<String> = shut_down.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            remember(&recorded, &[], &shut_down, NOW, FORGET).servers,
            want
        );
    }

    #[rstest]
    #[case::just_heard(NOW, true)]
    #[case::at_the_silent_window(NOW - 900, true)]
    #[case::past_it(NOW - 901, false)]
    fn an_announced_shutdown_is_kept_as_long_as_a_silence_is_remembered(
        #[case] heard_at: i64,
        #[case] kept: bool,
    ) {
        assert_eq!(keep_shutdown(NOW)(heard_at), kept);
    }

    #[test]
    fn counts_and_names() {
        let r = Roster {
            servers: vec![
                up("c1-0", "A"),
                silent("c1-1", "B", 1),
                silent("c1-2", "C", 2),
            ],
        };
        assert_eq!((r.len(), r.answering()), (3, 1));
        assert_eq!(r.silent(), ["c1-1", "c1-2"]);
        assert_eq!(
            silent_phrase(&r.silent()).as_deref(),
            Some("c1-1, c1-2 do not answer")
        );
        assert_eq!(
            silent_phrase(&["c1-2"]).as_deref(),
            Some("c1-2 does not answer")
        );
        assert_eq!(silent_phrase(&[]), None);
    }

    #[test]
    fn status_round_trip() {
        let r = Roster {
            servers: vec![up("c1-0", "A"), silent("c1-2", "C", 1_700_000_000)],
        };
        let status = r.to_status(|s| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(s).unwrap(),
            )
        });
        assert_eq!(Roster::from_status(&status), r);
    }
}
