//! A deleted NatsUser whose creds Secret a NatsConnection still names (issue 43): the user of
//! the creds goes first. Such a user is not revoked, its Secret is not deleted, and its
//! NatsAccount is not deleted on the servers, until every NatsConnection naming the Secret is
//! gone; meanwhile it reads Ready False, `CredentialsInUse`, naming them.
//!
//! Why: a JetStream resource with `deletionPolicy: Delete` deleted in the same cascade reaches
//! NATS through such a connection, which the JetStream controller keeps (its in-use finalizer)
//! until that deletion has run; revoking the user, deleting its Secret or `CLAIMS.DELETE` of its
//! account first would leave the resource unable to delete its stream. A NatsConnection counts
//! while it exists, being deleted or not: the auth controller's own `--system-connection` and a
//! controller's system connection are NatsConnections too, so the user they dial as goes after
//! them. A NatsCluster's `auth.systemCredentials` is not read here (the cluster group is not the
//! auth controller's, §2.2): the cluster controller's deletion guard falls back to the servers'
//! monitoring endpoints when that user is refused, so nothing waits on it.
//!
//! The revocation waits for the same answer: the account's pass revokes a deleted user with
//! credentials once that user's own deleting pass has observed the deletion's generation and did
//! not hold it for creds in use ([`revocable`], a marker in its status), or once the account's
//! pass itself finds no NatsConnection naming the creds ([`unused_creds`], the same question
//! the user's pass asks), so the account's pass, woken by the same deletion, never revokes a
//! user whose creds a NatsConnection names, and need not wait for the marker's write either.
//!
//! The NatsConnections are read from the index's watch of them ([`Index::creds_readers`]), not
//! listed: a LIST per deleted user (and per user of a deleted account) was the one apiserver
//! request left between a deletion and its revocation, 64 ms of a kick's 650 right after 1,000
//! users were applied (issue 40). Why a watch's copy is safe here is said in [`super::super::index`].
//! A connection's change wakes the users and accounts held for it ([`super::super::wakes`]), so a
//! hold ends when its last connection goes, not at the next look.
//!
//! [`Index::creds_readers`]: super::super::index::Index::creds_readers
//!
//! No cycle: the wait ends on NatsConnections, which wait on JetStream resources, which wait on
//! the servers; none of those waits on a NatsUser or a NatsAccount (see the JetStream
//! controller's `in_use` module). `auth.nats.mikluko.io/force-delete` overrides the hold.

use std::collections::HashSet;
use std::time::Duration;

use controller_kit::conditions::{self, Decided};
use controller_kit::finalizer::Cleanup;
use kube::{Resource, ResourceExt};
use nats_api::auth::{NatsUser, NatsUserStatus, condition, reason};

use crate::controller::Context;
use crate::controller::error::Error;
use crate::controller::finalizer::deletion_held;
use crate::controller::write_status::{merged, write_status};
use crate::deletion_hold;

/// How soon a user held for its creds looks again, should a wake be missed (a connection's
/// change wakes it).
const RECHECK: Duration = Duration::from_secs(10);

/// A NatsConnection as this rule reads it: its namespace, name and the creds Secret it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CredsReader {
    pub namespace: String,
    pub name: String,
    pub secret: Option<String>,
}

/// The connections among `all` that read the creds Secret `namespace/secret` (a NatsConnection
/// reads Secrets of its own namespace), as `NatsConnection ns/name`.
pub(crate) fn connections_using(namespace: &str, secret: &str, all: &[CredsReader]) -> Vec<String> {
    all.iter()
        .filter(|c| c.namespace == namespace && c.secret.as_deref() == Some(secret))
        .map(|c| format!("NatsConnection {}/{}", c.namespace, c.name))
        .collect()
}

/// Whether the account's pass may revoke the deleted user `u` now: one without a creds Secret
/// always; one with, once its own deleting pass has observed the deletion (its
/// observedGeneration caught up with the generation the deletion bumped) and did not hold it
/// for creds in use — or its deletion is forced.
pub(crate) fn revocable(u: &NatsUser) -> bool {
    if u.spec.credentials.is_none() || deletion_hold::force_delete(u.annotations()) {
        return true;
    }
    let Some(st) = &u.status else { return false };
    let observed =
        st.observed_generation.is_some() && st.observed_generation == u.meta().generation;
    let held = st
        .conditions
        .iter()
        .any(|c| c.type_ == condition::READY && c.reason == reason::CREDENTIALS_IN_USE);
    observed && !held
}

