//! §5.1 Trust objects (ADR 0003): the reference form of NatsOperatorTrust and NatsAccountTrust
//! gets its status written by the auth controller from the NatsOperator (operator and system
//! account JWTs) or NatsAccount (public key and JWT); the literal form, copied by GitOps from
//! elsewhere, is checked ([`literal_operator`], [`literal_account`]: the JWTs decode with valid
//! signatures and belong together) and its material copied into status alike, Ready Literal, or
//! Ready False InvalidJWT naming the field, before a server boots on it.

use controller_kit::blocked::Blocked;
use nats_api::auth::{NatsAccountStatus, NatsOperatorStatus};
use nats_api::nats::{NatsAccountTrustSpec, NatsOperatorTrustSpec, reason};
use nats_claims::{Account, Operator, decode};

/// What the trust object's status becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustStatus {
    /// Literal form, checked: Ready True, reason Literal, with the spec's JWTs / keys and what
    /// was checked.
    Literal {
        first: String,
        second: Option<String>,
        message: String,
    },
    /// Ready True, reason Mirrored, with these JWTs / keys.
    Mirrored {
        first: String,
        second: Option<String>,
    },
    /// Ready False: the reference is missing, not permitted or not signed yet.
    NotReady(Blocked),
}

/// The referenced object as the reconcile found it.
pub enum Found<'a, S> {
    Missing,
    /// Found in another namespace that no grant admits the trust object to.
    NotPermitted,
    Present(Option<&'a S>),
}

/// The NatsOperatorTrust status: the NATS operator JWT and the system account JWT.
pub fn operator_trust(
    spec: &NatsOperatorTrustSpec,
    operator: Found<'_, NatsOperatorStatus>,
) -> TrustStatus {
    let Some(r) = &spec.operator_ref else {
        return literal_operator(spec);
    };
    match operator {
        Found::Missing => TrustStatus::NotReady(Blocked::new(
            reason::REFERENCE_NOT_FOUND,
            format!("NatsOperator {} not found", r.name),
        )),
        Found::NotPermitted => TrustStatus::NotReady(Blocked::new(
            reason::REFERENCE_NOT_PERMITTED,
            format!(
                "no NatsReferenceGrant admits this object to NatsOperator {}",
                r.name
            ),
        )),
        Found::Present(status) => {
            let op = status.and_then(|s| s.jwt.clone());
            let sys = status
                .and_then(|s| s.system_account.as_ref())
                .and_then(|s| s.jwt.clone());
            match (op, sys) {
                (Some(op), Some(sys)) => TrustStatus::Mirrored {
                    first: op,
                    second: Some(sys),
                },
                _ => TrustStatus::NotReady(Blocked::new(
                    reason::REFERENCE_NOT_READY,
                    format!(
                        "NatsOperator {} has not signed its JWT and its system account's yet",
                        r.name
                    ),
                )),
            }
        }
    }
}

/// The NatsAccountTrust status: the account's public key and JWT.
pub fn account_trust(
    spec: &NatsAccountTrustSpec,
    account: Found<'_, NatsAccountStatus>,
) -> TrustStatus {
    let Some(r) = &spec.account_ref else {
        return literal_account(spec);
    };
    match account {
        Found::Missing => TrustStatus::NotReady(Blocked::new(
            reason::REFERENCE_NOT_FOUND,
            format!("NatsAccount {} not found", r.name),
        )),
        Found::NotPermitted => TrustStatus::NotReady(Blocked::new(
            reason::REFERENCE_NOT_PERMITTED,
            format!(
                "no NatsReferenceGrant admits this object to NatsAccount {}",
                r.name
            ),
        )),
        Found::Present(status) => match status.and_then(|s| s.public_key.clone()) {
            Some(key) => TrustStatus::Mirrored {
                first: key,
                second: status.and_then(|s| s.jwt.clone()),
            },
            None => TrustStatus::NotReady(Blocked::new(
                reason::REFERENCE_NOT_READY,
                format!("NatsAccount {} has no public key yet", r.name),
            )),
        },
    }
}

fn invalid(message: String) -> TrustStatus {
    TrustStatus::NotReady(Blocked::new(reason::INVALID_JWT, message))
}

