//! §5.3 A user whose key changes (a new publicKey, or a creds Secret written afresh) has the key
//! it held revoked from that moment; status.replacedKeys holds each such key until the account
//! JWT revokes it, and a deleted user's finalizer waits on distribution and on those keys.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nats_api::auth::ReplacedKey;
use nats_claims::RevocationList;

/// The key the user held, where its key changed from `recorded` (status.publicKey) to `current`.
pub fn replaced(recorded: Option<&str>, current: &str) -> Option<String> {
    recorded.filter(|r| *r != current).map(str::to_string)
}

/// Adds a replaced key to status.replacedKeys.
pub fn hold(replaced_keys: &mut Vec<ReplacedKey>, public_key: &str, at: i64) {
    if replaced_keys.iter().any(|r| r.public_key == public_key) {
        return;
    }
    replaced_keys.push(ReplacedKey {
        public_key: public_key.to_string(),
        at: Time(Timestamp::from_second(at).unwrap_or(Timestamp::UNIX_EPOCH)),
    });
}

/// Keeps the replaced keys the account JWT does not revoke yet.
pub fn pending(
    replaced_keys: &[ReplacedKey],
    account_revocations: &RevocationList,
) -> Vec<ReplacedKey> {
    replaced_keys
        .iter()
        .filter(|r| {
            account_revocations
                .get(&r.public_key)
                .is_none_or(|at| *at < r.at.0.as_second())
        })
        .cloned()
        .collect()
}

/// A deleted user's finalizer is released once every server holds the account JWT revoking it
/// and no replaced key is pending; then its connections are kicked and its Secret goes last.
pub fn finalizer_may_proceed(all_servers_current: bool, pending_replaced: &[ReplacedKey]) -> bool {
    all_servers_current && pending_replaced.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const T: i64 = 1_700_000_000;

    #[rstest]
    #[case::first_key(None, "UNEW", None)]
    #[case::same_key(Some("UA"), "UA", None)]
    #[case::new_public_key_replaces_the_old(Some("UOLD"), "UNEW", Some("UOLD"))]
    fn key_change(
        #[case] recorded: Option<&str>,
        #[case] current: &str,
        #[case] want: Option<&str>,
    ) {
        assert_eq!(replaced(recorded, current).as_deref(), want);
    }

    #[rstest]
    #[case::not_yet_revoked(&[], 1)]
    #[case::revoked_before_the_change(&[("UOLD", T - 1)], 1)]
    #[case::revoked_from_the_change(&[("UOLD", T)], 0)]
    fn held_until_revoked(#[case] list: &[(&str, i64)], #[case] left: usize) {
        let mut keys = vec![];
        hold(&mut keys, "UOLD", T);
        hold(&mut keys, "UOLD", T);
        let list: RevocationList = list.iter().map(|(k, t)| (k.to_string(), *t)).collect();
        assert_eq!(pending(&keys, &list).len(), left);
    }

    #[rstest]
    #[case::all_current_nothing_pending(true, 0, true)]
    #[case::a_server_behind(false, 0, false)]
    #[case::a_replaced_key_pending(true, 1, false)]
    fn finalizer(#[case] current: bool, #[case] pending_n: usize, #[case] want: bool) {
        let mut keys = vec![];
        for i in 0..pending_n {
            hold(&mut keys, &format!("U{i}"), T);
        }
        assert_eq!(finalizer_may_proceed(current, &keys), want);
    }
}
