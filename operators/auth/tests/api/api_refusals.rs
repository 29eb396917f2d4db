//! API tier: every refusal reason the auth controller writes, provoked once on a real
//! kube-apiserver 1.20 — SecretConflict, SeedLost, PublicKeyInUse (account, the system account's
//! key, user), NoSystemConnection — and never a seed in status.

use crate::apirig;

use std::time::Duration;

use apirig::{Rig, str_at, wait_event, wait_ready};
use auth_controller::controller::{Settings, SystemConnection};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use nats_api::auth::{NatsAccount, NatsOperator, NatsSystemAccount, NatsUser};
use nats_claims::{KeyKind, NKey};
use serde_json::json;
use sim::testkit::{is, message, wait_for, wait_gone};

const NS: &str = "nats-system";

async fn trust_roots(rig: &Rig) {
    rig.apply_story("02-auth-plane", "01-trust-roots.yaml", &[])
        .await;
    wait_ready(&rig.api::<NatsOperator>(NS), "demo", "True", "Signed").await;
    wait_ready(
        &rig.api::<NatsSystemAccount>(NS),
        "system",
        "True",
        "Signed",
    )
    .await;
}

fn account(name: &str, identity_secret: Option<&str>) -> serde_json::Value {
    let mut spec = json!({"operatorRef": {"name": "demo"}});
    if let Some(s) = identity_secret {
        spec["keys"] = json!({"identity": {"secretKeyRef": {"name": s}}});
    }
    json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": name, "namespace": NS}, "spec": spec,
    })
}

