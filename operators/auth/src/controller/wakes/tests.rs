use std::collections::BTreeSet;

use kube::runtime::watcher::Event;
use rstest::rstest;
use serde_json::{Value, json};

use super::*;
use crate::controller::change::{Change, account_touch};
use crate::controller::index::{self, Kind, applied, listed_with};

const PK_A: &str = "AAHY3XJPOEDL4UIJIHVBUQQNS2KZBCQS2ZSVKDO6DANR3RGUPZVHVJ2J";
const PK_B: &str = "ABHY3XJPOEDL4UIJIHVBUQQNS2KZBCQS2ZSVKDO6DANR3RGUPZVHVJ2J";

fn account(name: &str, generation: i64, status: Value) -> NatsAccount {
    serde_json::from_value(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": name, "namespace": "n", "generation": generation},
        "spec": {"operatorRef": {"name": "op"}},
        "status": status,
    }))
    .expect("a NatsAccount")
}

fn system_account(name: &str) -> NatsSystemAccount {
    serde_json::from_value(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsSystemAccount",
        "metadata": {"name": name, "namespace": "n", "generation": 1},
        "spec": {"operatorRef": {"name": "op"}},
    }))
    .expect("a NatsSystemAccount")
}

/// A user of account `kind`/`account` in namespace n; `extra` merged into its metadata and status.
fn user(name: &str, kind: &str, account: &str, metadata: Value, status: Value) -> NatsUser {
    let mut meta = json!({"name": name, "namespace": "n"});
    if let (Some(m), Some(extra)) = (meta.as_object_mut(), metadata.as_object()) {
        m.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
        "metadata": meta,
        "spec": {"accountRef": {"kind": kind, "name": account}},
        "status": status,
    }))
    .expect("a NatsUser")
}

