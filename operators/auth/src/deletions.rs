//! §5.2/§7 Deleted accounts: an account deleted, or whose grant was withdrawn once it was signed,
//! is recorded in its NatsOperator's status.deletedAccounts; its status.jwt is emptied once that
//! list records it; CLAIMS.DELETE is sent again to every server that has not confirmed it — one
//! that was away, restarted or joined (seen in STATSZ by its id, new at every start) — since the
//! resolver's catch-up sync only adds; an entry goes once its JWT has expired,
//! after which no server can still serve it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nats_api::auth::DeletedAccount;

/// Records `public_key` as deleted; `expires` is its last JWT's expiry (0: none).
pub fn record(deleted: &mut Vec<DeletedAccount>, public_key: &str, expires: i64) {
    if deleted.iter().any(|d| d.public_key == public_key) {
        return;
    }
    deleted.push(DeletedAccount {
        public_key: public_key.to_string(),
        expires: (expires != 0)
            .then(|| Timestamp::from_second(expires).ok().map(Time))
            .flatten(),
    });
}

/// Whether the account's status.jwt may be emptied: only once the list records it.
pub fn may_clear_jwt(deleted: &[DeletedAccount], public_key: &str) -> bool {
    deleted.iter().any(|d| d.public_key == public_key)
}

/// Drops entries whose JWT expired by `now`; an account signed with no expiry stays listed.
pub fn prune(deleted: &[DeletedAccount], now: i64) -> Vec<DeletedAccount> {
    deleted
        .iter()
        .filter(|d| d.expires.as_ref().is_none_or(|e| e.0.as_second() > now))
        .cloned()
        .collect()
}

/// How many times this process has pushed each account's JWT (CLAIMS.UPDATE). A push that a
/// server takes after it confirmed deleting the account puts the account back on that server, and
/// an account pass that began before its deletion may still push once the deletion is sent (the
/// account's and its NatsOperator's passes run side by side): a confirmation counts only for the
/// push count it was sent under.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pushes(BTreeMap<String, u64>);

impl Pushes {
    /// Records that `account`'s JWT was pushed (called once the push's answers are in).
    pub fn pushed(&mut self, account: &str) {
        *self.0.entry(account.to_string()).or_default() += 1;
    }

    /// The push count of each of `accounts`, as a CLAIMS.DELETE of them is sent.
    pub fn counts(&self, accounts: &[String]) -> Vec<(String, u64)> {
        accounts
            .iter()
            .map(|a| (a.clone(), self.count(a)))
            .collect()
    }

    /// How many times `account`'s JWT was pushed.
    pub fn count(&self, account: &str) -> u64 {
        self.0.get(account).copied().unwrap_or(0)
    }
}

/// Which deleted accounts each server has confirmed deleting, by the server's id, and under which
/// push count ([`Pushes`]). A nats-server takes a new id every time it starts, so a server that
/// restarted, or returned with a resolver directory from before a deletion, is a server that has
/// confirmed nothing: it is sent every deleted account again, however short its absence and
/// whenever the controller looks. A push of the account since the confirmation voids it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Confirmed(BTreeMap<String, BTreeMap<String, u64>>);

impl Confirmed {
    /// The accounts of `deleted` some server of `roster` (STATSZ server ids) has not confirmed
    /// since the account's last push.
    pub fn unconfirmed(
        &self,
        deleted: &[String],
        roster: &[String],
        pushes: &Pushes,
    ) -> Vec<String> {
        deleted
            .iter()
            .filter(|a| {
                let now = pushes.count(a);
                roster
                    .iter()
                    .any(|id| self.0.get(id).and_then(|c| c.get(*a)) != Some(&now))
            })
            .cloned()
            .collect()
    }

    /// Records that the servers `ids` answered a CLAIMS.DELETE of `sent` (each account with the
    /// push count it was sent under, [`Pushes::counts`]).
    pub fn record(&mut self, ids: &[String], sent: &[(String, u64)]) {
        for id in ids {
            self.0
                .entry(id.clone())
                .or_default()
                .extend(sent.iter().cloned());
        }
    }

