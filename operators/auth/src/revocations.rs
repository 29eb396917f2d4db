//! §5.3 The revocation record (status.revocations of a NatsAccount or NatsSystemAccount): a
//! deleted user's key, a replaced key, or `*`, each with the signing keys that may have issued a
//! revoked JWT. The account JWT is signed from that record and the JWT it replaces, so losing
//! either keeps them; an entry is dropped once none of its signing keys is left on the account or
//! once the revoked JWT has expired.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nats_api::auth::Revocation;
use nats_claims::{AccountClaims, RevocationList};

fn time(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Adds a revocation of `public_key` (a user key or `*`) for JWTs issued at or before `at` by
/// any of `issuers`. A later time wins and issuers accumulate.
pub fn revoke(record: &mut Vec<Revocation>, public_key: &str, at: i64, issuers: &[String]) {
    match record.iter_mut().find(|r| r.public_key == public_key) {
        Some(r) => {
            if at > r.at.0.as_second() {
                r.at = time(at);
            }
            for i in issuers {
                if !r.issuers.contains(i) {
                    r.issuers.push(i.clone());
                }
            }
        }
        None => record.push(Revocation {
            public_key: public_key.to_string(),
            at: time(at),
            issuers: issuers.to_vec(),
        }),
    }
}

/// The record merged with the revocations of the JWT it replaces (or the one the servers hold,
/// recovered with CLAIMS.LOOKUP): an entry the record lost comes back with the signing keys that
/// JWT listed as its issuers.
pub fn merge_from_jwt(record: &[Revocation], previous: &AccountClaims) -> Vec<Revocation> {
    let mut out = record.to_vec();
    let issuers: Vec<String> = previous
        .nats
        .signing_keys
        .keys()
        .map(str::to_string)
        .collect();
    for (key, at) in &previous.nats.revocations {
        revoke(&mut out, key, *at, &issuers);
    }
    out
}

/// Drops what no longer revokes anything: entries none of whose signing keys is left on the
/// account (rotating the signing key is what resets the list), and entries whose revoked JWT
/// expired (`expires_of` gives that JWT's expiry, `None` or 0 for never, as users are signed).
pub fn prune(
    record: &[Revocation],
    account_signing_keys: &[String],
    expires_of: impl Fn(&str) -> Option<i64>,
    now: i64,
) -> Vec<Revocation> {
    record
        .iter()
        .filter(|r| {
            r.issuers.is_empty() || r.issuers.iter().any(|i| account_signing_keys.contains(i))
        })
        .filter(|r| !matches!(expires_of(&r.public_key), Some(e) if e != 0 && e <= now))
        .cloned()
        .collect()
}

/// The record as the account JWT's revocation list.
pub fn as_list(record: &[Revocation]) -> Vec<(String, i64)> {
    record
        .iter()
        .map(|r| (r.public_key.clone(), r.at.0.as_second()))
        .collect()
}

/// True where every entry of the record is in the JWT's list at or after its time: what a
/// deleted user's finalizer and status.replacedKeys wait on.
pub fn covered_by(record: &[Revocation], list: &RevocationList) -> bool {
    record.iter().all(|r| {
        list.get(&r.public_key)
            .is_some_and(|at| *at >= r.at.0.as_second())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const T: i64 = 1_700_000_000;

    fn rev(key: &str, at: i64, issuers: &[&str]) -> Revocation {
        Revocation {
            public_key: key.into(),
            at: time(at),
            issuers: issuers.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[rstest]
    #[case::user_deletion_adds_its_key(vec![], "UGONE", T, &["AS1"], vec![rev("UGONE", T, &["AS1"])])]
    #[case::replaced_key_adds_the_old_key(vec![rev("UA", T, &["AS1"])], "UOLD", T + 1, &["AS1"], vec![rev("UA", T, &["AS1"]), rev("UOLD", T + 1, &["AS1"])])]
    #[case::revoke_all_with_star(vec![], "*", T, &["AS1", "AS2"], vec![rev("*", T, &["AS1", "AS2"])])]
    #[case::a_later_time_wins_and_issuers_accumulate(vec![rev("UA", T, &["AS1"])], "UA", T + 9, &["AS2"], vec![rev("UA", T + 9, &["AS1", "AS2"])])]
    #[case::an_earlier_time_never_lowers_it(vec![rev("UA", T, &["AS1"])], "UA", T - 9, &[], vec![rev("UA", T, &["AS1"])])]
    fn recording(
        #[case] mut record: Vec<Revocation>,
        #[case] key: &str,
        #[case] at: i64,
        #[case] issuers: &[&str],
        #[case] want: Vec<Revocation>,
    ) {
        revoke(&mut record, key, at, &keys(issuers));
        assert_eq!(record, want);
    }

    // "A revocation is dropped once none of those signing keys is left on the account, or once
    // the revoked JWT has expired"
    #[rstest]
    #[case::kept_while_its_signing_key_is_on_the_account(rev("UA", T, &["AS1"]), &["AS1", "AS2"], None, true)]
    #[case::dropped_once_no_listed_signing_key_is_left(rev("UA", T, &["AS1"]), &["AS2"], None, false)]
    #[case::star_dropped_after_rotation(rev("*", T, &["AS1", "AS2"]), &["AS3"], None, false)]
    #[case::dropped_once_the_revoked_jwt_expired(rev("UA", T, &["AS1"]), &["AS1"], Some(T + 10), false)]
    #[case::users_never_expire(rev("UA", T, &["AS1"]), &["AS1"], Some(0), true)]
    #[case::not_yet_expired(rev("UA", T, &["AS1"]), &["AS1"], Some(T + 1000), true)]
    fn pruning(
        #[case] r: Revocation,
        #[case] on_account: &[&str],
        #[case] expires: Option<i64>,
        #[case] kept: bool,
    ) {
        let out = prune(&[r], &keys(on_account), |_| expires, T + 100);
        assert_eq!(out.len() == 1, kept);
    }

    // "the account JWT is signed from that record and the JWT it replaces, so losing either keeps them"
    #[test]
    fn a_lost_record_comes_back_from_the_jwt() {
        let prev = AccountClaims::new("AACC")
            .signing_key("AS1")
            .revoke_at("UGONE", T)
            .revoke_at("*", T - 50);
        let merged = merge_from_jwt(&[rev("UNEW", T + 5, &["AS1"])], &prev);
        let mut got = as_list(&merged);
        got.sort();
        assert_eq!(
            got,
            [
                ("*".to_string(), T - 50),
                ("UGONE".to_string(), T),
                ("UNEW".to_string(), T + 5)
            ]
        );
        assert!(merged.iter().all(|r| r.issuers == ["AS1"]));
    }

    #[rstest]
    #[case::covered(vec![rev("UA", T, &[])], &[("UA", T)], true)]
    #[case::covered_later(vec![rev("UA", T, &[])], &[("UA", T + 1)], true)]
    #[case::missing(vec![rev("UA", T, &[])], &[], false)]
    #[case::older_in_jwt(vec![rev("UA", T, &[])], &[("UA", T - 1)], false)]
    fn the_jwt_covers_the_record(
        #[case] record: Vec<Revocation>,
        #[case] list: &[(&str, i64)],
        #[case] want: bool,
    ) {
        let list: RevocationList = list.iter().map(|(k, t)| (k.to_string(), *t)).collect();
        assert_eq!(covered_by(&record, &list), want);
    }
}
