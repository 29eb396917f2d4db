//! §5.1 Trust objects (ADR 0003): the reference form of NatsOperatorTrust and NatsAccountTrust
//! gets its status written by the auth controller from the NatsOperator (operator and system
//! account JWTs) or NatsAccount (public key and JWT); the literal form passes through untouched.

use controller_kit::blocked::Blocked;
use nats_api::auth::{NatsAccountStatus, NatsOperatorStatus};
use nats_api::nats::{NatsAccountTrustSpec, NatsOperatorTrustSpec, reason};

/// What the trust object's status becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustStatus {
    /// Literal form: the auth controller writes nothing.
    Literal,
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
        return TrustStatus::Literal;
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
        return TrustStatus::Literal;
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
    #[case::literal_form_passes_through(NatsOperatorTrustSpec { operator_ref: None, operator_jwt: Some("X".into()), system_account_jwt: Some("Y".into()) }, 0, None)]
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
            TrustStatus::Literal => None,
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
    #[case::literal_public_key(None, None, None)]
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
            TrustStatus::Literal => None,
            TrustStatus::Mirrored { .. } => Some("Mirrored"),
            TrustStatus::NotReady(b) => Some(b.reason),
        };
        assert_eq!(reason, want);
    }
}
