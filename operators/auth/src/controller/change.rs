//! What one event of the index's feeds says ([`Change`]), and what each kind's feed derives from
//! an object for it ([`Touch`]): the index sends these, [`super::wakes`] maps them to the objects
//! a change wakes.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use kube::ResourceExt;
use nats_api::auth::{AccountKind, NatsAccount, NatsSystemAccount, NatsUser};

use super::finalizer;
use super::refs::account_of;
use super::time::secs_of;
use super::user::in_use;

/// What one event of the index's feeds says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// The kind was listed (again): any object may have changed.
    Relisted,
    /// One object was applied or deleted. Boxed: a kind's broadcast holds [`super::index::CHANGES`]
    /// slots from the start, each the size of a change, and six kinds' of a `Touched` inline
    /// took 3.3 MB of the auth controller's heap with nothing changed (heaptrack,
    /// docs/performance.md); boxed, a slot is a pointer until a change fills it.
    Touched(Box<Touched>),
}

/// The object a change was, and what the kinds that read it need to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Touched {
    pub namespace: String,
    pub name: String,
    /// A NatsUser's account: (kind, namespace, name).
    pub account: Option<(AccountKind, String, String)>,
    /// Whether its digest changed (or it is new, or deleted).
    pub changed: bool,
}

/// What the feed of one kind derives from an object: its account, if it has one, and the
/// digest of what other passes read of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Touch {
    pub account: Option<(AccountKind, String, String)>,
    pub digest: u64,
    /// The digest a new object is judged against: `None`, a new object is a change; for a
    /// NatsUser, the digest of a user nothing about which its account's JWT says.
    pub fresh: Option<u64>,
}

impl Touch {
    /// A kind read whole: every change counts.
    pub fn plain<K>(_: &K) -> Touch {
        Touch {
            account: None,
            digest: 0,
            fresh: None,
        }
    }

    /// Whether this touch is a change from `was`, the digest of the object's last event (`None`:
    /// the first event of it).
    pub fn changed_from(&self, was: Option<u64>) -> bool {
        was.or(self.fresh) != Some(self.digest)
    }

    /// The change of `o`.
    pub fn touched<K: ResourceExt>(self, o: &K, changed: bool) -> Touched {
        Touched {
            namespace: o.namespace().unwrap_or_default(),
            name: o.name_any(),
            account: self.account,
            changed,
        }
    }
}

fn digest(parts: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// What a user pass reads of a NatsAccount besides its JWT and distribution (which only its
/// deleting users wait on): its spec, by generation (keys, publicKey, operatorRef and so its
/// admission), the public key it recorded, and whether it is being deleted.
pub(crate) fn account_touch(a: &NatsAccount) -> Touch {
    let public_key = a.status.as_ref().and_then(|s| s.public_key.as_deref());
    Touch {
        account: None,
        digest: digest((
            a.metadata.generation,
            public_key,
            a.metadata.deletion_timestamp.is_some(),
        )),
        fresh: None,
    }
}

/// As [`account_touch`], for a NatsSystemAccount (its JWT is its NatsOperator's).
pub(crate) fn system_account_touch(a: &NatsSystemAccount) -> Touch {
    let public_key = a.status.as_ref().and_then(|s| s.public_key.as_deref());
    Touch {
        account: None,
        digest: digest((
            a.metadata.generation,
            public_key,
            a.metadata.deletion_timestamp.is_some(),
        )),
        fresh: None,
    }
}

/// A NatsUser names its account; its digest is what the account's revocation record reads of
/// it ([`super::revocation::revocation_record`]): its deletion (held by the finalizer, marked
/// revocable) and its withdrawal with the key they revoke, and the keys it replaced. A user
/// created, given its finalizer, signed and written Ready changes none of it: its account's JWT
/// names no user, and 1,000 users applied at once woke the account's pass on each of their
/// 3,000 events, a pass of the account (two questions to every server) always running, which a
/// deletion's revocation then waited behind (issue 40). What the account reads of its users
/// besides (the issuers of their JWTs while it retires a signing key, every user while it is
/// deleted) wakes it by its own rule ([`super::wakes::account_of_user`]).
pub(crate) fn user_touch(u: &NatsUser) -> Touch {
    Touch {
        account: Some(account_of(u)),
        digest: revoking(u),
        fresh: Some(revoking_nothing()),
    }
}

/// The digest of what a user's account revokes of it.
fn revoking(u: &NatsUser) -> u64 {
    let st = u.status.as_ref();
    let deleted = u.metadata.deletion_timestamp.is_some();
    let withdrawn = st.and_then(|s| s.withdrawn_at.as_ref()).map(secs_of);
    let public_key = st
        .and_then(|s| s.public_key.as_deref())
        .filter(|_| deleted || withdrawn.is_some());
    let replaced: Vec<(&str, i64)> = st
        .map(|s| {
            s.replaced_keys
                .iter()
                .map(|r| (r.public_key.as_str(), secs_of(&r.at)))
                .collect()
        })
        .unwrap_or_default();
    digest((
        deleted,
        deleted && finalizer::has(u),
        deleted && in_use::revocable(u),
        public_key,
        withdrawn,
        replaced,
    ))
}

/// [`revoking`] of a live user neither withdrawn nor holding replaced keys.
fn revoking_nothing() -> u64 {
    let (public_key, withdrawn, replaced): (Option<&str>, Option<i64>, Vec<(&str, i64)>) =
        (None, None, Vec::new());
    digest((false, false, false, public_key, withdrawn, replaced))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_two_words_so_an_empty_broadcast_slot_costs_little() {
        assert!(
            std::mem::size_of::<Change>() <= 16,
            "{} bytes",
            std::mem::size_of::<Change>()
        );
    }
}