fn refused(reason: &str) -> Value {
    json!({"conditions": [{"type": "Ready", "status": "False", "reason": reason, "message": "m",
                           "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
}

fn deleting() -> Value {
    json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["auth.nats.mikluko.io/revoke"]})
}

fn replaced() -> Value {
    json!({"replacedKeys": [{"publicKey": "UOLD", "at": "2026-01-01T00:00:00Z"}]})
}

#[rstest]
#[case::status_distribution_only(1, json!({"publicKey": PK_A}), 1, json!({"publicKey": PK_A, "jwt": "e30.e30.x", "jwtHash": "h"}), false, false)]
#[case::a_new_generation(1, json!({"publicKey": PK_A}), 2, json!({"publicKey": PK_A}), false, true)]
#[case::its_public_key_recorded(1, json!({}), 1, json!({"publicKey": PK_A}), false, true)]
#[case::its_public_key_replaced(1, json!({"publicKey": PK_A}), 1, json!({"publicKey": PK_B}), false, true)]
#[case::its_deletion(1, json!({"publicKey": PK_A}), 1, json!({"publicKey": PK_A}), true, true)]
fn an_accounts_digest_moves_with_what_its_users_read(
    #[case] gen_before: i64,
    #[case] before: Value,
    #[case] gen_after: i64,
    #[case] after: Value,
    #[case] delete: bool,
    #[case] moved: bool,
) {
    let old = account("a", gen_before, before);
    let mut new = account("a", gen_after, after);
    if delete {
        new.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
    }
    assert_eq!(account_touch(&old) != account_touch(&new), moved);
}

#[rstest]
#[case::ready(json!({}), json!({}), false, false)]
#[case::refused_for_its_key(json!({}), refused(reason::PUBLIC_KEY_IN_USE), true, false)]
#[case::refused_otherwise(json!({}), refused(reason::KEYS_PENDING), false, false)]
#[case::deleting(deleting(), json!({}), false, true)]
#[case::holding_replaced_keys(json!({}), replaced(), false, true)]
#[case::withdrawn(json!({}), json!({"withdrawnAt": "2026-11-22T09:20:00Z"}), false, true)]
fn what_a_user_waits_on(
    #[case] metadata: Value,
    #[case] status: Value,
    #[case] for_key: bool,
    #[case] jwt: bool,
) {
    let u = user("u", "NatsAccount", "a", metadata, status);
    assert_eq!(refused_for_key(&u), for_key);
    assert_eq!(reads_account_jwt(&u), jwt);
}

fn touched(name: &str, account: Option<(AccountKind, &str)>, changed: bool) -> Touched {
    Touched {
        namespace: "n".into(),
        name: name.into(),
        account: account.map(|(k, a)| (k, "n".to_string(), a.to_string())),
        changed,
    }
}

#[rstest]
#[case::a_natsaccount_user(Some((AccountKind::NatsAccount, "a")), vec!["a"], vec![])]
#[case::a_system_user(Some((AccountKind::NatsSystemAccount, "sys")), vec![], vec!["sys"])]
#[case::not_a_user(None, vec![], vec![])]
fn a_user_change_wakes_its_own_account_only(
    #[case] account: Option<(AccountKind, &str)>,
    #[case] accounts: Vec<&str>,
    #[case] system: Vec<&str>,
) {
    let (idx, _feeds) = index::new();
    let t = touched("u", account, true);
    let names = |refs: Vec<String>| refs;
    assert_eq!(
        names(
            account_of_user(&idx, &t)
                .into_iter()
                .map(|r| r.name)
                .collect()
        ),
        accounts
    );
    assert_eq!(
        names(
            system_account_of_user(&idx, &t)
                .into_iter()
                .map(|r| r.name)
                .collect()
        ),
        system
    );
}

fn names<K: kube::Resource>(refs: Vec<ObjectRef<K>>) -> BTreeSet<String> {
    refs.into_iter().map(|r| r.name).collect()
}

/// Account a has a ready user, one refused for its key, one deleting and one holding replaced
/// keys; account b one user; system account sys (of NatsOperator op) one.
async fn filled() -> Index {
    let (idx, feeds) = index::new();
    let index::Feeds {
        operators,
        system_accounts,
        accounts,
        users,
        grants,
        connections,
    } = feeds;
    listed_with(operators, vec![]).await;
    listed_with(connections, vec![]).await;
    listed_with(grants, vec![]).await;
    listed_with(system_accounts, vec![system_account("sys")]).await;
    let mut held_account = account("c", 1, refused(reason::CREDENTIALS_IN_USE));
    held_account.metadata.deletion_timestamp = user("x", "NatsAccount", "c", deleting(), json!({}))
        .metadata
        .deletion_timestamp;
    let mut leaving_account = account("d", 1, refused(reason::PUBLIC_KEY_IN_USE));
    leaving_account.metadata.deletion_timestamp = held_account.metadata.deletion_timestamp.clone();
    listed_with(
        accounts,
        vec![
            account("a", 1, json!({})),
            account("b", 1, json!({})),
            held_account,
            leaving_account,
        ],
    )
    .await;
    let users_listed = vec![
        user("ready", "NatsAccount", "a", json!({}), json!({})),
        user(
            "in-use",
            "NatsAccount",
            "a",
            json!({}),
            refused(reason::PUBLIC_KEY_IN_USE),
        ),
        user("leaving", "NatsAccount", "a", deleting(), json!({})),
        user("rotated", "NatsAccount", "a", json!({}), replaced()),
        user(
            "other",
            "NatsAccount",
            "b",
            json!({}),
            refused(reason::PUBLIC_KEY_IN_USE),
        ),
        user("sys-user", "NatsSystemAccount", "sys", json!({}), json!({})),
        user(
            "held",
            "NatsAccount",
            "b",
            deleting(),
            refused(reason::CREDENTIALS_IN_USE),
        ),
        user(
            "live-refused",
            "NatsAccount",
            "b",
            json!({}),
            refused(reason::CREDENTIALS_IN_USE),
        ),
    ];
    listed_with(users, users_listed).await;
    idx
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[tokio::test]
async fn an_account_change_wakes_all_its_users_only_when_what_they_read_changed() {
    let idx = filled().await;
    assert_eq!(
        names(users_of_account(&idx, &touched("a", None, true))),
        set(&["ready", "in-use", "leaving", "rotated"])
    );
    assert_eq!(
        names(users_of_account(&idx, &touched("a", None, false))),
        set(&["leaving", "rotated"])
    );
    assert_eq!(
        names(users_of_system_account(&idx, &touched("sys", None, true))),
        set(&["sys-user"])
    );
    assert_eq!(
        names(users_of_operator(&idx, &touched("op", None, true))),
        set(&["sys-user"])
    );
    assert_eq!(
        names(users_of_operator(&idx, &touched("other-op", None, true))),
        set(&[])
    );
}

#[tokio::test]
async fn a_user_change_wakes_the_users_of_its_account_refused_for_their_key() {
    let idx = filled().await;
    let a = Some((AccountKind::NatsAccount, "a"));
    assert_eq!(
        names(users_refused_for_key(&idx, &touched("ready", a, true))),
        set(&["in-use"])
    );
    // The refused user's own change wakes no one (its own watch event runs its pass).
    assert_eq!(
        names(users_refused_for_key(&idx, &touched("in-use", a, true))),
        set(&[])
    );
    let b = Some((AccountKind::NatsAccount, "b"));
    assert_eq!(
        names(users_refused_for_key(&idx, &touched("new", b, true))),
        set(&["other"])
    );
}

#[tokio::test]
async fn the_feed_says_whether_an_accounts_digest_changed_since_its_last_event() {
    let (idx, feeds) = index::new();
    let mut rx = idx.changes(Kind::Account).expect("the accounts' changes");
    let first = account("a", 1, json!({}));
    let keyed = account("a", 1, json!({"publicKey": PK_A}));
    let distributed = account("a", 1, json!({"publicKey": PK_A, "jwtHash": "h"}));
    applied(
        feeds.accounts,
        vec![
            Event::Init,
            Event::InitApply(first),
            Event::InitDone,
            Event::Apply(keyed),
            Event::Apply(distributed.clone()),
            Event::Delete(distributed),
        ],
    )
    .await;
    let mut seen = Vec::new();
    while let Ok(c) = rx.try_recv() {
        seen.push(match c {
            Change::Relisted => "relisted".to_string(),
            Change::Touched(t) => format!("{} changed={}", t.name, t.changed),
        });
    }
    assert_eq!(
        seen,
        [
            "relisted",
            "a changed=true",
            "a changed=false",
            "a changed=true"
        ]
    );
}

#[tokio::test]
async fn a_connection_change_wakes_only_the_users_and_accounts_held_for_creds_in_use() {
    let idx = filled().await;
    // A deleted user held CredentialsInUse in the connection's namespace; not a deleted user
    // held for another reason, nor a live one.
    assert_eq!(
        names(users_held_for_creds(&idx, &touched("conn", None, true))),
        set(&["held"])
    );
    let elsewhere = Touched {
        namespace: "m".into(),
        ..touched("conn", None, true)
    };
    assert_eq!(names(users_held_for_creds(&idx, &elsewhere)), set(&[]));
    // A deleted account held CredentialsInUse, whatever the connection's namespace (its users
    // may live in others); not one deleted and held for another reason.
    assert_eq!(
        names(accounts_held_for_creds(&idx, &elsewhere)),
        set(&["c"])
    );
}

#[tokio::test]
async fn the_feed_says_a_user_changed_only_when_what_its_account_revokes_of_it_did() {
    let (idx, feeds) = index::new();
    let mut rx = idx.changes(Kind::User).expect("the users' changes");
    let fin = json!({"finalizers": ["auth.nats.mikluko.io/revoke"], "generation": 1});
    let created = user("u", "NatsAccount", "a", json!({"generation": 1}), json!({}));
    let finalized = user("u", "NatsAccount", "a", fin.clone(), json!({}));
    let ready = user(
        "u",
        "NatsAccount",
        "a",
        fin.clone(),
        json!({"publicKey": "UA", "jwt": "j", "observedGeneration": 1}),
    );
    let rekeyed = user(
        "u",
        "NatsAccount",
        "a",
        fin,
        json!({"publicKey": "UB", "observedGeneration": 1,
               "replacedKeys": [{"publicKey": "UA", "at": "2026-01-01T00:00:00Z"}]}),
    );
    let mut deleted = rekeyed.clone();
    deleted.metadata.deletion_timestamp = user("x", "NatsAccount", "a", deleting(), json!({}))
        .metadata
        .deletion_timestamp;
    deleted.metadata.generation = Some(2);
    let mut marked = deleted.clone();
    if let Some(st) = marked.status.as_mut() {
        st.observed_generation = Some(2);
    }
    let withdrawn = user(
        "w",
        "NatsAccount",
        "a",
        json!({}),
        json!({"publicKey": "UW", "withdrawnAt": "2026-01-01T00:00:00Z"}),
    );
    // With a creds Secret: its deletion is revocable once its own pass observed it.
    let with_creds = |mut u: NatsUser| {
        u.spec.credentials = serde_json::from_value(json!({"secretKeyRef": {"name": "u-creds"}}))
            .expect("credentials");
        u
    };
    let [created, finalized, ready, rekeyed, deleted, marked] =
        [created, finalized, ready, rekeyed, deleted, marked].map(with_creds);
    applied(
        feeds.users,
        vec![
            Event::Init,
            Event::InitDone,
            Event::Apply(created),
            Event::Apply(finalized),
            Event::Apply(ready),
            Event::Apply(rekeyed),
            Event::Apply(deleted),
            Event::Apply(marked.clone()),
            Event::Delete(marked),
            Event::Apply(withdrawn),
        ],
    )
    .await;
    let mut seen = Vec::new();
    while let Ok(c) = rx.try_recv() {
        if let Change::Touched(t) = c {
            seen.push(format!("{} changed={}", t.name, t.changed));
        }
    }
    assert_eq!(
        seen,
        [
            "u changed=false", // created
            "u changed=false", // its finalizer
            "u changed=false", // signed, Ready
            "u changed=true",  // a key replaced
            "u changed=true",  // deleted
            "u changed=true",  // its deletion observed: revocable
            "u changed=true",  // gone
            "w changed=true",  // new, and withdrawn
        ]
    );
}

#[rstest]
#[case::a_change_of_what_it_revokes(true, json!({}), None, true)]
#[case::another_change(false, json!({}), None, false)]
#[case::another_change_while_it_retires_a_key(
    false,
    json!({"keys": {"signing": [{"name": "old", "secretKeyRef": {"name": "s"}, "retiring": true}]}}),
    None,
    true
)]
#[case::another_change_while_it_is_deleted(false, json!({}), Some("2026-01-01T00:00:00Z"), true)]
#[tokio::test]
async fn a_users_account_wakes_for_what_it_revokes_or_when_it_reads_every_user(
    #[case] changed: bool,
    #[case] spec: Value,
    #[case] deleted: Option<&str>,
    #[case] wakes: bool,
) {
    let (idx, feeds) = index::new();
    let mut a: NatsAccount = serde_json::from_value(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "a", "namespace": "n", "generation": 1},
        "spec": {"operatorRef": {"name": "op"}},
    }))
    .expect("a NatsAccount");
    if let Some(keys) = spec.get("keys") {
        a.spec.keys = serde_json::from_value(keys.clone()).expect("keys");
    }
    if let Some(at) = deleted {
        a.metadata.deletion_timestamp = serde_json::from_value(json!(at)).expect("a time");
    }
    listed_with(feeds.accounts, vec![a]).await;
    let t = touched("u", Some((AccountKind::NatsAccount, "a")), changed);
    let woke: Vec<String> = account_of_user(&idx, &t)
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(!woke.is_empty(), wakes, "{woke:?}");
}
