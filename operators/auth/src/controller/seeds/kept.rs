//! An account's signing keys as its users' passes read them, kept between passes: 1,000 users of
//! one account each read the account's two generated key Secrets again (2 of the 7.45 apiserver
//! requests a user cost), though what those Secrets hold is what the account signed its JWT
//! with and changes only with the account. A NatsOperator's signing keys are kept the same way
//! for its accounts' passes (a revoking pass read them first, two Secret reads before the push
//! that kicks).
//!
//! The keys are kept per account at the version of the account they were read at (its UID and
//! resourceVersion, from the index): a change of its keys (spec.keys, a signing key rotated or
//! retired, a seed generated or lost) is a change of the account, whose pass records it, so the
//! next user pass reads again. A Secret rewritten in place without its account's pass noticing
//! yet is read again at the latest [`KEPT_FOR`] after it was read; until then a user is signed by
//! the key its account's JWT still lists, as after that pass would have it. Seeds stay in the
//! controller's memory only (never a log, an Event or a status), as while a pass holds them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Resolved;

/// How long keys read of an account at one version are used before they are read again.
pub(crate) const KEPT_FOR: Duration = Duration::from_secs(30);

/// `uid/resourceVersion` of an object (empty where either is missing: its keys are not kept).
pub(crate) fn version_of<K: kube::Resource>(o: &K) -> String {
    match (&o.meta().uid, &o.meta().resource_version) {
        (Some(uid), Some(rv)) => format!("{uid}/{rv}"),
        _ => String::new(),
    }
}

/// Keys read of an account at a version.
struct Entry {
    version: String,
    read: Instant,
    keys: Arc<Resolved>,
}

/// The keys user passes read, by account.
#[derive(Default)]
pub(crate) struct Kept {
    map: Mutex<HashMap<String, Entry>>,
}

/// Whether keys read at `kept` (`age` ago) are those of the account at `version` now.
pub(crate) fn reusable(kept: &str, age: Duration, version: &str) -> bool {
    !version.is_empty() && kept == version && age < KEPT_FOR
}

impl Kept {
    /// The keys of `account` kept at `version`, if [`reusable`].
    pub(crate) fn get(&self, account: &str, version: &str) -> Option<Arc<Resolved>> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(account)
            .filter(|e| reusable(&e.version, e.read.elapsed(), version))
            .map(|e| e.keys.clone())
    }

    /// The keys of `object` kept at `version`, else those `read` returns, kept from then on.
    pub(crate) async fn or_read<E, Fut>(
        &self,
        object: &str,
        version: &str,
        read: impl FnOnce() -> Fut,
    ) -> Result<Arc<Resolved>, E>
    where
        Fut: std::future::Future<Output = Result<Resolved, E>>,
    {
        if let Some(keys) = self.get(object, version) {
            return Ok(keys);
        }
        let keys = Arc::new(read().await?);
        self.keep(object, version, keys.clone());
        Ok(keys)
    }

    /// Keeps `keys` as read of `account` at `version` (the entries past [`KEPT_FOR`] dropped).
    pub(crate) fn keep(&self, account: &str, version: &str, keys: Arc<Resolved>) {
        if version.is_empty() {
            return;
        }
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, e| e.read.elapsed() < KEPT_FOR);
        map.insert(
            account.to_string(),
            Entry {
                version: version.to_string(),
                read: Instant::now(),
                keys,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::the_same_version_just_read("u1/7", Duration::ZERO, "u1/7", true)]
    #[case::the_account_changed_since("u1/7", Duration::ZERO, "u1/8", false)]
    #[case::an_account_of_the_same_name_again("u1/7", Duration::ZERO, "u2/7", false)]
    #[case::read_too_long_ago("u1/7", KEPT_FOR, "u1/7", false)]
    #[case::no_version_is_never_kept("", Duration::ZERO, "", false)]
    fn keys_are_used_again_only_at_the_version_they_were_read_at(
        #[case] kept: &str,
        #[case] age: Duration,
        #[case] version: &str,
        #[case] want: bool,
    ) {
        assert_eq!(reusable(kept, age, version), want);
    }

    fn resolved() -> Arc<Resolved> {
        Arc::new(Resolved {
            identity: None,
            public_key: "A".into(),
            signing: vec![],
            seed_secrets: Default::default(),
        })
    }

    #[test]
    fn kept_per_account_and_version() {
        let kept = Kept::default();
        assert!(kept.get("NatsAccount t/a", "u1/7").is_none());
        kept.keep("NatsAccount t/a", "u1/7", resolved());
        assert!(kept.get("NatsAccount t/a", "u1/7").is_some());
        assert!(kept.get("NatsAccount t/a", "u1/8").is_none());
        assert!(kept.get("NatsAccount t/b", "u1/7").is_none());
        kept.keep("NatsAccount t/a", "", resolved());
        assert!(
            kept.get("NatsAccount t/a", "u1/7").is_some(),
            "no version: not kept"
        );
    }
}
