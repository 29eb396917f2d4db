//! A deletion the auth controller holds, and its way out. A NatsUser's finalizer waits until every
//! server holds the account JWT revoking its key and its connections are kicked; a NatsAccount's
//! until its NatsOperator records the deletion. Both need NATS, or another object's controller;
//! with NATS lost, or the NatsOperator's namespace going first, they would wait for ever and
//! wedge a namespace's deletion. The `auth.nats.mikluko.io/force-delete` annotation (read only
//! while deleting, never cleared) releases the finalizer at once, giving up what the wait was for.
//! A held deletion says why, and how to release it, in its Ready condition and on an Event.

use nats_api::auth::annotation::FORCE_DELETE;

/// The kind whose deletion is held: what a forced release gives up differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    User,
    Account,
}

impl Held {
    /// What releasing without the wait gives up.
    pub fn gives_up(self) -> &'static str {
        match self {
            Held::User => {
                "the user's key stays usable on any server the revocation has not reached, and its connections are not kicked"
            }
            Held::Account => {
                "servers that were not sent CLAIMS.DELETE keep serving the account until its JWT expires"
            }
        }
    }
}

/// What a deletion that still waits for something does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Keep the finalizer; the message (Ready, and a DeletionHeld Event) says why and how out.
    Wait(String),
    /// Release the finalizer now; the message (a ForceDeleted Event) says what was skipped.
    Release(String),
}

/// A deletion of `held` waiting for `waiting_for` (a phrase: "every server to hold the account
/// JWT revoking UABC"), with or without the force-delete annotation.
pub fn hold(held: Held, waiting_for: &str, force_delete: bool) -> Hold {
    if force_delete {
        Hold::Release(format!(
            "{FORCE_DELETE}: released without waiting for {waiting_for}; {}",
            held.gives_up()
        ))
    } else {
        Hold::Wait(format!(
            "deleting: waiting for {waiting_for}; the annotation {FORCE_DELETE} releases it without waiting ({})",
            held.gives_up()
        ))
    }
}

/// Whether an object's annotations carry force-delete (any value, as the cluster's).
pub fn force_delete(annotations: &std::collections::BTreeMap<String, String>) -> bool {
    annotations.contains_key(FORCE_DELETE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::user_waits(
        Held::User,
        false,
        "deleting: waiting for every server",
        "its connections are not kicked"
    )]
    #[case::user_forced(
        Held::User,
        true,
        "auth.nats.mikluko.io/force-delete: released without waiting for every server",
        "stays usable"
    )]
    #[case::account_waits(
        Held::Account,
        false,
        "deleting: waiting for every server",
        "until its JWT expires"
    )]
    #[case::account_forced(
        Held::Account,
        true,
        "auth.nats.mikluko.io/force-delete: released",
        "CLAIMS.DELETE"
    )]
    fn a_held_deletion_says_why_and_how_out(
        #[case] held: Held,
        #[case] force: bool,
        #[case] starts: &str,
        #[case] mentions: &str,
    ) {
        let got = hold(held, "every server to hold it", force);
        let (released, m) = match &got {
            Hold::Wait(m) => (false, m),
            Hold::Release(m) => (true, m),
        };
        assert_eq!(released, force);
        assert!(m.starts_with(starts), "{m}");
        assert!(m.contains(mentions), "{m}");
        if !force {
            assert!(m.contains(FORCE_DELETE), "a wait names its way out: {m}");
        }
    }

    #[rstest]
    #[case::absent(&[], false)]
    #[case::empty_value(&[(FORCE_DELETE, "")], true)]
    #[case::any_value(&[(FORCE_DELETE, "false")], true)]
    #[case::the_clusters_is_not_ours(&[("cluster.nats.mikluko.io/force-delete", "")], false)]
    fn force_delete_is_any_value_of_our_annotation(
        #[case] pairs: &[(&str, &str)],
        #[case] want: bool,
    ) {
        let a = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(force_delete(&a), want);
    }
}
