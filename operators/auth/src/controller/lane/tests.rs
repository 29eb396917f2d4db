use nats_claims::{AccountClaims, KeyKind, NKey};
use rstest::rstest;
use serde_json::{Value, json};

use super::*;

/// 2026-01-01T00:00:00Z.
const AT: i64 = 1_767_225_600;

fn user(kind: &str, deleting: bool, generation: i64, status: Value) -> NatsUser {
    let mut meta = json!({"name": "u", "namespace": "n", "generation": generation});
    if deleting {
        meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        meta["finalizers"] = json!([nats_api::auth::FINALIZER]);
    }
    serde_json::from_value(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
        "metadata": meta,
        "spec": {"accountRef": {"kind": kind, "name": "a"},
                 "credentials": {"secretKeyRef": {"name": "u-creds"}}},
        "status": status,
    }))
    .expect("a NatsUser")
}

fn status(observed: i64) -> Value {
    json!({"observedGeneration": observed, "publicKey": "UKEY"})
}

fn withdrawn() -> Value {
    json!({"observedGeneration": 1, "publicKey": "UKEY", "withdrawnAt": "2026-01-01T00:00:00Z"})
}

fn in_use() -> Value {
    json!({"observedGeneration": 2, "publicKey": "UKEY",
           "conditions": [{"type": "Ready", "status": "False", "reason": "CredentialsInUse",
                           "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
}

/// An account JWT revoking UKEY from `from` on (none: revoking nothing).
fn jwt(from: Option<i64>) -> String {
    let mut c = AccountClaims::new(NKey::generate(KeyKind::Account).public_key());
    if let Some(t) = from {
        c = c.revoke_at("UKEY", t);
    }
    c.encode(&NKey::generate(KeyKind::Operator))
        .expect("an account JWT")
}

fn account() -> Vec<Job> {
    vec![Job::Account("n".into(), "a".into())]
}

fn own() -> Vec<Job> {
    vec![Job::User("n".into(), "u".into())]
}

fn own_and_account() -> Vec<Job> {
    [own(), account()].concat()
}

fn none() -> Vec<Job> {
    Vec::new()
}

// "a deleted user's revoke, push and kick never wait behind other passes", in the design's
// order: its own pass observes the deletion and, at once, the account's revokes and pushes
// where no NatsConnection names the creds.
#[rstest]
#[case::deletion_unobserved_runs_its_own_pass_and_the_accounts(
    "NatsAccount",
    true,
    status(1),
    None,
    own_and_account()
)]
#[case::deletion_unobserved_but_revoked_runs_its_own_pass_only(
    "NatsAccount",
    true,
    status(1),
    Some(AT),
    own()
)]
#[case::observed_runs_the_account_pass("NatsAccount", true, status(2), None, account())]
#[case::revoked_before_the_deletion_runs_it_again("NatsAccount", true, status(2), Some(AT - 1), account())]
#[case::revoked_asks_nothing("NatsAccount", true, status(2), Some(AT), none())]
#[case::creds_in_use_asks_nothing("NatsAccount", true, in_use(), None, none())]
#[case::system_account_users_go_the_controllers_way(
    "NatsSystemAccount",
    true,
    status(2),
    None,
    none()
)]
#[case::withdrawn_runs_the_account_pass("NatsAccount", false, withdrawn(), None, account())]
#[case::withdrawn_and_revoked_asks_nothing("NatsAccount", false, withdrawn(), Some(AT), none())]
#[case::a_live_user_asks_nothing("NatsAccount", false, status(1), None, none())]
fn a_user_change_asks_the_lane(
    #[case] kind: &str,
    #[case] deleting: bool,
    #[case] status: Value,
    #[case] revoked_from: Option<i64>,
    #[case] want: Vec<Job>,
) {
    let u = user(kind, deleting, 2, status);
    let jwt = jwt(revoked_from);
    assert_eq!(after_user_change(&u, Some(&jwt)), want);
}

#[test]
fn a_user_without_an_account_jwt_asks_the_account_pass() {
    let u = user("NatsAccount", true, 2, status(2));
    assert_eq!(after_user_change(&u, None), account());
}

// "wait until every server holds the JWT, then kick"
#[rstest]
#[case::revoked_and_current(true, Some(AT), true, true)]
#[case::not_every_server_holds_it(true, Some(AT), false, false)]
#[case::not_revoked_yet(true, None, true, false)]
#[case::a_live_user(false, Some(AT), true, false)]
fn a_kick_is_due_once_every_server_holds_the_revocation(
    #[case] deleting: bool,
    #[case] revoked_from: Option<i64>,
    #[case] current: bool,
    #[case] want: bool,
) {
    let u = user("NatsAccount", deleting, 2, status(2));
    let jwt = jwt(revoked_from);
    assert_eq!(kick_due(&u, Some(&jwt), current), want);
}
