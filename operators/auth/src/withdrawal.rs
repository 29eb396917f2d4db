//! §7 A withdrawn grant revokes what it admitted: a NatsUser of an account in another namespace
//! whose grant is gone has its key revoked in the account JWT from the time the first pass found
//! it gone (status.withdrawnAt), pushed to every server and its connections kicked, as a deletion
//! does (§5.3); a grant restored re-admits the same key under a fresh JWT issued after that time.
//!
//! The revocation is not lifted when the user is admitted again: lifting it would bring back
//! every JWT the key was issued before the withdrawal, whose permissions may be older than the
//! spec in force. The fresh JWT's issue time is after the revocation's, which is all the server
//! checks (a JWT is revoked when the revocation's time is at or after its `iat`).

use std::time::Duration;

/// The withdrawal time to record for a user that no grant admits: the one recorded before, else
/// `now` where the user was ever signed under a key (nothing to revoke otherwise). `None` for a
/// user still admitted, or for one refused because its account is itself not admitted (the
/// account, not the user, is then deleted from the servers, §6).
pub fn withdrawn_at(
    recorded: Option<i64>,
    account_admitted: bool,
    signed_key: Option<&str>,
    now: i64,
) -> Option<i64> {
    if !account_admitted {
        return recorded;
    }
    recorded.or(signed_key.map(|_| now))
}

/// Where a withdrawn user's revocation stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The account JWT does not revoke the key from the withdrawal time yet.
    Signing,
    /// The account JWT revokes it; not every server holds that JWT yet.
    Distributing,
    /// Every server refuses the key (or nothing is pushed without a system connection): its
    /// connections are kicked.
    Revoked,
}

/// The stage of a withdrawal at `at`, from the account JWT's revocation time of the key (if any)
/// and whether every server holds that JWT.
pub fn stage(revoked_at: Option<i64>, at: i64, every_server: bool) -> Stage {
    match revoked_at {
        Some(r) if r >= at && every_server => Stage::Revoked,
        Some(r) if r >= at => Stage::Distributing,
        _ => Stage::Signing,
    }
}

/// How a user admitted again is issued its JWT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reissue {
    /// Neither withdrawn nor revoked: the JWT of before is kept while nothing changed.
    Stable,
    /// Withdrawn, or its JWT of before revoked, at a time before `now`: a fresh JWT issued now,
    /// after the revocation.
    Fresh,
    /// Withdrawn or revoked this very second: a JWT issued now would still be revoked (the
    /// server revokes `iat <= at`); issued once this has passed.
    After(Duration),
}

/// The issue of a live, admitted user's JWT: fresh where it was withdrawn (`withdrawn_at`) or
/// where the account JWT revokes its key (`revoked_at`) at or after the issue time of the JWT
/// of before (`prev_iat`). A live user never keeps a JWT the servers refuse, whether its
/// status recorded the withdrawal or lost it.
pub fn reissue(
    withdrawn_at: Option<i64>,
    revoked_at: Option<i64>,
    prev_iat: Option<i64>,
    now: i64,
) -> Reissue {
    let revoked = revoked_at.filter(|r| prev_iat.is_some_and(|i| *r >= i));
    match withdrawn_at.max(revoked) {
        None => Reissue::Stable,
        Some(at) if now > at => Reissue::Fresh,
        Some(at) => Reissue::After(Duration::from_secs((at + 1 - now).max(1) as u64)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const T: i64 = 1_700_000_000;

    #[rstest]
    #[case::admitted_never_signed_records_nothing(None, true, None, None)]
    #[case::signed_user_found_withdrawn_records_now(None, true, Some("UA"), Some(T))]
    #[case::the_first_time_is_kept(Some(T - 60), true, Some("UA"), Some(T - 60))]
    #[case::account_itself_not_admitted_records_nothing(None, false, Some("UA"), None)]
    #[case::account_not_admitted_keeps_what_was_recorded(Some(T - 5), false, Some("UA"), Some(T - 5))]
    fn withdrawal_time(
        #[case] recorded: Option<i64>,
        #[case] account_admitted: bool,
        #[case] key: Option<&str>,
        #[case] want: Option<i64>,
    ) {
        assert_eq!(withdrawn_at(recorded, account_admitted, key, T), want);
    }

    #[rstest]
    #[case::not_in_the_jwt(None, true, Stage::Signing)]
    #[case::revoked_before_the_withdrawal_only(Some(T - 1), true, Stage::Signing)]
    #[case::revoked_but_servers_behind(Some(T), false, Stage::Distributing)]
    #[case::revoked_everywhere(Some(T), true, Stage::Revoked)]
    #[case::a_later_revocation_counts(Some(T + 30), true, Stage::Revoked)]
    fn stages(#[case] revoked_at: Option<i64>, #[case] every: bool, #[case] want: Stage) {
        assert_eq!(stage(revoked_at, T, every), want);
    }

    #[rstest]
    #[case::never_withdrawn(None, None, Some(T - 100), T, Reissue::Stable)]
    #[case::withdrawn_earlier(Some(T - 10), None, Some(T - 100), T, Reissue::Fresh)]
    #[case::withdrawn_this_second(Some(T), None, Some(T - 100), T, Reissue::After(Duration::from_secs(1)))]
    #[case::clock_behind_the_record(Some(T + 2), None, None, T, Reissue::After(Duration::from_secs(3)))]
    #[case::status_lost_but_the_jwt_of_before_revoked(None, Some(T - 10), Some(T - 100), T, Reissue::Fresh)]
    #[case::revoked_at_its_own_issue_second(None, Some(T - 100), Some(T - 100), T, Reissue::Fresh)]
    #[case::a_revocation_older_than_the_jwt_is_no_cause(None, Some(T - 200), Some(T - 100), T, Reissue::Stable)]
    #[case::no_jwt_of_before(None, Some(T - 10), None, T, Reissue::Stable)]
    #[case::revoked_this_second(None, Some(T), Some(T - 100), T, Reissue::After(Duration::from_secs(1)))]
    fn reissues(
        #[case] withdrawn: Option<i64>,
        #[case] revoked: Option<i64>,
        #[case] prev_iat: Option<i64>,
        #[case] now: i64,
        #[case] want: Reissue,
    ) {
        assert_eq!(reissue(withdrawn, revoked, prev_iat, now), want);
    }
}
