//! §5.1 The NATS operator JWT: its signing keys, the system account, strict signing (identities
//! sign nothing but themselves). An offline identity (spec.jwt) is checked, not signed.

use nats_claims::{NKey, OperatorClaims, decode};

/// An offline NATS operator JWT that cannot serve (reason InvalidJWT).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OfflineOperatorError {
    #[error("spec.jwt is not a NATS operator JWT: {0}")]
    Invalid(String),
    #[error("spec.jwt does not list signing key {0} of keys.signing")]
    MissingSigningKey(String),
    #[error("spec.jwt names system account {found:?}, the NatsSystemAccount is {want}")]
    SystemAccount { found: String, want: String },
}

/// The operator claims of a NatsOperator named `name` with identity `identity`.
pub fn operator_claims(
    name: &str,
    identity: &str,
    signing_keys: &[String],
    system_account: &str,
) -> OperatorClaims {
    let mut claims = OperatorClaims::new(identity)
        .name(name)
        .system_account(system_account)
        .strict_signing(true);
    for k in signing_keys {
        claims = claims.signing_key(k.clone());
    }
    claims
}

/// Whether the NatsSystemAccount `namespace`/`name` is the live one: NatsOperator
/// `operator_namespace`'s spec.systemAccountRef selects it among any number of them; an
/// unreferenced one is not signed.
pub fn is_live_system_account(
    system_account_ref: &nats_api::common::ObjectReference,
    operator_namespace: &str,
    namespace: &str,
    name: &str,
) -> bool {
    system_account_ref.name == name
        && system_account_ref
            .namespace
            .as_deref()
            .unwrap_or(operator_namespace)
            == namespace
}

/// The signing key that signs accounts: the first not marked retiring (rotation adds a key,
/// re-signs with it, then removes the retiring one). `None` while every key is retiring.
pub fn active_signing_key(keys: &[(String, bool)]) -> Option<&str> {
    keys.iter()
        .find(|(_, retiring)| !retiring)
        .map(|(k, _)| k.as_str())
}

/// Signs the operator claims with the identity seed.
pub fn sign_operator(
    claims: &OperatorClaims,
    identity: &NKey,
    issued_at: i64,
) -> Result<String, nats_claims::Error> {
    claims.encode_issued_at(identity, issued_at)
}

/// Checks an offline operator JWT against the signing keys and system account the controller
/// signs with: an account it signs is trusted only where the JWT lists its signing key.
pub fn check_offline_operator(
    jwt: &str,
    signing_keys: &[String],
    system_account: &str,
) -> Result<OperatorClaims, OfflineOperatorError> {
    let claims: OperatorClaims =
        decode(jwt).map_err(|e| OfflineOperatorError::Invalid(e.to_string()))?;
    if let Some(missing) = signing_keys
        .iter()
        .find(|k| !claims.nats.signing_keys.contains(k))
    {
        return Err(OfflineOperatorError::MissingSigningKey(missing.clone()));
    }
    if claims.nats.system_account != system_account {
        return Err(OfflineOperatorError::SystemAccount {
            found: claims.nats.system_account.clone(),
            want: system_account.to_string(),
        });
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_claims::KeyKind;
    use rstest::rstest;

    #[test]
    fn operator_claims_list_signing_keys_and_system_account_under_strict_signing() {
        let id = NKey::generate(KeyKind::Operator);
        let sk = NKey::generate(KeyKind::Operator).public_key();
        let sys = NKey::generate(KeyKind::Account).public_key();
        let c = operator_claims("demo", &id.public_key(), std::slice::from_ref(&sk), &sys);
        let jwt = sign_operator(&c, &id, 1_700_000_000).unwrap();
        let back: OperatorClaims = decode(&jwt).unwrap();
        assert_eq!(back.name, "demo");
        assert_eq!(back.nats.signing_keys, vec![sk]);
        assert_eq!(back.nats.system_account, sys);
        assert!(back.nats.strict_signing);
        assert_eq!(back.issued_at, 1_700_000_000);
    }

    #[rstest]
    #[case::referenced_in_the_operators_namespace(None, "nats-system", "system", true)]
    #[case::another_name_is_not_signed(None, "nats-system", "spare", false)]
    #[case::referenced_across_namespaces(Some("platform"), "platform", "system", true)]
    #[case::same_name_other_namespace(Some("platform"), "nats-system", "system", false)]
    fn live_system_account(
        #[case] ref_ns: Option<&str>,
        #[case] ns: &str,
        #[case] name: &str,
        #[case] live: bool,
    ) {
        let r = nats_api::common::ObjectReference {
            name: "system".into(),
            namespace: ref_ns.map(str::to_string),
        };
        assert_eq!(is_live_system_account(&r, "nats-system", ns, name), live);
    }

    #[rstest]
    #[case::first_key(&[("OA", false), ("OB", false)], Some("OA"))]
    #[case::rotation_skips_the_retiring_key(&[("OA", true), ("OB", false)], Some("OB"))]
    #[case::all_retiring(&[("OA", true)], None)]
    fn signer_during_rotation(#[case] keys: &[(&str, bool)], #[case] want: Option<&str>) {
        let keys: Vec<(String, bool)> = keys.iter().map(|(k, r)| (k.to_string(), *r)).collect();
        assert_eq!(active_signing_key(&keys), want);
    }

    enum Case {
        Good,
        SigningKeyNotListed,
        OtherSystemAccount,
        Garbage,
    }

    #[rstest]
    #[case::offline_jwt_listing_our_keys_is_taken(Case::Good)]
    #[case::offline_jwt_missing_a_signing_key_is_invalid(Case::SigningKeyNotListed)]
    #[case::offline_jwt_naming_another_system_account_is_invalid(Case::OtherSystemAccount)]
    #[case::not_a_jwt_is_invalid(Case::Garbage)]
    fn offline_operator_jwt(#[case] case: Case) {
        let id = NKey::generate(KeyKind::Operator);
        let sk = NKey::generate(KeyKind::Operator).public_key();
        let sys = NKey::generate(KeyKind::Account).public_key();
        let listed = match case {
            Case::SigningKeyNotListed => vec![],
            _ => vec![sk.clone()],
        };
        let named_sys = match case {
            Case::OtherSystemAccount => NKey::generate(KeyKind::Account).public_key(),
            _ => sys.clone(),
        };
        let jwt = match case {
            Case::Garbage => "not.a.jwt".to_string(),
            _ => operator_claims("off", &id.public_key(), &listed, &named_sys)
                .encode(&id)
                .unwrap(),
        };
        let got = check_offline_operator(&jwt, &[sk], &sys);
        match case {
            Case::Good => assert!(got.is_ok(), "{got:?}"),
            Case::SigningKeyNotListed => {
                assert!(matches!(
                    got,
                    Err(OfflineOperatorError::MissingSigningKey(_))
                ))
            }
            Case::OtherSystemAccount => {
                assert!(matches!(
                    got,
                    Err(OfflineOperatorError::SystemAccount { .. })
                ))
            }
            Case::Garbage => assert!(matches!(got, Err(OfflineOperatorError::Invalid(_)))),
        }
    }
}
