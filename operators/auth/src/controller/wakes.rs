//! Which objects a change wakes. A kind with few objects (operators, system accounts, accounts,
//! grants) wakes every object of the kinds that read it, as a change always did. The kinds a
//! thousand of can hang off wake only the objects a pass of theirs reads: a change of a
//! NatsOperator wakes the users of its system accounts only, a change of one
//! NatsUser wakes the users of its account refused PublicKeyInUse, not every user, and its own
//! account only when what the account revokes of it changed ([`user_touch`](super::change::user_touch)) or the
//! account reads every user ([`reads_every_user`]), and a change of an account wakes its users only when what a user pass reads of
//! it changed (its generation, public key or deletion; [`account_touch`](super::change::account_touch)), else only the users
//! that read its JWT or distribution ([`reads_account_jwt`]: deleting, holding replaced keys, or
//! withdrawn). Waking every user on every user
//! change made 1,000 users cost a million wakes: 4,819 passes for 1,000 users, and a pass a
//! thousand strong after each status write.
//!
//! The index's feed sends a [`Change`](super::change::Change) per event; a controller's wake maps it to the objects of
//! its kind ([`Related`]). After a relist, or a receiver that lagged behind the broadcast, every
//! object is woken: a change missed is a change of anything.

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use nats_api::auth::{AccountKind, NatsAccount, NatsSystemAccount, NatsUser, reason};

use super::change::Touched;
use super::index::Index;
use super::user::in_use;

/// Maps a change of another kind to the objects of `K` to wake.
pub(crate) type Related<K> = fn(&Index, &Touched) -> Vec<ObjectRef<K>>;

fn refs<K: kube::Resource<DynamicType = ()>>(objects: &[std::sync::Arc<K>]) -> Vec<ObjectRef<K>> {
    objects.iter().map(|o| ObjectRef::from_obj(&**o)).collect()
}

/// Whether `u` reads its account's JWT or distribution: a deleting user waits for the JWT that
/// revokes it to be distributed, a user holding replaced keys drops each once the JWT revokes
/// it, and a withdrawn user (§7) kicks its connections once every server holds the JWT
/// revoking it.
pub(crate) fn reads_account_jwt(u: &NatsUser) -> bool {
    u.metadata.deletion_timestamp.is_some()
        || u.status
            .as_ref()
            .is_some_and(|s| !s.replaced_keys.is_empty() || s.withdrawn_at.is_some())
}

/// The users of the account `kind` `t` names: all of them when what they read of it changed,
/// else those that [`reads_account_jwt`].
fn users_of(index: &Index, kind: AccountKind, t: &Touched) -> Vec<ObjectRef<NatsUser>> {
    let users = index.users_of(kind, &t.namespace, &t.name);
    if t.changed {
        return refs(&users);
    }
    let reading: Vec<_> = users.into_iter().filter(|u| reads_account_jwt(u)).collect();
    refs(&reading)
}

/// A NatsAccount changed: [`users_of`] it.
pub(crate) fn users_of_account(index: &Index, t: &Touched) -> Vec<ObjectRef<NatsUser>> {
    users_of(index, AccountKind::NatsAccount, t)
}

/// A NatsSystemAccount changed: [`users_of`] it.
pub(crate) fn users_of_system_account(index: &Index, t: &Touched) -> Vec<ObjectRef<NatsUser>> {
    users_of(index, AccountKind::NatsSystemAccount, t)
}

/// A NatsOperator changed: the users of its system accounts (a system account's JWT is in its
/// NatsOperator's status). A NatsAccount's users read nothing of the operator.
pub(crate) fn users_of_operator(index: &Index, t: &Touched) -> Vec<ObjectRef<NatsUser>> {
    index
        .system_accounts_of(&t.namespace, &t.name)
        .iter()
        .flat_map(|a| {
            let (ns, name) = (a.namespace().unwrap_or_default(), a.name_any());
            refs(&index.users_of(AccountKind::NatsSystemAccount, &ns, &name))
        })
        .collect()
}

/// Whether `u` is refused for a key another user of its account holds: the only user a change
/// of another user can unblock.
pub(crate) fn refused_for_key(u: &NatsUser) -> bool {
    u.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.reason == reason::PUBLIC_KEY_IN_USE)
    })
}

/// A NatsUser changed: the other users of its account refused PublicKeyInUse.
pub(crate) fn users_refused_for_key(index: &Index, t: &Touched) -> Vec<ObjectRef<NatsUser>> {
    let Some((kind, ns, name)) = &t.account else {
        return Vec::new();
    };
    let refused: Vec<_> = index
        .users_of(*kind, ns, name)
        .into_iter()
        .filter(|u| refused_for_key(u))
        .filter(|u| !(u.namespace().as_deref() == Some(&t.namespace) && u.name_any() == t.name))
        .collect();
    refs(&refused)
}

/// A NatsConnection changed (its deletion above all): the deleted users of its namespace held
/// while a NatsConnection names their creds ([`in_use::held_for_creds`]).
pub(crate) fn users_held_for_creds(index: &Index, t: &Touched) -> Vec<ObjectRef<NatsUser>> {
    refs(&index.users_in(&t.namespace, in_use::held_for_creds))
}

/// A NatsConnection changed: the deleted NatsAccounts held while their users' creds are in use
/// (Ready False CredentialsInUse; their users may live in other namespaces).
pub(crate) fn accounts_held_for_creds(index: &Index, _: &Touched) -> Vec<ObjectRef<NatsAccount>> {
    let held = |a: &NatsAccount| {
        let conds = a.status.as_ref().map(|s| s.conditions.as_slice());
        in_use::deleted_and_held(a.metadata.deletion_timestamp.is_some(), conds)
    };
    refs(&index.accounts_where(held))
}

/// A NatsUser changed: its account, when it is a NatsAccount.
pub(crate) fn account_of_user(index: &Index, t: &Touched) -> Vec<ObjectRef<NatsAccount>> {
    match &t.account {
        Some((AccountKind::NatsAccount, ns, name))
            if t.changed || reads_every_user(index.account(ns, name).as_deref()) =>
        {
            vec![ObjectRef::new(name).within(ns)]
        }
        _ => Vec::new(),
    }
}

/// Whether account `a` reads more of its users than what revokes them ([`user_touch`]): while
/// it retires a signing key (RetiringKeysInUse reads the issuer of each user's JWT), while it
/// is deleted (its hold reads its users). One the index does not hold yet runs its first pass
/// on its own watch event.
///
/// [`user_touch`]: super::change::user_touch
pub(crate) fn reads_every_user(a: Option<&NatsAccount>) -> bool {
    let Some(a) = a else { return false };
    let retiring = a
        .spec
        .keys
        .as_ref()
        .is_some_and(|k| k.signing.iter().any(|s| s.retiring));
    retiring || a.metadata.deletion_timestamp.is_some()
}

/// A NatsUser changed: its account, when it is a NatsSystemAccount.
pub(crate) fn system_account_of_user(_: &Index, t: &Touched) -> Vec<ObjectRef<NatsSystemAccount>> {
    match &t.account {
        Some((AccountKind::NatsSystemAccount, ns, name)) => vec![ObjectRef::new(name).within(ns)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
#[path = "wakes/tests.rs"]
mod tests;
