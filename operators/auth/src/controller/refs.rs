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
