//! §5.2 What may be pushed with CLAIMS.UPDATE: never an older JWT (a push carries no iat guard,
//! and an older JWT pushed over a newer one stays), and never one signed by a key the servers'
//! NATS operator JWT does not list (reason UntrustedSigner).

use nats_claims::{AccountClaims, OperatorClaims, decode_unverified};

/// Why a JWT is not pushed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Held {
    /// A server holds a newer JWT for the account (event JWTHeld); sign again after it.
    #[error("a server holds a JWT for {account} issued at {held}, newer than ours at {ours}")]
    OlderThanHeld {
        account: String,
        ours: i64,
        held: i64,
    },
    /// The signer is not a signing key of the operator JWT the servers trust.
    #[error(
        "account JWT for {account} is signed by {signer}, which the NATS operator JWT does not list"
    )]
    UntrustedSigner { account: String, signer: String },
}

impl Held {
    pub fn reason(&self) -> &'static str {
        match self {
            Held::OlderThanHeld { .. } => nats_api::auth::event::JWT_HELD,
            Held::UntrustedSigner { .. } => nats_api::auth::reason::UNTRUSTED_SIGNER,
        }
    }
}

/// The issued-at of the JWTs servers hold (CLAIMS.LOOKUP answers); unreadable ones are skipped.
pub fn held_issued_at<'a>(held: impl IntoIterator<Item = &'a str>) -> Vec<i64> {
    held.into_iter()
        .filter_map(|j| decode_unverified::<nats_claims::Account>(j).ok())
        .map(|c| c.issued_at)
        .collect()
}

/// The iat to sign with: now, or one past the newest a server holds, so ours is never older.
pub fn issue_time(now: i64, held: &[i64]) -> i64 {
    held.iter().map(|h| h + 1).fold(now, i64::max)
}

/// Decides whether `ours` may be pushed over what the servers hold, under `operator`.
pub fn may_push(operator: &OperatorClaims, ours: &AccountClaims, held: &[i64]) -> Result<(), Held> {
    // Strict signing: the operator identity signs nothing but itself, so only listed keys count.
    if !operator.nats.signing_keys.contains(&ours.issuer) {
        return Err(Held::UntrustedSigner {
            account: ours.subject.clone(),
            signer: ours.issuer.clone(),
        });
    }
    match held.iter().copied().max() {
        Some(h) if h > ours.issued_at => Err(Held::OlderThanHeld {
            account: ours.subject.clone(),
            ours: ours.issued_at,
            held: h,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_claims::{KeyKind, NKey, decode};
    use rstest::rstest;

    const T: i64 = 1_700_000_000;

    #[rstest]
    #[case::nothing_held(T, vec![], T)]
    #[case::older_held(T, vec![T - 100], T)]
    #[case::newer_held_is_passed(T, vec![T + 30, T + 5], T + 31)]
    fn never_sign_older_than_held(#[case] now: i64, #[case] held: Vec<i64>, #[case] want: i64) {
        assert_eq!(issue_time(now, &held), want);
    }

    enum Signer {
        Listed,
        Unlisted,
        Identity,
    }

    #[rstest]
    #[case::listed_signing_key_nothing_held(Signer::Listed, vec![], None)]
    #[case::same_iat_as_held(Signer::Listed, vec![T], None)]
    #[case::older_than_held_is_not_pushed(Signer::Listed, vec![T - 1, T + 10], Some("JWTHeld"))]
    #[case::key_the_operator_jwt_does_not_list(Signer::Unlisted, vec![], Some("UntrustedSigner"))]
    #[case::operator_identity_under_strict_signing(Signer::Identity, vec![], Some("UntrustedSigner"))]
    fn push_guard(#[case] signer: Signer, #[case] held: Vec<i64>, #[case] refused: Option<&str>) {
        let id = NKey::generate(KeyKind::Operator);
        let sk = NKey::generate(KeyKind::Operator);
        let other = NKey::generate(KeyKind::Operator);
        let op =
            crate::operator::operator_claims("op", &id.public_key(), &[sk.public_key()], "ASYS");
        let by = match signer {
            Signer::Listed => &sk,
            Signer::Unlisted => &other,
            Signer::Identity => &id,
        };
        let acct = NKey::generate(KeyKind::Account);
        let jwt = AccountClaims::new(acct.public_key())
            .encode_issued_at(by, T)
            .unwrap();
        let ours: AccountClaims = decode(&jwt).unwrap();
        let got = may_push(&op, &ours, &held);
        assert_eq!(got.err().map(|e| e.reason()), refused);
    }

    #[test]
    fn held_iat_is_read_from_lookups() {
        let sk = NKey::generate(KeyKind::Operator);
        let a = NKey::generate(KeyKind::Account).public_key();
        let j1 = AccountClaims::new(a.clone())
            .encode_issued_at(&sk, T)
            .unwrap();
        let j2 = AccountClaims::new(a).encode_issued_at(&sk, T + 7).unwrap();
        assert_eq!(
            held_issued_at([j1.as_str(), "garbage", j2.as_str()]),
            [T, T + 7]
        );
    }
}
