//! Rotating the NATS operator's signing key (§5.1 Rotation), live: a second key added to the
//! NatsOperator is listed in the NATS operator JWT the NatsOperatorTrust mirrors, and the three
//! real servers are restarted one at a time onto it (the trusted operators are restart-only,
//! reload.go:1619) while every account stays signed by the first key. Marking the first key
//! retiring re-signs every account, the NatsAccount and the system account, with the new key, and
//! every server holds those JWTs. Removing it drops it from the NATS operator JWT; once the
//! servers are restarted onto that JWT they accept only the new chain: the controller's user
//! still connects, while an account signed by the retired key, whether usable before the removal
//! or pushed after it, is refused on every server, and one signed by the new key works. The
//! servers store whatever a CLAIMS.UPDATE carries (DirAccResolver.Start checks no issuer); the
//! chain is judged when an account is used (Server.verifyAccountClaims), so refusal is proven by
//! connecting.

use std::time::{Duration, Instant};

use async_nats::ConnectOptions;
use nats_api::auth::{NatsAccount, NatsOperator, NatsSystemAccount, NatsUser};
use nats_api::nats::NatsOperatorTrust;
use nats_claims::{Account, AccountClaims, Creds, KeyKind, NKey, Operator, UserClaims};
use nats_wire::{Collect, Wire};
use serde_json::{Value, json};
use sim::testkit::{WAIT, condition, is, wait_for};
use sim::{OperatorMode, Topology};