fn user(name: &str, account: &str, public_key: &str) -> serde_json::Value {
    json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "accountRef": {"kind": "NatsAccount", "name": account},
            "publicKey": public_key,
            "permissions": {"publish": {"allow": ["a.>"]}},
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_conflict_and_seed_lost_refuse_and_never_replace_an_identity() {
    let rig = Rig::start(&[NS]).await;
    // A Secret under the generated name that is not annotated for this object.
    let foreign = NKey::generate(KeyKind::Operator);
    rig.apply(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "demo-operator-identity", "namespace": NS},
        "stringData": {"seed": foreign.seed().expose()},
    }))
    .await;
    rig.apply_story("02-auth-plane", "01-trust-roots.yaml", &[])
        .await;
    let ops = rig.api::<NatsOperator>(NS);
    let refused = wait_ready(&ops, "demo", "False", "SecretConflict").await;
    assert!(message(&refused, "Ready").contains("demo-operator-identity"));
    assert!(refused["status"].get("publicKey").is_none());
    assert!(
        !refused.to_string().contains(foreign.seed().expose()),
        "no seed in status"
    );

    // Removing the foreign Secret lets the controller generate its own.
    rig.api::<Secret>(NS)
        .delete("demo-operator-identity", &DeleteParams::default())
        .await
        .unwrap();
    let signed = wait_ready(&ops, "demo", "True", "Signed").await;
    let pk = str_at(&signed, "/status/publicKey").to_string();
    assert_ne!(pk, foreign.public_key());

    // The generated identity Secret lost while status records the identity: SeedLost, and no
    // new identity is generated.
    rig.api::<Secret>(NS)
        .delete("demo-operator-identity", &DeleteParams::default())
        .await
        .unwrap();
    ops.patch(
        "demo",
        &PatchParams::apply("story-test"),
        &Patch::Merge(json!({"metadata": {"annotations": {"test/nudge": "1"}}})),
    )
    .await
    .unwrap();
    let lost = wait_ready(&ops, "demo", "False", "SeedLost").await;
    assert_eq!(
        str_at(&lost, "/status/publicKey"),
        pk,
        "the recorded identity stays"
    );
    assert!(message(&lost, "Ready").contains(&pk));
    assert!(
        rig.secret(NS, "demo-operator-identity").await.is_none(),
        "no new identity replaces a lost one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_key_in_use_refuses_the_younger_account_the_system_key_and_a_duplicate_user() {
    let rig = Rig::start(&[NS]).await;
    trust_roots(&rig).await;
    let accounts = rig.api::<NatsAccount>(NS);

    // Two accounts adopting one identity seed: the older keeps the key.
    let shared = NKey::generate(KeyKind::Account);
    rig.apply(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "shared-identity", "namespace": NS},
        "stringData": {"seed": shared.seed().expose()},
    }))
    .await;
    rig.apply(account("a-first", Some("shared-identity"))).await;
    wait_ready(&accounts, "a-first", "True", "Signed").await;
    rig.apply(account("b-second", Some("shared-identity")))
        .await;
    let dup = wait_ready(&accounts, "b-second", "False", "PublicKeyInUse").await;
    assert!(message(&dup, "Ready").contains("NatsAccount nats-system/a-first"));
    assert!(dup["status"].get("jwt").is_none(), "not signed");

    // An account claiming the system account's key: refused, naming the system account.
    rig.apply(account("c-sys", Some("system-systemaccount-identity")))
        .await;
    let sys = wait_ready(&accounts, "c-sys", "False", "PublicKeyInUse").await;
    assert!(message(&sys, "Ready").contains("NatsSystemAccount nats-system/system"));
    assert!(sys["status"].get("jwt").is_none());

    // Two users recording one public key in an account: the younger is refused.
    let key = NKey::generate(KeyKind::User).public_key();
    rig.apply(user("u-first", "a-first", &key)).await;
    let users = rig.api::<NatsUser>(NS);
    let first = wait_ready(&users, "u-first", "True", "Signed").await;
    // Without --system-connection a user says nothing is distributed.
    assert!(is(&first, "Distributed", "False", "NoSystemConnection"));
    rig.apply(user("v-second", "a-first", &key)).await;
    let refused = wait_ready(&users, "v-second", "False", "PublicKeyInUse").await;
    assert!(message(&refused, "Ready").contains("NatsUser nats-system/u-first"));
    assert!(refused["status"].get("jwt").is_none());

    // The holder goes: the key is free and the other user is signed.
    users
        .delete("u-first", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &users,
        "v-second",
        "v-second signed once u-first is gone",
        |o| is(o, "Ready", "True", "Signed") && o["status"].get("jwt").is_some(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_account_in_another_namespace_needs_a_grant() {
    let rig = Rig::start(&[NS, "ops"]).await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsSystemAccount",
        "metadata": {"name": "system", "namespace": NS},
        "spec": {"operatorRef": {"name": "demo", "namespace": "ops"}},
    }))
    .await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsOperator",
        "metadata": {"name": "demo", "namespace": "ops"},
        "spec": {"systemAccountRef": {"name": "system", "namespace": NS}},
    }))
    .await;
    let ops = rig.api::<NatsOperator>("ops");
    let refused = wait_ready(&ops, "demo", "False", "ReferenceNotPermitted").await;
    assert!(message(&refused, "Ready").contains(NS));
    wait_ready(
        &rig.api::<NatsSystemAccount>(NS),
        "system",
        "False",
        "ReferenceNotPermitted",
    )
    .await;
    for (ns, from_ns, from_kind, to_kind, to_name) in [
        (NS, "ops", "NatsOperator", "NatsSystemAccount", "system"),
        ("ops", NS, "NatsSystemAccount", "NatsOperator", "demo"),
    ] {
        rig.apply(json!({
            "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsReferenceGrant",
            "metadata": {"name": "system-link", "namespace": ns},
            "spec": {
                "from": [{"group": "auth.nats.mikluko.io", "kind": from_kind, "namespace": from_ns}],
                "to": [{"group": "auth.nats.mikluko.io", "kind": to_kind, "name": to_name}],
            },
        }))
        .await;
    }
    wait_ready(&ops, "demo", "True", "Signed").await;
    wait_ready(
        &rig.api::<NatsSystemAccount>(NS),
        "system",
        "True",
        "Signed",
    )
    .await;
}

