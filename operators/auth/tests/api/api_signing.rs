//! API tier: signing from spec on a real kube-apiserver 1.20 — an offline NATS operator identity
//! (spec.jwt checked, not signed; InvalidJWT when it does not list the signing key), jwtTTL
//! re-signing at half the TTL, the jetstream-stepdown export preset adding the prefixed imports
//! to the system account JWT, and a deleted account recorded in deletedAccounts.

use crate::apirig;

use std::time::Duration;

use apirig::{Rig, str_at, wait_ready};
use nats_api::auth::{NatsAccount, NatsOperator, NatsSystemAccount};
use nats_api::nats::NatsAccountTrust;
use nats_claims::{Account, KeyKind, NKey, OperatorClaims, decode};
use serde_json::json;
use sim::testkit::{message, wait_for};

const NS: &str = "nats-system";

fn seed_secret(name: &str, key: &NKey) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "stringData": {"seed": key.seed().expose()},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_operator_identity_is_checked_not_signed() {
    let rig = Rig::start(&[NS]).await;
    let identity = NKey::generate(KeyKind::Operator);
    let signing = NKey::generate(KeyKind::Operator);
    let sys = NKey::generate(KeyKind::Account);
    rig.apply(seed_secret("op-signing", &signing)).await;
    rig.apply(seed_secret("sys-identity", &sys)).await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsSystemAccount",
        "metadata": {"name": "system", "namespace": NS},
        "spec": {"operatorRef": {"name": "offline"},
                 "keys": {"identity": {"secretKeyRef": {"name": "sys-identity"}}}},
    }))
    .await;
    let sign = |keys: &[String]| {
        let mut c = OperatorClaims::new(identity.public_key())
            .name("offline")
            .system_account(sys.public_key())
            .strict_signing(true);
        for k in keys {
            c = c.signing_key(k.clone());
        }
        c.encode(&identity).unwrap()
    };
    // A JWT that does not list the signing key the controller signs with: InvalidJWT.
    let wrong = sign(&[NKey::generate(KeyKind::Operator).public_key()]);
    let op = |jwt: &str| {
        json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsOperator",
            "metadata": {"name": "offline", "namespace": NS},
            "spec": {"jwt": jwt, "systemAccountRef": {"name": "system"},
                     "keys": {"signing": [{"name": "s1", "secretKeyRef": {"name": "op-signing"}}]}},
        })
    };
    rig.apply(op(&wrong)).await;
    let ops = rig.api::<NatsOperator>(NS);
    let refused = wait_ready(&ops, "offline", "False", "InvalidJWT").await;
    assert!(message(&refused, "Ready").contains(&signing.public_key()));

    let right = sign(&[signing.public_key()]);
    rig.apply(op(&right)).await;
    // Mirrored, not Signed: the NATS operator JWT is published as given (story 14).
    let signed = wait_ready(&ops, "offline", "True", "Mirrored").await;
    assert_eq!(
        str_at(&signed, "/status/jwt"),
        right,
        "an offline JWT is kept as given"
    );
    assert_eq!(str_at(&signed, "/status/publicKey"), identity.public_key());
    assert!(
        signed.pointer("/status/seedSecrets/identity").is_none(),
        "no identity seed here"
    );
    assert!(rig.secret(NS, "offline-operator-identity").await.is_none());
    let sys_jwt = decode::<Account>(str_at(&signed, "/status/systemAccount/jwt")).unwrap();
    assert_eq!(sys_jwt.issuer, signing.public_key());
    wait_ready(
        &rig.api::<NatsSystemAccount>(NS),
        "system",
        "True",
        "Signed",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_ttl_resigns_at_half_stepdown_reaches_the_system_account_and_deletion_is_recorded() {
    let rig = Rig::start(&[NS]).await;
    rig.apply_story("02-auth-plane", "01-trust-roots.yaml", &[])
        .await;
    wait_ready(&rig.api::<NatsOperator>(NS), "demo", "True", "Signed").await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "short", "namespace": NS},
        "spec": {"operatorRef": {"name": "demo"}, "jwtTTL": "1m",
                 "exports": [{"preset": "jetstream-stepdown"}]},
    }))
    .await;
    let accounts = rig.api::<NatsAccount>(NS);
    let first = wait_ready(&accounts, "short", "True", "Signed").await;
    let a = decode::<Account>(str_at(&first, "/status/jwt")).unwrap();
    assert_eq!(a.expires - a.issued_at, 60, "jwtTTL 1m, the floor");
    assert_eq!(
        a.nats.exports.len(),
        2,
        "jetstream-stepdown expands to two service exports"
    );
    let pk = a.subject.clone();

    // Re-signed at half the TTL, so a copy never lapses while the controller runs.
    let again = wait_for(&accounts, "short", "short re-signed", |o| {
        decode::<Account>(str_at(o, "/status/jwt")).is_ok_and(|b| b.issued_at > a.issued_at)
    })
    .await;
    let b = decode::<Account>(str_at(&again, "/status/jwt")).unwrap();
    assert!(b.issued_at - a.issued_at >= 30, "not before half the TTL");
    assert_eq!(b.expires - b.issued_at, 60);
    // The expiry gauge follows the JWT in status (re-signed again within the poll, so it is read
    // until the two agree).
    sim::wait::poll("the expiry gauge follows status.jwt", Duration::from_secs(30), || {
        let accounts = accounts.clone();
        let metrics = rig.metrics.clone();
        async move {
            let o = accounts.get("short").await.map_err(|e| e.to_string())?;
            let jwt = o.status.and_then(|s| s.jwt).unwrap_or_default();
            let exp = decode::<Account>(&jwt)
                .map_err(|e| e.to_string())?
                .expires;
            let line = format!(
                "nats_operator_account_jwt_expiry_timestamp_seconds{{namespace=\"{NS}\",name=\"short\"}} {exp}"
            );
            Ok(metrics.render().lines().any(|l| l == line).then_some(()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // The system account JWT imports the stepdown services under $JS.<key>.API.
    let op = wait_for(
        &rig.api::<NatsOperator>(NS),
        "demo",
        "stepdown imports",
        |o| {
            decode::<Account>(str_at(o, "/status/systemAccount/jwt"))
                .is_ok_and(|s| s.nats.imports.iter().filter(|i| i.account == pk).count() == 2)
        },
    )
    .await;
    let s = decode::<Account>(str_at(&op, "/status/systemAccount/jwt")).unwrap();
    for i in s.nats.imports.iter().filter(|i| i.account == pk) {
        assert!(
            i.local_subject.starts_with(&format!("$JS.{pk}.API.")),
            "{i:?}"
        );
    }
    assert_eq!(s.expires, 0);

    // NatsAccountTrust by reference mirrors the key and JWT.
    rig.apply(json!({
        "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsAccountTrust",
        "metadata": {"name": "short", "namespace": NS},
        "spec": {"accountRef": {"name": "short"}},
    }))
    .await;
    rig.apply(json!({
        "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsAccountTrust",
        "metadata": {"name": "literal", "namespace": NS},
        "spec": {"publicKey": pk},
    }))
    .await;
    let trusts = rig.api::<NatsAccountTrust>(NS);
    let t = wait_ready(&trusts, "short", "True", "Mirrored").await;
    assert_eq!(str_at(&t, "/status/publicKey"), pk);
    assert!(decode::<Account>(str_at(&t, "/status/jwt")).is_ok_and(|j| j.subject == pk));
    // The literal form is checked and copied alike (a key alone: nothing to check against).
    let literal = wait_ready(&trusts, "literal", "True", "Literal").await;
    assert_eq!(str_at(&literal, "/status/publicKey"), pk);
    assert!(literal.pointer("/status/jwt").is_none());

    // A signed account deleted: recorded in deletedAccounts, then the object goes.
    accounts.delete("short", &Default::default()).await.unwrap();
    let op = wait_for(
        &rig.api::<NatsOperator>(NS),
        "demo",
        "deletion recorded",
        |o| {
            o.pointer("/status/deletedAccounts")
                .and_then(|d| d.as_array())
                .is_some_and(|d| d.iter().any(|x| x["publicKey"] == pk.as_str()))
        },
    )
    .await;
    assert!(
        op["status"]["deletedAccounts"]
            .to_string()
            .contains("expires")
    );
    sim::wait::poll("short gone", Duration::from_secs(30), || async {
        match accounts.get_opt("short").await {
            Ok(None) => Ok(Some(())),
            Ok(Some(_)) => Err("still there".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_an_account_signing_key_resigns_its_users_before_the_retiring_key_goes() {
    let rig = Rig::start(&[NS]).await;
    rig.apply_story("02-auth-plane", "01-trust-roots.yaml", &[])
        .await;
    wait_ready(&rig.api::<NatsOperator>(NS), "demo", "True", "Signed").await;
    let s1 = NKey::generate(KeyKind::Account);
    let s2 = NKey::generate(KeyKind::Account);
    rig.apply(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "rot-keys", "namespace": NS},
        "stringData": {"s1": s1.seed().expose(), "s2": s2.seed().expose()},
    }))
    .await;
    let account = |signing: serde_json::Value| {
        json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
            "metadata": {"name": "rot", "namespace": NS},
            "spec": {"operatorRef": {"name": "demo"}, "keys": {"signing": signing}},
        })
    };
    let key = |name: &str, retiring: bool| {
        json!({"name": name, "retiring": retiring,
               "secretKeyRef": {"name": "rot-keys", "key": name}})
    };
    rig.apply(account(json!([key("s1", false)]))).await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
        "metadata": {"name": "rot-app", "namespace": NS},
        "spec": {"accountRef": {"kind": "NatsAccount", "name": "rot"},
                 "credentials": {"secretKeyRef": {"name": "rot-app-creds"}}},
    }))
    .await;
    let users = rig.api::<nats_api::auth::NatsUser>(NS);
    wait_ready(&users, "rot-app", "True", "Signed").await;
    let issuer = async || {
        let s = rig.secret(NS, "rot-app-creds").await?;
        let text = String::from_utf8_lossy(&s.data?["user.creds"].0).into_owned();
        let c = nats_claims::Creds::parse(&text).ok()?;
        Some(decode::<nats_claims::User>(&c.jwt).ok()?.issuer)
    };
    assert_eq!(issuer().await, Some(s1.public_key()));

    // s2 added, s1 retiring: the user is re-signed by s2; both stay listed meanwhile.
    rig.apply(account(json!([key("s1", true), key("s2", false)])))
        .await;
    sim::wait::poll(
        "rot-app re-signed by s2",
        Duration::from_secs(30),
        || async {
            match issuer().await {
                Some(i) if i == s2.public_key() => Ok(Some(())),
                other => Err(format!("issuer {other:?}")),
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let accounts = rig.api::<NatsAccount>(NS);
    let both = wait_for(&accounts, "rot", "no retiring key in use", |o| {
        sim::testkit::is(o, "Ready", "True", "Signed")
            && sim::testkit::condition(o, "RetiringKeysInUse").is_none()
            && decode::<Account>(str_at(o, "/status/jwt")).is_ok_and(|a| {
                a.nats.signing_keys.contains(&s1.public_key())
                    && a.nats.signing_keys.contains(&s2.public_key())
            })
    })
    .await;
    assert_eq!(str_at(&both, "/status/publicKey").len(), 56);

    // s1 removed: the account JWT lists s2 alone.
    rig.apply(account(json!([key("s2", false)]))).await;
    wait_for(&accounts, "rot", "s1 gone from the JWT", |o| {
        decode::<Account>(str_at(o, "/status/jwt")).is_ok_and(|a| {
            !a.nats.signing_keys.contains(&s1.public_key())
                && a.nats.signing_keys.contains(&s2.public_key())
        })
    })
    .await;
    wait_ready(&users, "rot-app", "True", "Signed").await;
}