/// A literal NatsOperatorTrust: both JWTs decode with valid signatures, the system account JWT
/// is the account the operator JWT names, signed by the operator or one of its signing keys.
pub fn literal_operator(spec: &NatsOperatorTrustSpec) -> TrustStatus {
    let (Some(op), Some(sys)) = (&spec.operator_jwt, &spec.system_account_jwt) else {
        return invalid(
            "spec: neither operatorRef nor both operatorJWT and systemAccountJWT".into(),
        );
    };
    let operator = match decode::<Operator>(op) {
        Ok(c) => c,
        Err(e) => return invalid(format!("spec.operatorJWT: {e}")),
    };
    let system = match decode::<Account>(sys) {
        Ok(c) => c,
        Err(e) => return invalid(format!("spec.systemAccountJWT: {e}")),
    };
    let named = &operator.nats.system_account;
    if !named.is_empty() && *named != system.subject {
        return invalid(format!(
            "spec.systemAccountJWT: account {} is not the system account {named} spec.operatorJWT names",
            system.subject
        ));
    }
    if !operator.did_sign(&system.issuer, &system.subject) {
        return invalid(format!(
            "spec.systemAccountJWT: signed by {}, which spec.operatorJWT neither is nor lists as a signing key",
            system.issuer
        ));
    }
    TrustStatus::Literal {
        first: op.clone(),
        second: Some(sys.clone()),
        message: format!(
            "literal NATS operator JWT ({}) and system account JWT; the system account is the one the operator names, signed by it",
            operator.name
        ),
    }
}