/// A NatsUser naming a Secret it does not control (an account's identity Secret, an app's
/// Secret) is refused with SecretConflict; neither Secret is written, and deleting the user
/// deletes neither. A user naming a Secret that does not exist gets it, and takes it with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_never_writes_or_deletes_a_secret_it_does_not_control() {
    let rig = Rig::start(&[NS]).await;
    trust_roots(&rig).await;
    let accounts = rig.api::<NatsAccount>(NS);
    rig.apply(account("orders", None)).await;
    let orders = wait_ready(&accounts, "orders", "True", "Signed").await;
    let orders_pk = str_at(&orders, "/status/publicKey").to_string();
    rig.apply(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "app-config", "namespace": NS},
        "stringData": {"user.creds": "not creds", "other": "kept"},
    }))
    .await;
    let snapshot = async |name: &str| {
        let s = rig
            .secret(NS, name)
            .await
            .unwrap_or_else(|| panic!("Secret {name} exists"));
        (
            s.metadata.resource_version.clone(),
            s.data.clone(),
            s.metadata.owner_references.clone(),
        )
    };
    let identity_before = snapshot("orders-account-identity").await;
    let app_before = snapshot("app-config").await;

    let creds_user = |name: &str, secret: &str, key: Option<&str>| {
        let mut r = json!({"name": secret});
        if let Some(k) = key {
            r["key"] = json!(k);
        }
        json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "accountRef": {"kind": "NatsAccount", "name": "orders"},
                "credentials": {"secretKeyRef": r},
                "permissions": {"publish": {"allow": ["orders.>"]}},
            },
        })
    };
    rig.apply(creds_user(
        "takes-identity",
        "orders-account-identity",
        Some("seed"),
    ))
    .await;
    rig.apply(creds_user("takes-app", "app-config", None)).await;
    rig.apply(creds_user("own", "own-creds", None)).await;
    let users = rig.api::<NatsUser>(NS);
    for (user, secret) in [
        ("takes-identity", "orders-account-identity"),
        ("takes-app", "app-config"),
    ] {
        let refused = wait_ready(&users, user, "False", "SecretConflict").await;
        let m = message(&refused, "Ready");
        assert!(m.contains(&format!("Secret {secret} ")), "{user}: {m}");
        assert!(refused["status"].get("jwt").is_none(), "{user} not signed");
    }
    // The user whose Secret did not exist has it, controlled by the user.
    let own = wait_ready(&users, "own", "True", "Signed").await;
    let own_secret = rig
        .secret(NS, "own-creds")
        .await
        .expect("own-creds created");
    let controller = own_secret
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .find(|o| o.controller == Some(true))
        .expect("own-creds has a controller");
    assert_eq!(
        (controller.kind.as_str(), controller.uid.as_str()),
        ("NatsUser", str_at(&own, "/metadata/uid"))
    );

    // A pass over a changed spec (observedGeneration catches up only once a whole pass has
    // decided) refuses again and writes nothing either.
    for user in ["takes-identity", "takes-app"] {
        users
            .patch(
                user,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"permissions": {"publish": {"allow": ["orders.a.>"]}}}}),
                ),
            )
            .await
            .unwrap();
    }
    for user in ["takes-identity", "takes-app"] {
        wait_for(&users, user, "a refusal at the changed generation", |o| {
            is(o, "Ready", "False", "SecretConflict")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
                && o["metadata"]["generation"] != json!(1)
        })
        .await;
    }
    assert_eq!(snapshot("orders-account-identity").await, identity_before);
    assert_eq!(snapshot("app-config").await, app_before);

    // Deleting the refused users deletes neither Secret; deleting the owner deletes its own.
    for user in ["takes-identity", "takes-app", "own"] {
        users.delete(user, &DeleteParams::default()).await.unwrap();
    }
    for user in ["takes-identity", "takes-app", "own"] {
        wait_gone(&users, user).await;
    }
    assert_eq!(snapshot("orders-account-identity").await, identity_before);
    assert_eq!(snapshot("app-config").await, app_before);
    assert!(
        rig.secret(NS, "own-creds").await.is_none(),
        "own-creds deleted with its user"
    );
    // The account keeps its identity.
    let after = wait_ready(&accounts, "orders", "True", "Signed").await;
    assert_eq!(str_at(&after, "/status/publicKey"), orders_pk);
}