use super::apirig::{Rig, str_at, wait_ready};
use super::common::{connect, now_secs};
use super::{SYS, creds_text, plane, round_trip};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_operator_signing_key_resigns_every_account_and_the_servers_trust_only_the_new_chain()
 {
    let (rig, mut topo) = plane(&[]).await;
    let operators = rig.api::<NatsOperator>(SYS);
    let trusts = rig.api::<NatsOperatorTrust>(SYS);
    let accounts = rig.api::<NatsAccount>(SYS);
    let systems = rig.api::<NatsSystemAccount>(SYS);

    // An account and its user, signed under the first key and usable.
    rig.apply_story("02-auth-plane", "04-orders.yaml", &["NatsUser"])
        .await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
        "metadata": {"name": "orders-app", "namespace": SYS},
        "spec": {
            "accountRef": {"kind": "NatsAccount", "name": "orders"},
            "permissions": {
                "publish": {"allow": ["orders.>"]},
                "subscribe": {"allow": ["orders.>", "_INBOX.>"]},
            },
            "credentials": {"secretKeyRef": {"name": "orders-app-creds"}},
        },
    }))
    .await;
    let orders = wait_for(&accounts, "orders", "orders 3 of 3", |o| {
        is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
    let orders_pk = str_at(&orders, "/status/publicKey").to_string();
    wait_ready(&rig.api::<NatsUser>(SYS), "orders-app", "True", "Signed").await;
    let app = creds_text(&rig, SYS, "orders-app-creds").await.unwrap();
    on_every_server(&topo, "orders-app, before the rotation", &app, true).await;

    let op = serde_json::to_value(operators.get("demo").await.unwrap()).unwrap();
    let old_secret = str_at(&op, "/status/seedSecrets/signing/0").to_string();
    assert_eq!(old_secret, "demo-operator-signing-1");
    let old = seed_of(&rig, &old_secret).await;
    let new = NKey::generate(KeyKind::Operator);
    let (old_pk, new_pk) = (old.public_key(), new.public_key());
    let sys_pk = str_at(&op, "/status/systemAccount/publicKey").to_string();
    assert_eq!(issuer(str_at(&orders, "/status/jwt")), old_pk);

    // 1. A second key added after the first: the NATS operator JWT lists both, the first still signs.
    let added_at = Instant::now();
    rig.apply(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "demo-operator-signing-2", "namespace": SYS},
        "stringData": {"seed": new.seed().expose()},
    }))
    .await;
    rig.apply(operator_with(json!([
        key("signing-1", &old_secret, false),
        key("signing-2", "demo-operator-signing-2", false),
    ])))
    .await;
    let both = mirrored(&trusts, "listing both keys", &[&old_pk, &new_pk]).await;
    roll(&mut topo, &both, &sys_pk).await;
    let orders = accounts.get("orders").await.unwrap();
    assert_eq!(
        issuer(orders.status.as_ref().unwrap().jwt.as_deref().unwrap()),
        old_pk,
        "adding a key re-signs nothing: the first key not retiring signs"
    );
    println!(
        "key added -> operator JWT lists both -> 3 servers restarted onto it: {} ms",
        added_at.elapsed().as_millis()
    );

    // 2. The first key retiring: every account re-signed by the new key, held by every server.
    let retired_at = Instant::now();
    rig.apply(operator_with(json!([
        key("signing-1", &old_secret, true),
        key("signing-2", "demo-operator-signing-2", false),
    ])))
    .await;
    let orders = wait_for(
        &accounts,
        "orders",
        "orders re-signed by the new key, 3 of 3",
        |o| {
            issued_by(o, "/status/jwt", &new_pk)
                && is(o, "Distributed", "True", "AllServersCurrent")
        },
    )
    .await;
    let op = wait_for(
        &operators,
        "demo",
        "system account re-signed by the new key",
        |o| {
            is(o, "Ready", "True", "Signed")
                && issued_by(o, "/status/systemAccount/jwt", &new_pk)
                && condition(o, "RetiringKeysInUse").is_none()
        },
    )
    .await;
    wait_for(&systems, "system", "system account 3 of 3", |o| {
        is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
    let wire = system_wire(&rig, &topo).await;
    held_by_all(&wire, &orders_pk, str_at(&orders, "/status/jwt")).await;
    held_by_all(&wire, &sys_pk, str_at(&op, "/status/systemAccount/jwt")).await;
    println!(
        "first key retiring -> orders and the system account re-signed by the new key on 3 of 3: {} ms",
        retired_at.elapsed().as_millis()
    );
    on_every_server(&topo, "orders-app, re-signed account", &app, true).await;
    // Signed by the retiring key and usable while the servers trust it.
    let (stale_jwt, stale) = foreign_account("stale", &old);
    push(&wire, &stale_jwt).await;
    on_every_server(
        &topo,
        "an account of the retiring key, still trusted",
        &stale,
        true,
    )
    .await;

    // 3. The first key removed: the NATS operator JWT lists the new key alone; servers restarted.
    rig.apply(operator_with(json!([key(
        "signing-2",
        "demo-operator-signing-2",
        false
    )])))
    .await;
    let only_new = mirrored(&trusts, "listing the new key alone", &[&new_pk]).await;
    roll(&mut topo, &only_new, &sys_pk).await;
    let trust = trusts.get("demo").await.unwrap();
    let trust_sys = trust.status.unwrap().system_account_jwt.unwrap();
    assert_eq!(
        issuer(&trust_sys),
        new_pk,
        "the mirrored system account JWT"
    );

    // Only the new chain: the controller's accounts serve, the retired key's are refused.
    let wire = system_wire(&rig, &topo).await;
    wait_for(
        &accounts,
        "orders",
        "orders 3 of 3 after the restarts",
        |o| {
            issued_by(o, "/status/jwt", &new_pk)
                && is(o, "Distributed", "True", "AllServersCurrent")
        },
    )
    .await;
    held_by_all(&wire, &sys_pk, &trust_sys).await;
    on_every_server(&topo, "orders-app, after the old key is gone", &app, true).await;
    on_every_server(&topo, "an account the removed key signed", &stale, false).await;
    let (late_jwt, late) = foreign_account("late", &old);
    let replies = push(&wire, &late_jwt).await;
    println!("CLAIMS.UPDATE of an account signed by the removed key: {replies:?}");
    on_every_server(
        &topo,
        "an account pushed signed by the removed key",
        &late,
        false,
    )
    .await;
    let (fresh_jwt, fresh) = foreign_account("fresh", &new);
    push(&wire, &fresh_jwt).await;
    on_every_server(
        &topo,
        "an account pushed signed by the new key",
        &fresh,
        true,
    )
    .await;
    println!(
        "key added -> retiring -> removed, 2 rolling restarts of 3 servers: {} ms",
        added_at.elapsed().as_millis()
    );
}

/// Story 02's NatsOperator with `signing` as its keys.signing (the identity stays generated).
fn operator_with(signing: Value) -> Value {
    let mut doc = sim::testkit::story_docs("docs/stories/02-auth-plane/01-trust-roots.yaml")
        .into_iter()
        .find(|d| d["kind"] == "NatsOperator")
        .unwrap();
    doc["spec"]["keys"] = json!({"signing": signing});
    doc
}

/// One entry of keys.signing.
fn key(name: &str, secret: &str, retiring: bool) -> Value {
    json!({"name": name, "retiring": retiring, "secretKeyRef": {"name": secret}})
}

/// The operator seed under `seed` of Secret `name`.
async fn seed_of(rig: &Rig, name: &str) -> NKey {
    let s = rig.secret(SYS, name).await.unwrap();
    NKey::from_seed(&s.data.unwrap()["seed"].0).unwrap()
}

/// The issuer of a JWT.
fn issuer(jwt: &str) -> String {
    nats_claims::decode::<Account>(jwt).unwrap().issuer
}

/// Whether the account JWT at `pointer` of `obj` is issued by `key`.
fn issued_by(obj: &Value, pointer: &str, key: &str) -> bool {
    nats_claims::decode::<Account>(str_at(obj, pointer)).is_ok_and(|c| c.issuer == key)
}

/// Waits for the NatsOperatorTrust to mirror a NATS operator JWT listing exactly `keys`;
/// returns its status.
async fn mirrored(trusts: &kube::Api<NatsOperatorTrust>, what: &str, keys: &[&str]) -> Value {
    wait_for(trusts, "demo", &format!("operator JWT {what}"), |o| {
        is(o, "Ready", "True", "Mirrored")
            && nats_claims::decode::<Operator>(str_at(o, "/status/operatorJWT"))
                .is_ok_and(|c| c.nats.signing_keys == keys)
    })
    .await
}

/// Restarts every server, one at a time, onto the operator and system account JWTs `trust`
/// mirrors, waiting for the cluster to be whole again after each; every server then reports
/// that operator JWT as the one it trusts.
async fn roll(topo: &mut Topology, trust: &Value, sys_pk: &str) {
    let operator_jwt = str_at(trust, "/status/operatorJWT").to_string();
    topo.set_operator(OperatorMode {
        operator_jwt: operator_jwt.clone(),
        system_account: sys_pk.to_string(),
        preload: vec![(
            sys_pk.to_string(),
            str_at(trust, "/status/systemAccountJWT").to_string(),
        )],
    })
    .expect("operator mode");
    for name in topo.server_names() {
        let server = topo.server_mut(&name).unwrap();
        server.sigterm(Duration::from_secs(10)).await.unwrap();
        server.start().await.unwrap();
        topo.wait_ready(WAIT)
            .await
            .unwrap_or_else(|e| panic!("{name} back in the cluster: {e}"));
        let varz = topo.monitor(&name, "/varz").await.unwrap();
        assert_eq!(
            varz["trusted_operators_jwt"],
            json!([operator_jwt]),
            "{name} trusts the new operator JWT"
        );
    }
}

/// A system connection as the auth-controller user, to push and look up as the controller does.
async fn system_wire(rig: &Rig, topo: &Topology) -> Wire {
    let sys = creds_text(rig, SYS, "auth-controller-creds").await.unwrap();
    let (client, _) = connect(topo, &sys, Some("auth-controller")).await;
    Wire::new(client.expect("auth-controller user connects"))
}

/// Waits until each of the 3 servers holds `jwt` for `account`.
async fn held_by_all(wire: &Wire, account: &str, jwt: &str) {
    sim::wait::poll(&format!("3 servers hold {account}"), WAIT, || async {
        let answers = wire
            .claims_lookup(account, Collect::expecting(3, Duration::from_secs(2)))
            .await
            .map_err(|e| e.to_string())?;
        let holding = answers.iter().filter(|a| a.jwt() == Some(jwt)).count();
        if answers.len() == 3 && holding == 3 {
            Ok(Some(()))
        } else {
            Err(format!("{holding} of {} answers hold it", answers.len()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Pushes an account JWT with CLAIMS.UPDATE to the 3 servers; their replies.
async fn push(wire: &Wire, jwt: &str) -> Vec<String> {
    let pushed = wire
        .claims_update(jwt, Collect::expecting(3, Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(
        pushed.answered(),
        3,
        "3 servers answer the push: {pushed:?}"
    );
    pushed
        .replies
        .iter()
        .map(|r| r.data.message.clone())
        .chain(pushed.failures.iter().map(|f| format!("{f:?}")))
        .collect()
}

/// An account made outside the controller, signed by `operator_key`, with one user signed by its
/// own signing key: the account JWT and the user's creds.
fn foreign_account(name: &str, operator_key: &NKey) -> (String, String) {
    let identity = NKey::generate(KeyKind::Account);
    let signing = NKey::generate(KeyKind::Account);
    let jwt = AccountClaims::new(identity.public_key())
        .name(name)
        .signing_key(signing.public_key())
        .encode_issued_at(operator_key, now_secs())
        .unwrap();
    let user = NKey::generate(KeyKind::User);
    let user_jwt = UserClaims::new(user.public_key())
        .name(format!("{name}-user"))
        .issuer_account(identity.public_key())
        .encode(&signing)
        .unwrap();
    let creds = Creds::render_key(&user_jwt, &user).unwrap();
    (jwt, creds.expose().to_string())
}

/// Connects with `creds` to each server on its own and asserts each admits (`admitted`) or
/// refuses it; admission is polled (a push reaches a server a moment after its reply), refusal
/// asked once per server.
async fn on_every_server(topo: &Topology, what: &str, creds: &str, admitted: bool) {
    for s in topo.servers() {
        let url = s.client_url();
        if admitted {
            sim::wait::poll(&format!("{what}: {} admits", s.name()), WAIT, || async {
                connects_to(&url, creds).await.map(Some)
            })
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        } else {
            let got = connects_to(&url, creds).await;
            let refused = got.as_ref().is_err_and(|e| e.contains("authorization"));
            assert!(refused, "{what}: {} answered {got:?}", s.name());
        }
    }
    if admitted {
        round_trip(topo, creds, "orders.ping")
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// Connects to the one server at `url` with `creds` and flushes.
async fn connects_to(url: &str, creds: &str) -> Result<(), String> {
    let client = ConnectOptions::with_credentials(creds)
        .map_err(|e| e.to_string())?
        .connection_timeout(Duration::from_secs(3))
        .connect(url)
        .await
        .map_err(|e| e.to_string())?;
    client.flush().await.map_err(|e| e.to_string())
}