/// The NatsConnections naming `u`'s creds Secret (empty without one).
pub(crate) fn users_of_creds(ctx: &Context, u: &NatsUser) -> Vec<String> {
    let Some(c) = &u.spec.credentials else {
        return Vec::new();
    };
    let ns = u.namespace().unwrap_or_default();
    let readers = ctx.index.creds_readers(&ns);
    connections_using(&ns, &c.secret_key_ref.name, &readers)
}

/// Whether `u` is a deleted user held for its creds in use (Ready False CredentialsInUse):
/// what a NatsConnection's change may release.
pub(crate) fn held_for_creds(u: &NatsUser) -> bool {
    let conds = u.status.as_ref().map(|s| s.conditions.as_slice());
    deleted_and_held(u.metadata.deletion_timestamp.is_some(), conds)
}

/// Whether an object deleted (`deleted`) whose conditions are `conds` is held while creds are in
/// use (Ready False CredentialsInUse): a user for its own, an account for its users'.
pub(crate) fn deleted_and_held(
    deleted: bool,
    conds: Option<&[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]>,
) -> bool {
    deleted
        && conds.is_some_and(|c| {
            conditions::find(c, condition::READY)
                .is_some_and(|c| c.reason == reason::CREDENTIALS_IN_USE)
        })
}

/// A user's (namespace, name), as [`unused_creds`] names it.
pub(crate) fn user_key(u: &NatsUser) -> (String, String) {
    (u.namespace().unwrap_or_default(), u.name_any())
}

/// The deleted users among `users` that its account's pass may revoke though their own pass
/// has not marked them [`revocable`]: its creds Secret named by no NatsConnection (the question
/// the user's own pass asks, asked by the account's pass so that the revocation does not wait
/// for the user's status write and its echo, issue 40's kick).
pub(crate) fn unused_creds(
    ctx: &Context,
    users: &[std::sync::Arc<NatsUser>],
) -> HashSet<(String, String)> {
    users
        .iter()
        .map(|u| &**u)
        .filter(|u| awaits_marker(u) && users_of_creds(ctx, u).is_empty())
        .map(user_key)
        .collect()
}

/// A deleted user, still held by the finalizer, with a creds Secret and a public key, that its
/// own pass has not marked [`revocable`]: what [`unused_creds`] asks about.
fn awaits_marker(u: &NatsUser) -> bool {
    u.metadata.deletion_timestamp.is_some()
        && crate::controller::finalizer::has(u)
        && u.spec.credentials.is_some()
        && u.status.as_ref().is_some_and(|s| s.public_key.is_some())
        && !revocable(u)
}

/// The users among `users` (an account's) whose creds Secret a NatsConnection names, each as
/// `NatsUser ns/name (NatsConnection ns/c, …)`: while any is left, the account is not deleted on
/// the servers, since that would cut those connections off as surely as a revocation.
pub(crate) fn account_users_in_use(
    ctx: &Context,
    users: &[std::sync::Arc<NatsUser>],
) -> Vec<String> {
    let mut out = Vec::new();
    for u in users {
        if deletion_hold::force_delete(u.annotations()) {
            continue;
        }
        let using = users_of_creds(ctx, u);
        if !using.is_empty() {
            out.push(format!(
                "NatsUser {}/{} ({})",
                u.namespace().unwrap_or_default(),
                u.name_any(),
                using.join(", ")
            ));
        }
    }
    out
}

