//! §7 Tenancy: a reference crosses namespaces only where a NatsReferenceGrant in the target
//! namespace admits it, checked on every reconcile. ReferenceNotPermitted for a NatsAccount its
//! NatsOperator does not admit; AccountNotAdmitted for a NatsUser of such an account or of an
//! account in another namespace without a grant; cross-namespace imports need a grant too.

use controller_kit::grants::{From, To, admits};
use nats_api::nats::NatsReferenceGrant;

pub use controller_kit::grants::{From as Referrer, To as Target};

/// Why an account or user is not signed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Tenancy {
    /// No grant admits the NatsAccount to its NatsOperator (reason ReferenceNotPermitted); refused
    /// before its key is recorded.
    #[error(
        "no NatsReferenceGrant in {namespace} admits NatsAccount from {from} to NatsOperator {name}"
    )]
    ReferenceNotPermitted {
        from: String,
        namespace: String,
        name: String,
    },
    /// The user's account is not admitted (reason AccountNotAdmitted).
    #[error("account {account} is not admitted: {why}")]
    AccountNotAdmitted { account: String, why: String },
}

impl Tenancy {
    pub fn reason(&self) -> &'static str {
        match self {
            Tenancy::ReferenceNotPermitted { .. } => {
                nats_api::auth::reason::REFERENCE_NOT_PERMITTED
            }
            Tenancy::AccountNotAdmitted { .. } => nats_api::auth::reason::ACCOUNT_NOT_ADMITTED,
        }
    }
}

const AUTH: &str = nats_api::auth::GROUP;

/// A NatsAccount in `namespace` referencing NatsOperator `operator_namespace`/`operator`.
pub fn account_admission(
    namespace: &str,
    operator_namespace: &str,
    operator: &str,
    grants: &[NatsReferenceGrant],
) -> Result<(), Tenancy> {
    let from = From {
        group: AUTH,
        kind: "NatsAccount",
        namespace,
    };
    let to = To {
        group: AUTH,
        kind: "NatsOperator",
        namespace: operator_namespace,
        name: operator,
    };
    if admits(grants, from, to) {
        Ok(())
    } else {
        Err(Tenancy::ReferenceNotPermitted {
            from: namespace.into(),
            namespace: operator_namespace.into(),
            name: operator.into(),
        })
    }
}