/// Sets the force-delete annotation on `name`.
async fn force_delete<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            nats_api::auth::annotation::FORCE_DELETE: "",
        }}})),
    )
    .await
    .unwrap_or_else(|e| panic!("annotating {name}: {e}"));
}

/// A deletion held by NATS (a system connection to nothing reachable: the revocation is never
/// distributed) or by another object (a NatsOperator refusing, so it never records an account's
/// deletion) says why in Ready and on a DeletionHeld Event, naming force-delete; the annotation
/// releases each finalizer with a ForceDeleted Event, reaching no server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_deletions_say_why_and_force_delete_releases_them() {
    let mut rig = Rig::bare(&[NS]).await;
    // A port nothing listens on: bound, then closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        l.local_addr().expect("its address").port()
    };
    rig.apply(json!({
        "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
        "metadata": {"name": "nowhere", "namespace": NS},
        "spec": {"servers": [format!("nats://127.0.0.1:{port}")]},
    }))
    .await;
    rig.start_controller(Settings {
        resync: Duration::from_secs(2),
        system_connection: Some(SystemConnection {
            namespace: NS.into(),
            name: "nowhere".into(),
        }),
        ..Default::default()
    });
    trust_roots(&rig).await;
    let accounts = rig.api::<NatsAccount>(NS);
    rig.apply(account("orders", None)).await;
    wait_ready(&accounts, "orders", "True", "Signed").await;
    let users = rig.api::<NatsUser>(NS);
    rig.apply(user(
        "app",
        "orders",
        &NKey::generate(KeyKind::User).public_key(),
    ))
    .await;
    wait_ready(&users, "app", "True", "Signed").await;

    // The user: its revocation can reach no server.
    users.delete("app", &DeleteParams::default()).await.unwrap();
    let held = wait_ready(&users, "app", "False", "Distributing").await;
    let m = message(&held, "Ready");
    assert!(m.contains("waiting for every server"), "{m}");
    assert!(m.contains(nats_api::auth::annotation::FORCE_DELETE), "{m}");
    let note = wait_event(&rig, NS, "NatsUser", "app", "DeletionHeld").await;
    assert_eq!(note, m, "the Event says what Ready says");
    force_delete(&users, "app").await;
    wait_gone(&users, "app").await;
    let note = wait_event(&rig, NS, "NatsUser", "app", "ForceDeleted").await;
    assert!(note.contains("released without waiting"), "{note}");

    // The account: its NatsOperator refuses (its identity seed lost), so never records it.
    let ops = rig.api::<NatsOperator>(NS);
    rig.api::<Secret>(NS)
        .delete("demo-operator-identity", &DeleteParams::default())
        .await
        .unwrap();
    ops.patch(
        "demo",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"test/nudge": "1"}}})),
    )
    .await
    .unwrap();
    wait_ready(&ops, "demo", "False", "SeedLost").await;
    accounts
        .delete("orders", &DeleteParams::default())
        .await
        .unwrap();
    let held = wait_for(
        &accounts,
        "orders",
        "orders held for its NatsOperator",
        |o| {
            is(o, "Ready", "False", "Distributing")
                && message(o, "Ready").contains("NatsOperator demo to record the deletion")
        },
    )
    .await;
    let m = message(&held, "Ready");
    assert!(m.contains(nats_api::auth::annotation::FORCE_DELETE), "{m}");
    let note = wait_event(&rig, NS, "NatsAccount", "orders", "DeletionHeld").await;
    assert_eq!(note, m);
    force_delete(&accounts, "orders").await;
    wait_gone(&accounts, "orders").await;
    let note = wait_event(&rig, NS, "NatsAccount", "orders", "ForceDeleted").await;
    assert!(note.contains("CLAIMS.DELETE"), "{note}");
}