/// A literal NatsAccountTrust: its JWT, when given, decodes with a valid signature and is the
/// JWT of `spec.publicKey`.
pub fn literal_account(spec: &NatsAccountTrustSpec) -> TrustStatus {
    let Some(key) = &spec.public_key else {
        return invalid("spec: neither accountRef nor publicKey".into());
    };
    let Some(jwt) = &spec.jwt else {
        return TrustStatus::Literal {
            first: key.clone(),
            second: None,
            message: "literal public key".into(),
        };
    };
    match decode::<Account>(jwt) {
        Err(e) => invalid(format!("spec.jwt: {e}")),
        Ok(c) if c.subject != *key => invalid(format!(
            "spec.jwt: its subject {} is not spec.publicKey {key}",
            c.subject
        )),
        Ok(_) => TrustStatus::Literal {
            first: key.clone(),
            second: Some(jwt.clone()),
            message: "literal public key and JWT; the JWT's subject matches the public key".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::auth::SystemAccountState;
    use nats_api::common::ObjectReference;
    use rstest::rstest;

    fn by_ref() -> NatsOperatorTrustSpec {
        NatsOperatorTrustSpec {
            operator_ref: Some(ObjectReference {
                name: "demo".into(),
                namespace: None,
            }),
            operator_jwt: None,
            system_account_jwt: None,
        }
    }

    fn signed() -> NatsOperatorStatus {
        NatsOperatorStatus {
            jwt: Some("OPJWT".into()),
            system_account: Some(SystemAccountState {
                jwt: Some("SYSJWT".into()),
                ..SystemAccountState::default()
            }),
            ..NatsOperatorStatus::default()
        }
    }

    #[rstest]
    #[case::literal_jwts_that_do_not_decode(NatsOperatorTrustSpec { operator_ref: None, operator_jwt: Some("X".into()), system_account_jwt: Some("Y".into()) }, 0, Some("InvalidJWT"))]
    #[case::ref_form_mirrors_both_jwts(by_ref(), 1, Some("Mirrored"))]
    #[case::operator_not_signed_yet(by_ref(), 2, Some("ReferenceNotReady"))]
    #[case::operator_missing(by_ref(), 3, Some("ReferenceNotFound"))]
    #[case::operator_not_granted(by_ref(), 4, Some("ReferenceNotPermitted"))]
    fn operator_trust_status(
        #[case] spec: NatsOperatorTrustSpec,
        #[case] found: u8,
        #[case] want: Option<&str>,
    ) {
        let status = signed();
        let empty = NatsOperatorStatus::default();
        let f = match found {
            0 | 1 => Found::Present(Some(&status)),
            2 => Found::Present(Some(&empty)),
            3 => Found::Missing,
            _ => Found::NotPermitted,
        };
        let got = operator_trust(&spec, f);
        let reason = match &got {
            TrustStatus::Literal { .. } => Some("Literal"),
            TrustStatus::Mirrored { first, second } => {
                assert_eq!(
                    (first.as_str(), second.as_deref()),
                    ("OPJWT", Some("SYSJWT"))
                );
                Some("Mirrored")
            }
            TrustStatus::NotReady(b) => Some(b.reason),
        };
        assert_eq!(reason, want);
    }

    #[rstest]
    #[case::literal_public_key(None, None, Some("Literal"))]
    #[case::ref_with_key_and_jwt(Some("orders"), Some(("AKEY", Some("AJWT"))), Some("Mirrored"))]
    #[case::ref_without_key_yet(Some("orders"), None, Some("ReferenceNotReady"))]
    fn account_trust_status(
        #[case] by_ref: Option<&str>,
        #[case] status: Option<(&str, Option<&str>)>,
        #[case] want: Option<&str>,
    ) {
        let spec = NatsAccountTrustSpec {
            account_ref: by_ref.map(|n| ObjectReference {
                name: n.into(),
                namespace: None,
            }),
            public_key: by_ref.is_none().then(|| "AKEY".into()),
            jwt: None,
        };
        let st = status.map(|(k, j)| NatsAccountStatus {
            public_key: Some(k.into()),
            jwt: j.map(str::to_string),
            ..NatsAccountStatus::default()
        });
        let got = account_trust(&spec, Found::Present(st.as_ref()));
        let reason = match got {
            TrustStatus::Literal { .. } => Some("Literal"),
            TrustStatus::Mirrored { .. } => Some("Mirrored"),
            TrustStatus::NotReady(b) => Some(b.reason),
        };
        assert_eq!(reason, want);
    }

    /// An operator (strict signing, one signing key), its system account signed by that key, an
    /// account signed by it too: (operator JWT, system JWT, account key, account JWT).
    fn signed_literals() -> (String, String, String, String) {
        use nats_claims::{AccountClaims, KeyKind, NKey, OperatorClaims};
        let op = NKey::generate(KeyKind::Operator);
        let op_signing = NKey::generate(KeyKind::Operator);
        let sys = NKey::generate(KeyKind::Account);
        let acc = NKey::generate(KeyKind::Account);
        let op_jwt = OperatorClaims::new(op.public_key())
            .name("partner")
            .signing_key(op_signing.public_key())
            .system_account(sys.public_key())
            .strict_signing(true)
            .encode(&op)
            .expect("operator");
        let sys_jwt = AccountClaims::new(sys.public_key())
            .name("SYS")
            .encode(&op_signing)
            .expect("system");
        let acc_jwt = AccountClaims::new(acc.public_key())
            .name("ledger")
            .encode(&op_signing)
            .expect("account");
        (op_jwt, sys_jwt, acc.public_key(), acc_jwt)
    }

    #[rstest]
    #[case::the_operators_own_system_account("op", "sys", None)]
    #[case::an_operator_jwt_that_does_not_decode("x.y.z", "sys", Some("spec.operatorJWT"))]
    #[case::another_account_as_the_system_account("op", "acc", Some("is not the system account"))]
    #[case::the_operator_jwt_in_both_fields("op", "op", Some("spec.systemAccountJWT"))]
    fn literal_operator_trust_is_checked(
        #[case] op: &str,
        #[case] sys: &str,
        #[case] refused: Option<&str>,
    ) {
        let (op_jwt, sys_jwt, _, acc_jwt) = signed_literals();
        let pick = |w: &str| match w {
            "op" => op_jwt.clone(),
            "sys" => sys_jwt.clone(),
            "acc" => acc_jwt.clone(),
            other => other.to_string(),
        };
        let spec = NatsOperatorTrustSpec {
            operator_ref: None,
            operator_jwt: Some(pick(op)),
            system_account_jwt: Some(pick(sys)),
        };
        match (literal_operator(&spec), refused) {
            (TrustStatus::Literal { first, second, .. }, None) => {
                assert_eq!((first, second), (pick(op), Some(pick(sys))));
            }
            (TrustStatus::NotReady(b), Some(part)) => {
                assert_eq!(b.reason, "InvalidJWT");
                assert!(b.message.contains(part), "{}", b.message);
            }
            (other, _) => panic!("{other:?}"),
        }
    }

    #[rstest]
    #[case::its_own_jwt(true, true, None)]
    #[case::a_key_alone(true, false, None)]
    #[case::another_accounts_jwt(false, true, Some("is not spec.publicKey"))]
    fn literal_account_trust_is_checked(
        #[case] own_key: bool,
        #[case] with_jwt: bool,
        #[case] refused: Option<&str>,
    ) {
        let (_, _, acc_key, acc_jwt) = signed_literals();
        let spec = NatsAccountTrustSpec {
            account_ref: None,
            public_key: Some(if own_key {
                acc_key.clone()
            } else {
                "ABWNQ4BTPC6B43CP6LKQTWTZH7VBOBEWDPGPXURMPLI6TNQTURSNN7RP".into()
            }),
            jwt: with_jwt.then(|| acc_jwt.clone()),
        };
        match (literal_account(&spec), refused) {
            (TrustStatus::Literal { first, second, .. }, None) => {
                assert_eq!(first, acc_key);
                assert_eq!(second, with_jwt.then_some(acc_jwt));
            }
            (TrustStatus::NotReady(b), Some(part)) => {
                assert_eq!(b.reason, "InvalidJWT");
                assert!(b.message.contains(part), "{}", b.message);
            }
            (other, _) => panic!("{other:?}"),
        }
    }
}