    /// Forgets servers not in `roster` (a server seen again is asked again, which is harmless)
    /// and accounts no longer listed deleted, so the memory stays the size of the roster.
    pub fn retain(&mut self, roster: &[String], deleted: &[String]) {
        self.0.retain(|id, _| roster.contains(id));
        for accounts in self.0.values_mut() {
            accounts.retain(|a, _| deleted.contains(a));
        }
    }
}

/// Why a delete request could not be signed.
#[derive(Debug, thiserror::Error)]
#[error("signing the CLAIMS.DELETE request: {0}")]
pub struct DeleteRequestError(String);

/// The NATS operator's request to delete `accounts` from the full resolvers (accounts.go
/// handleDeleteRequest): a generic JWT whose issuer is its subject, signed by the operator's
/// identity or one of its signing keys, with `nats.accounts`. The claims crate signs typed claims
/// only, so this one is assembled here.
pub fn delete_request(
    signer: &nats_claims::NKey,
    accounts: &[String],
    issued_at: i64,
) -> Result<String, DeleteRequestError> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = b64.encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let issuer = signer.public_key();
    let payload = serde_json::json!({
        "jti": format!("delete-{issued_at}-{}", accounts.join("-")),
        "iat": issued_at,
        "iss": issuer,
        "sub": issuer,
        "nats": {"accounts": accounts},
    });
    let payload = b64.encode(payload.to_string().as_bytes());
    let signing_input = format!("{header}.{payload}");
    let kp = nkeys::KeyPair::from_seed(signer.seed().expose())
        .map_err(|e| DeleteRequestError(e.to_string()))?;
    let sig = kp
        .sign(signing_input.as_bytes())
        .map_err(|e| DeleteRequestError(e.to_string()))?;
    Ok(format!("{signing_input}.{}", b64.encode(sig)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_delete_request_is_self_issued_signed_and_lists_the_accounts() {
        use base64::Engine as _;
        let op = nats_claims::NKey::generate(nats_claims::KeyKind::Operator);
        let a = nats_claims::NKey::generate(nats_claims::KeyKind::Account).public_key();
        let jwt = super::delete_request(&op, std::slice::from_ref(&a), 1_790_000_000).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let payload: serde_json::Value =
            serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(payload["iss"], op.public_key());
        assert_eq!(payload["sub"], op.public_key());
        assert_eq!(payload["nats"]["accounts"], serde_json::json!([a]));
        let verifier = nkeys::KeyPair::from_public_key(&op.public_key()).unwrap();
        let sig = b64.decode(parts[2]).unwrap();
        assert!(
            verifier
                .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
                .is_ok()
        );
        assert!(!jwt.contains(op.seed().expose()), "no seed in the token");
    }

    use super::*;
    use rstest::rstest;

    const T: i64 = 1_700_000_000;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    // "Deleting that grant once the account is signed deletes it from the servers through its
    // NatsOperator's status.deletedAccounts and empties its status.jwt once that list records it."
    #[test]
    fn jwt_is_emptied_only_once_recorded() {
        let mut d = vec![];
        assert!(!may_clear_jwt(&d, "AONE"));
        record(&mut d, "AONE", T + 100);
        record(&mut d, "AONE", T + 100);
        assert_eq!(d.len(), 1);
        assert!(may_clear_jwt(&d, "AONE"));
    }

    #[rstest]
    #[case::kept_until_its_jwt_expires(T + 100, T + 50, true)]
    #[case::dropped_once_expired(T + 100, T + 100, false)]
    #[case::no_expiry_stays(0, T + 1_000_000, true)]
    fn pruning(#[case] expires: i64, #[case] now: i64, #[case] kept: bool) {
        let mut d = vec![];
        record(&mut d, "AONE", expires);
        assert_eq!(prune(&d, now).len() == 1, kept);
    }

    // "the controller re-sends $SYS.REQ.CLAIMS.DELETE for deleted accounts whenever a server or
    // NATS cluster rejoins (seen in STATSZ)": a server is known by the id of its current life.
    // Each `confirmed` entry is "server-id=account,account".
    #[rstest]
    #[case::all_confirmed(&["n1=A", "n2=A"], &["A"], &["n1", "n2"], &[])]
    #[case::a_new_deletion(&["n1=A", "n2=A"], &["A", "B"], &["n1", "n2"], &["B"])]
    #[case::a_server_restarted_new_id(&["n1=A,B", "n2=A,B"], &["A", "B"], &["n1", "n2b"], &["A", "B"])]
    #[case::a_server_returns(&["n1=A"], &["A"], &["n1", "n2"], &["A"])]
    #[case::a_server_leaves(&["n1=A", "n2=A"], &["A"], &["n1"], &[])]
    #[case::a_nats_cluster_joins(&["a1=A", "a2=A"], &["A"], &["a1", "a2", "b1"], &["A"])]
    #[case::one_server_missed_one(&["n1=A,B", "n2=A"], &["A", "B"], &["n1", "n2"], &["B"])]
    #[case::nothing_deleted(&[], &[], &["n1"], &[])]
    fn every_server_of_the_roster_confirms_every_deletion(
        #[case] confirmed: &[&str],
        #[case] deleted: &[&str],
        #[case] roster: &[&str],
        #[case] want: &[&str],
    ) {
        let mut c = Confirmed::default();
        let pushes = Pushes::default();
        for entry in confirmed {
            let (id, accounts) = entry.split_once('=').expect("id=accounts");
            let accounts: Vec<&str> = accounts.split(',').collect();
            c.record(&names(&[id]), &pushes.counts(&names(&accounts)));
        }
        assert_eq!(
            c.unconfirmed(&names(deleted), &names(roster), &pushes),
            names(want)
        );
        // Once they answer, nothing is left to send.
        c.record(&names(roster), &pushes.counts(&names(deleted)));
        assert!(
            c.unconfirmed(&names(deleted), &names(roster), &pushes)
                .is_empty()
        );
    }

    // Seen in CI: an account pass that began before the deletion pushed the JWT after both
    // servers had confirmed the CLAIMS.DELETE, and they served the deleted account for good.
    // Each row: pushes before the delete is sent, pushes while it is out, pushes after it is
    // recorded; whether the account is still to be sent to the servers that answered.
    #[rstest]
    #[case::no_push(0, 0, 0, false)]
    #[case::pushed_before_the_delete(1, 0, 0, false)]
    #[case::pushed_while_the_delete_is_out(0, 1, 0, true)]
    #[case::pushed_after_it_was_confirmed(0, 0, 1, true)]
    #[case::pushed_before_and_after(2, 0, 1, true)]
    fn a_push_since_the_confirmation_voids_it(
        #[case] before: usize,
        #[case] during: usize,
        #[case] after: usize,
        #[case] resend: bool,
    ) {
        let (deleted, roster) = (names(&["A"]), names(&["n1", "n2"]));
        let mut pushes = Pushes::default();
        let mut c = Confirmed::default();
        (0..before).for_each(|_| pushes.pushed("A"));
        let sent = pushes.counts(&c.unconfirmed(&deleted, &roster, &pushes));
        assert_eq!(sent, vec![("A".to_string(), before as u64)]);
        (0..during).for_each(|_| pushes.pushed("A"));
        c.record(&roster, &sent);
        (0..after).for_each(|_| pushes.pushed("A"));
        let want = if resend { deleted.clone() } else { vec![] };
        assert_eq!(c.unconfirmed(&deleted, &roster, &pushes), want);
        // Another account's push voids nothing.
        pushes.pushed("B");
        assert_eq!(c.unconfirmed(&deleted, &roster, &pushes), want);
    }

    #[test]
    fn the_memory_keeps_only_the_roster_and_the_listed_deletions() {
        let mut c = Confirmed::default();
        let p = Pushes::default();
        c.record(&names(&["n1", "n2"]), &p.counts(&names(&["A", "B"])));
        c.retain(&names(&["n1"]), &names(&["A"]));
        assert_eq!(
            c.unconfirmed(&names(&["A"]), &names(&["n1"]), &p),
            names(&[])
        );
        assert_eq!(
            c.unconfirmed(&names(&["B"]), &names(&["n1"]), &p),
            names(&["B"])
        );
        assert_eq!(
            c.unconfirmed(&names(&["A"]), &names(&["n2"]), &p),
            names(&["A"])
        );
    }
}
