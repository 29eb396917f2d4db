//! What one event of the index's feeds says ([`Change`]), and what each kind's feed derives from
//! an object for it ([`Touch`]): the index sends these, [`super::wakes`] maps them to the objects
//! a change wakes.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use kube::ResourceExt;
use nats_api::auth::{AccountKind, NatsAccount, NatsSystemAccount, NatsUser};

use super::refs::account_of;

/// What one event of the index's feeds says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// The kind was listed (again): any object may have changed.
    Relisted,
    /// One object was applied or deleted.
    Touched(Touched),
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
}

impl Touch {
    /// A kind read whole: every change counts.
    pub fn plain<K>(_: &K) -> Touch {
        Touch {
            account: None,
            digest: 0,
        }
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
    }
}

/// A NatsUser names its account; every change of it counts.
pub(crate) fn user_touch(u: &NatsUser) -> Touch {
    Touch {
        account: Some(account_of(u)),
        digest: 0,
    }
}
