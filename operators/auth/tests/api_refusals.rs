//! API tier: every refusal reason the auth controller writes, provoked once on a real
//! kube-apiserver 1.20 — SecretConflict, SeedLost, PublicKeyInUse (account, the system account's
//! key, user), NoSystemConnection — and never a seed in status.

mod apirig;

use apirig::{Rig, is, message, str_at, wait_for, wait_ready};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};
use nats_api::auth::{NatsAccount, NatsOperator, NatsSystemAccount, NatsUser};
use nats_claims::{KeyKind, NKey};
use serde_json::json;

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
