//! Where each reference of the auth kinds points: a NatsAccount's operatorRef, a
//! NatsSystemAccount's operatorRef, a NatsUser's accountRef (a reference without a namespace
//! names the referrer's own).

use kube::ResourceExt;
use nats_api::auth::{AccountKind, NatsAccount, NatsSystemAccount, NatsUser};

/// Where a NatsAccount's operatorRef points: (namespace, name).
pub(crate) fn operator_of(a: &NatsAccount) -> (String, String) {
    let ns = a.namespace().unwrap_or_default();
    (
        a.spec.operator_ref.namespace.clone().unwrap_or(ns),
        a.spec.operator_ref.name.clone(),
    )
}

/// Where a NatsSystemAccount's operatorRef points: (namespace, name).
pub(crate) fn operator_of_system_account(s: &NatsSystemAccount) -> (String, String) {
    let ns = s.namespace().unwrap_or_default();
    (
        s.spec.operator_ref.namespace.clone().unwrap_or(ns),
        s.spec.operator_ref.name.clone(),
    )
}

/// Whether a user's account is account `kind` `namespace`/`name`: [`account_of`] compared
/// without copying its names, for a scan of every user in the store (a pass of one user among
/// 10,000 must not allocate for each of the others).
pub(crate) fn is_of_account(u: &NatsUser, kind: AccountKind, namespace: &str, name: &str) -> bool {
    let r = &u.spec.account_ref;
    r.kind == kind
        && r.name == name
        && r.namespace
            .as_deref()
            .or(u.metadata.namespace.as_deref())
            .unwrap_or_default()
            == namespace
}

/// (kind, namespace, name) of a user's account.
pub(crate) fn account_of(u: &NatsUser) -> (AccountKind, String, String) {
    let ns = u.namespace().unwrap_or_default();
    (
        u.spec.account_ref.kind,
        u.spec.account_ref.namespace.clone().unwrap_or(ns),
        u.spec.account_ref.name.clone(),
    )
}

/// The kind name of an account kind.
pub(crate) fn kind_name(k: AccountKind) -> &'static str {
    match k {
        AccountKind::NatsAccount => "NatsAccount",
        AccountKind::NatsSystemAccount => "NatsSystemAccount",
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    /// A NatsUser in namespace `n` whose accountRef is `account_ref`.
    fn user(account_ref: serde_json::Value) -> NatsUser {
        serde_json::from_value(json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
            "metadata": {"name": "u", "namespace": "n"},
            "spec": {"accountRef": account_ref},
        }))
        .expect("a NatsUser")
    }

    #[rstest]
    #[case::own_namespace(json!({"kind": "NatsAccount", "name": "a"}), "n", "a", true)]
    #[case::named_namespace(json!({"kind": "NatsAccount", "name": "a", "namespace": "m"}), "m", "a", true)]
    #[case::not_the_own_when_named(json!({"kind": "NatsAccount", "name": "a", "namespace": "m"}), "n", "a", false)]
    #[case::another_name(json!({"kind": "NatsAccount", "name": "a"}), "n", "b", false)]
    #[case::another_kind(json!({"kind": "NatsSystemAccount", "name": "a"}), "n", "a", false)]
    fn a_user_is_of_the_account_its_reference_names(
        #[case] account_ref: serde_json::Value,
        #[case] namespace: &str,
        #[case] name: &str,
        #[case] of: bool,
    ) {
        let u = user(account_ref);
        let kind = AccountKind::NatsAccount;
        assert_eq!(is_of_account(&u, kind, namespace, name), of);
        let (k, ns, n) = account_of(&u);
        assert_eq!(
            k == kind && ns == namespace && n == name,
            of,
            "as account_of reads it"
        );
    }
}