/// A NatsUser in `namespace` of account `account_kind` `account_namespace`/`account`, whose own
/// admission to its NatsOperator is `account_admitted`.
pub fn user_admission(
    namespace: &str,
    account_kind: &str,
    account_namespace: &str,
    account: &str,
    account_admitted: bool,
    grants: &[NatsReferenceGrant],
) -> Result<(), Tenancy> {
    let name = format!("{account_namespace}/{account}");
    if !account_admitted {
        return Err(Tenancy::AccountNotAdmitted {
            account: name,
            why: "its NatsOperator does not admit it".into(),
        });
    }
    let from = From {
        group: AUTH,
        kind: "NatsUser",
        namespace,
    };
    let to = To {
        group: AUTH,
        kind: account_kind,
        namespace: account_namespace,
        name: account,
    };
    if admits(grants, from, to) {
        Ok(())
    } else {
        Err(Tenancy::AccountNotAdmitted {
            account: name,
            why: format!(
                "no NatsReferenceGrant in {account_namespace} admits NatsUser from {namespace}"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::nats::{NatsReferenceGrantSpec, ReferenceGrantFrom, ReferenceGrantTo};
    use rstest::rstest;

    fn grant(
        ns: &str,
        kind: &str,
        from_ns: &str,
        to_kind: &str,
        to_name: Option<&str>,
    ) -> NatsReferenceGrant {
        let mut g = NatsReferenceGrant::new(
            "g",
            NatsReferenceGrantSpec {
                from: vec![ReferenceGrantFrom {
                    group: AUTH.into(),
                    kind: kind.into(),
                    namespace: from_ns.into(),
                }],
                to: vec![ReferenceGrantTo {
                    group: AUTH.into(),
                    kind: to_kind.into(),
                    name: to_name.map(str::to_string),
                }],
            },
        );
        g.metadata.namespace = Some(ns.into());
        g
    }

    // "A NatsAccount no grant admits to its NatsOperator is refused before its key is recorded"
    #[rstest]
    #[case::same_namespace_needs_no_grant("nats-system", vec![], true)]
    #[case::other_namespace_without_grant("team-a", vec![], false)]
    #[case::granted_by_name("team-a", vec![grant("nats-system", "NatsAccount", "team-a", "NatsOperator", Some("demo"))], true)]
    #[case::granted_any_name("team-a", vec![grant("nats-system", "NatsAccount", "team-a", "NatsOperator", None)], true)]
    #[case::grant_for_another_operator("team-a", vec![grant("nats-system", "NatsAccount", "team-a", "NatsOperator", Some("other"))], false)]
    #[case::grant_for_another_namespace("team-a", vec![grant("nats-system", "NatsAccount", "team-b", "NatsOperator", None)], false)]
    #[case::grant_for_another_kind("team-a", vec![grant("nats-system", "NatsUser", "team-a", "NatsOperator", None)], false)]
    #[case::a_grant_living_outside_the_target_namespace("team-a", vec![grant("team-a", "NatsAccount", "team-a", "NatsOperator", None)], false)]
    #[case::deleting_the_grant_revokes("team-a", vec![], false)]
    fn account_to_operator(
        #[case] ns: &str,
        #[case] grants: Vec<NatsReferenceGrant>,
        #[case] ok: bool,
    ) {
        let got = account_admission(ns, "nats-system", "demo", &grants);
        assert_eq!(got.is_ok(), ok, "{got:?}");
        if let Err(e) = got {
            assert_eq!(e.reason(), "ReferenceNotPermitted");
        }
    }

    // "A NatsUser of an account not admitted is not signed, Ready False, reason AccountNotAdmitted."
    #[rstest]
    #[case::same_namespace_admitted_account("team-a", true, vec![], true)]
    #[case::account_not_admitted_to_its_operator("team-a", false, vec![], false)]
    #[case::user_in_another_namespace_without_grant("team-b", true, vec![], false)]
    #[case::user_in_another_namespace_granted("team-b", true, vec![grant("team-a", "NatsUser", "team-b", "NatsAccount", Some("orders"))], true)]
    fn user_to_account(
        #[case] ns: &str,
        #[case] account_admitted: bool,
        #[case] grants: Vec<NatsReferenceGrant>,
        #[case] ok: bool,
    ) {
        let got = user_admission(
            ns,
            "NatsAccount",
            "team-a",
            "orders",
            account_admitted,
            &grants,
        );
        assert_eq!(got.is_ok(), ok, "{got:?}");
        if let Err(e) = got {
            assert_eq!(e.reason(), "AccountNotAdmitted");
        }
    }

    // "A cross-namespace import needs both a NatsReferenceGrant in the exporter's namespace and,
    // for a private export, the importer listed." (the listing half is exports::lists_importer)
    #[rstest]
    #[case::same_namespace("team-a", vec![], true)]
    #[case::cross_namespace_without_grant("team-b", vec![], false)]
    #[case::cross_namespace_granted("team-b", vec![grant("team-a", "NatsAccount", "team-b", "NatsAccount", Some("orders"))], true)]
    fn import_across_namespaces(
        #[case] importer_ns: &str,
        #[case] grants: Vec<NatsReferenceGrant>,
        #[case] ok: bool,
    ) {
        let from = From {
            group: AUTH,
            kind: "NatsAccount",
            namespace: importer_ns,
        };
        let to = To {
            group: AUTH,
            kind: "NatsAccount",
            namespace: "team-a",
            name: "orders",
        };
        assert_eq!(admits(&grants, from, to), ok);
    }
}