/// The deleted user held while its creds are in use: Ready False CredentialsInUse naming the
/// connections (a DeletionHeld Event once), looked at again within seconds. None when nothing
/// uses them, or the deletion is forced.
pub(super) async fn hold_while_in_use(
    ctx: &Context,
    u: &NatsUser,
) -> Result<Option<Cleanup>, Error> {
    if deletion_hold::force_delete(u.annotations()) {
        return Ok(None);
    }
    let using = users_of_creds(ctx, u);
    if using.is_empty() {
        return Ok(None);
    }
    let secret = u
        .spec
        .credentials
        .as_ref()
        .map(|c| c.secret_key_ref.name.clone())
        .unwrap_or_default();
    let message = format!(
        "creds Secret {secret} is still used by {}: the user is revoked and its Secret deleted \
         once they are gone",
        using.join(", ")
    );
    let cond = Decided::new(
        condition::READY,
        false,
        reason::CREDENTIALS_IN_USE,
        message.clone(),
    );
    let prev = u.status.clone().unwrap_or_default();
    let status = NatsUserStatus {
        observed_generation: u.meta().generation,
        conditions: merged(u, std::slice::from_ref(&cond), &[]),
        ..prev
    };
    let unchanged = u.status.as_ref().is_some_and(|s| {
        s.observed_generation == u.meta().generation
            && conditions::find(&s.conditions, condition::READY)
                .is_some_and(|c| c.reason == cond.reason && c.message == cond.message)
    });
    if !unchanged {
        write_status(ctx, u, &status).await?;
    }
    deletion_held(ctx, u, &cond).await;
    Ok(Some(Cleanup::Wait {
        after: RECHECK,
        reason: message,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn r(ns: &str, name: &str, secret: Option<&str>) -> CredsReader {
        CredsReader {
            namespace: ns.into(),
            name: name.into(),
            secret: secret.map(Into::into),
        }
    }

    #[rstest]
    #[case::a_connection_dialing_as_the_user_holds_it(
        vec![r("t", "orders", Some("orders-app-creds"))],
        vec!["NatsConnection t/orders"]
    )]
    #[case::another_users_creds_do_not(vec![r("t", "system", Some("other-creds"))], vec![])]
    #[case::a_connection_without_creds_does_not(vec![r("t", "anon", None)], vec![])]
    #[case::a_secret_of_the_same_name_elsewhere_does_not(
        vec![r("u", "orders", Some("orders-app-creds"))],
        vec![]
    )]
    #[case::every_connection_is_named(
        vec![
            r("t", "auth", Some("orders-app-creds")),
            r("t", "orders", Some("orders-app-creds")),
        ],
        vec!["NatsConnection t/auth", "NatsConnection t/orders"]
    )]
    fn the_users_of_a_creds_secret(#[case] all: Vec<CredsReader>, #[case] want: Vec<&str>) {
        assert_eq!(connections_using("t", "orders-app-creds", &all), want);
    }

    fn user(creds: bool, generation: i64, observed: Option<i64>, ready: &'static str) -> NatsUser {
        let mut spec = serde_json::json!({"accountRef": {"kind": "NatsAccount", "name": "orders"}});
        if creds {
            spec["credentials"] = serde_json::json!({"secretKeyRef": {"name": "c"}});
        } else {
            spec["publicKey"] = serde_json::json!("UABC");
        }
        let mut u = NatsUser::new("app", serde_json::from_value(spec).expect("spec"));
        u.metadata.generation = Some(generation);
        u.status = observed.map(|o| {
            let mut conditions = Vec::new();
            Decided::new(condition::READY, false, ready, "m").upsert(
                &mut conditions,
                Some(o),
                &conditions::now(),
            );
            NatsUserStatus {
                observed_generation: Some(o),
                conditions,
                ..Default::default()
            }
        });
        u
    }

    #[rstest]
    #[case::no_creds_secret_nothing_to_wait_for(user(false, 2, Some(1), "Signed"), true)]
    #[case::its_pass_has_not_seen_the_deletion_yet(user(true, 2, Some(1), "Signed"), false)]
    #[case::no_status_yet(user(true, 2, None, "Signed"), false)]
    #[case::held_for_creds_in_use(user(true, 2, Some(2), reason::CREDENTIALS_IN_USE), false)]
    #[case::its_pass_saw_the_deletion_and_nothing_uses_the_creds(
        user(true, 2, Some(2), reason::DISTRIBUTING),
        true
    )]
    fn when_a_deleted_user_may_be_revoked(#[case] u: NatsUser, #[case] want: bool) {
        assert_eq!(revocable(&u), want);
    }

    /// `u` deleted (a deletionTimestamp and the finalizer) with a public key recorded.
    fn deleted(mut u: NatsUser, public_key: bool) -> NatsUser {
        u.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            conditions::now().0,
        ));
        u.metadata.finalizers = Some(vec![nats_api::auth::FINALIZER.to_string()]);
        if public_key && let Some(st) = u.status.as_mut() {
            st.public_key = Some("UKEY".into());
        }
        u
    }

    // Which deleted users the account's pass asks the NatsConnections about itself: those its
    // own pass has not marked revocable, with creds and a key to revoke.
    #[rstest]
    #[case::unmarked(deleted(user(true, 2, Some(1), "Signed"), true), true)]
    #[case::held_for_creds_in_use(
        deleted(user(true, 2, Some(2), reason::CREDENTIALS_IN_USE), true),
        true
    )]
    #[case::marked_already(deleted(user(true, 2, Some(2), reason::DISTRIBUTING), true), false)]
    #[case::no_creds_secret(deleted(user(false, 2, Some(1), "Signed"), true), false)]
    #[case::no_key_to_revoke(deleted(user(true, 2, Some(1), "Signed"), false), false)]
    #[case::not_deleted(user(true, 2, Some(1), "Signed"), false)]
    fn which_deleted_users_the_account_asks_about(#[case] u: NatsUser, #[case] want: bool) {
        assert_eq!(awaits_marker(&u), want);
    }
}
