//! §5.1/§5.3 PublicKeyInUse: an account key is unique under its NatsOperator (the system
//! account's identity included), a user key unique in its account; where two record one key,
//! the older keeps it.

/// An object recording a public key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// `Kind namespace/name`, as the refusal names it.
    pub name: String,
    pub public_key: String,
    /// metadata.creationTimestamp in seconds; the older keeps the key.
    pub created: i64,
}

/// The refusal, naming the holder (reason PublicKeyInUse).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("public key {public_key} is held by {holder}")]
pub struct PublicKeyInUse {
    pub public_key: String,
    pub holder: String,
}

fn older(a: &Holder, b: &Holder) -> bool {
    (a.created, &a.name) < (b.created, &b.name)
}

/// Whether `candidate` may hold its key among `others` (the other NatsAccounts under the same
/// NatsOperator, or the other NatsUsers of the account). `system_account`, for accounts, is the
/// NatsSystemAccount that NatsOperator references: its key is never an ordinary account's.
pub fn check_unique(
    candidate: &Holder,
    others: &[Holder],
    system_account: Option<&Holder>,
) -> Result<(), PublicKeyInUse> {
    if let Some(sys) = system_account
        && sys.public_key == candidate.public_key
    {
        return Err(PublicKeyInUse {
            public_key: candidate.public_key.clone(),
            holder: sys.name.clone(),
        });
    }
    match others
        .iter()
        .filter(|o| o.name != candidate.name && o.public_key == candidate.public_key)
        .find(|o| older(o, candidate))
    {
        Some(o) => Err(PublicKeyInUse {
            public_key: candidate.public_key.clone(),
            holder: o.name.clone(),
        }),
        None => Ok(()),
    }
}

/// The system account's key as the refusal compares it: from the NatsSystemAccount's
/// status.publicKey, else its spec.publicKey, else the public key of its identity seed Secret.
pub fn system_account_key(
    status: Option<&str>,
    spec: Option<&str>,
    identity_seed: Option<&str>,
) -> Option<String> {
    status.or(spec).or(identity_seed).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn h(name: &str, key: &str, created: i64) -> Holder {
        Holder {
            name: name.into(),
            public_key: key.into(),
            created,
        }
    }

    #[rstest]
    #[case::from_status(Some("AS"), Some("AP"), Some("AI"), Some("AS"))]
    #[case::from_spec_public_key(None, Some("AP"), Some("AI"), Some("AP"))]
    #[case::from_identity_seed_secret(None, None, Some("AI"), Some("AI"))]
    #[case::unknown(None, None, None, None)]
    fn system_account_key_sources(
        #[case] status: Option<&str>,
        #[case] spec: Option<&str>,
        #[case] seed: Option<&str>,
        #[case] want: Option<&str>,
    ) {
        assert_eq!(system_account_key(status, spec, seed).as_deref(), want);
    }

    #[rstest]
    #[case::unique_key_is_signed(h("NatsAccount a/orders", "AK1", 10), vec![h("NatsAccount b/billing", "AK2", 5)], None, None)]
    #[case::where_two_record_one_key_the_older_keeps_it(h("NatsAccount b/copy", "AK1", 20), vec![h("NatsAccount a/orders", "AK1", 10)], None, Some("NatsAccount a/orders"))]
    #[case::the_older_is_not_refused(h("NatsAccount a/orders", "AK1", 10), vec![h("NatsAccount b/copy", "AK1", 20)], None, None)]
    #[case::same_age_breaks_by_name(h("NatsAccount b/x", "AK1", 10), vec![h("NatsAccount a/x", "AK1", 10)], None, Some("NatsAccount a/x"))]
    #[case::an_account_claiming_the_system_accounts_key(h("NatsAccount t/sneaky", "ASYS", 1), vec![], Some(h("NatsSystemAccount nats-system/system", "ASYS", 50)), Some("NatsSystemAccount nats-system/system"))]
    #[case::a_user_key_held_by_another_user_of_the_account(h("NatsUser a/dev-2", "UK", 9), vec![h("NatsUser a/dev-1", "UK", 3)], None, Some("NatsUser a/dev-1"))]
    fn public_key_in_use(
        #[case] candidate: Holder,
        #[case] others: Vec<Holder>,
        #[case] system: Option<Holder>,
        #[case] holder: Option<&str>,
    ) {
        let got = check_unique(&candidate, &others, system.as_ref());
        assert_eq!(got.err().map(|e| e.holder), holder.map(str::to_string));
    }
}
