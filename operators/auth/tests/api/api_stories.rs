//! API tier: story 02's auth plane, story 04's team self-service and story 05's account wiring
//! applied to a real kube-apiserver 1.20 reconcile to the Secrets and status the stories show,
//! with every JWT decoded and checked with nats-claims; withdrawing a grant revokes the account.
//!
//! Needs `scripts/install-apiserver.sh` to have run; without the binaries the tests fail saying so.

use crate::apirig;

use apirig::{Rig, str_at, wait_ready};
use auth_controller::presets;
use k8s_openapi::api::core::v1::Secret;
use kube::api::DeleteParams;
use nats_api::auth::{
    GENERATED_FOR_ANNOTATION, NatsAccount, NatsOperator, NatsSystemAccount, NatsUser, UserPreset,
};
use nats_api::nats::{NatsOperatorTrust, NatsReferenceGrant};
use nats_claims::{Account, Creds, KeyKind, NKey, Operator, User, decode};
use serde_json::Value;
use sim::testkit::{is, message, wait_for};

const SYS: &str = "nats-system";

fn seed_of(s: &Secret, key: &str) -> NKey {
    let bytes = &s.data.as_ref().expect("data")[key].0;
    NKey::from_seed(String::from_utf8_lossy(bytes).trim().as_bytes()).expect("a seed")
}

/// A generated key Secret: annotated for its object, no owner reference, a `seed`.
async fn generated(rig: &Rig, ns: &str, name: &str, annotation: &str) -> NKey {
    let s = rig
        .secret(ns, name)
        .await
        .unwrap_or_else(|| panic!("Secret {ns}/{name} generated"));
    assert_eq!(
        s.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(GENERATED_FOR_ANNOTATION))
            .map(String::as_str),
        Some(annotation),
        "{name} annotated"
    );
    assert!(
        s.metadata
            .owner_references
            .as_ref()
            .is_none_or(|o| o.is_empty()),
        "{name} has no owner reference, so it outlives its object"
    );
    seed_of(&s, "seed")
}

/// The creds Secret of a user, parsed; its JWT decoded.
async fn creds(rig: &Rig, ns: &str, secret: &str) -> (Creds, nats_claims::UserClaims) {
    let s = rig
        .secret(ns, secret)
        .await
        .unwrap_or_else(|| panic!("creds Secret {ns}/{secret} written"));
    let text =
        String::from_utf8_lossy(&s.data.as_ref().expect("data")["user.creds"].0).into_owned();
    let c = Creds::parse(&text).expect("a valid creds file");
    let claims = decode::<User>(&c.jwt).expect("a user JWT");
    (c, claims)
}

async fn ready_user(rig: &Rig, ns: &str, name: &str) -> Value {
    wait_ready(&rig.api::<NatsUser>(ns), name, "True", "Signed").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_02_auth_plane_reconciles_to_ready_with_its_secrets_and_signed_jwts() {
    let rig = Rig::start(&[SYS]).await;
    rig.apply_story("02-auth-plane", "01-trust-roots.yaml", &[])
        .await;
    rig.apply_story("02-auth-plane", "02-system-users.yaml", &[])
        .await;
    rig.apply_story("02-auth-plane", "04-orders.yaml", &[])
        .await;

    // NatsOperator demo: generated keys, the operator JWT and the system account JWT.
    let op = wait_ready(&rig.api::<NatsOperator>(SYS), "demo", "True", "Signed").await;
    assert!(is(&op, "ReferencesResolved", "True", "ReferencesResolved"));
    let op_id = generated(&rig, SYS, "demo-operator-identity", "operator/demo").await;
    let op_sk = generated(&rig, SYS, "demo-operator-signing-1", "operator/demo").await;
    assert_eq!(op_id.kind(), KeyKind::Operator);
    assert_eq!(str_at(&op, "/status/publicKey"), op_id.public_key());
    assert_eq!(
        op["status"]["signingKeys"],
        serde_json::json!([op_sk.public_key()])
    );
    assert_eq!(
        op["status"]["seedSecrets"],
        serde_json::json!({"identity": "demo-operator-identity", "signing": ["demo-operator-signing-1"]})
    );
    let op_claims = decode::<Operator>(str_at(&op, "/status/jwt")).expect("an operator JWT");
    assert_eq!(op_claims.subject, op_id.public_key());
    assert_eq!(op_claims.issuer, op_id.public_key());
    assert_eq!(op_claims.nats.signing_keys, vec![op_sk.public_key()]);
    assert!(op_claims.nats.strict_signing);
    let sys_id = generated(
        &rig,
        SYS,
        "system-systemaccount-identity",
        "systemaccount/system",
    )
    .await;
    let sys_sk = generated(
        &rig,
        SYS,
        "system-systemaccount-signing-1",
        "systemaccount/system",
    )
    .await;
    assert_eq!(op_claims.nats.system_account, sys_id.public_key());
    assert_eq!(str_at(&op, "/status/systemAccount/name"), "system");
    assert_eq!(
        str_at(&op, "/status/systemAccount/publicKey"),
        sys_id.public_key()
    );
    let sys_jwt = str_at(&op, "/status/systemAccount/jwt").to_string();
    let sys_claims = decode::<Account>(&sys_jwt).expect("a system account JWT");
    assert_eq!(sys_claims.subject, sys_id.public_key());
    assert_eq!(
        sys_claims.issuer,
        op_sk.public_key(),
        "signed by the operator signing key"
    );
    assert_eq!(sys_claims.expires, 0, "a system account JWT never expires");
    assert!(sys_claims.nats.signing_keys.contains(&sys_sk.public_key()));
    for seed in [&op_id, &op_sk, &sys_id, &sys_sk] {
        assert!(
            !op["status"].to_string().contains(seed.seed().expose()),
            "no seed in status"
        );
    }

    // NatsSystemAccount: Signed, its hash, and without --system-connection nothing pushed.
    let sys = wait_ready(
        &rig.api::<NatsSystemAccount>(SYS),
        "system",
        "True",
        "Signed",
    )
    .await;
    assert_eq!(str_at(&sys, "/status/publicKey"), sys_id.public_key());
    assert_eq!(str_at(&sys, "/status/jwtHash").len(), 64);
    assert!(is(&sys, "Distributed", "False", "NoSystemConnection"));

    // NatsOperatorTrust by reference mirrors both JWTs.
    let trust = wait_ready(
        &rig.api::<NatsOperatorTrust>(SYS),
        "demo",
        "True",
        "Mirrored",
    )
    .await;
    assert_eq!(
        str_at(&trust, "/status/operatorJWT"),
        str_at(&op, "/status/jwt")
    );
    assert_eq!(str_at(&trust, "/status/systemAccountJWT"), sys_jwt);

    // The system users: creds Secrets with exactly their preset's permissions.
    for (user, secret, preset) in [
        (
            "cluster-controller",
            "cluster-controller-creds",
            UserPreset::ClusterController,
        ),
        (
            "jetstream-controller",
            "jetstream-controller-creds",
            UserPreset::JetStreamController,
        ),
        (
            "auth-controller",
            "auth-controller-creds",
            UserPreset::AuthController,
        ),
    ] {
        let u = ready_user(&rig, SYS, user).await;
        assert!(message(&u, "Ready").contains(secret));
        let (c, claims) = creds(&rig, SYS, secret).await;
        assert_eq!(claims.subject, str_at(&u, "/status/publicKey"));
        assert_eq!(c.key().unwrap().public_key(), claims.subject);
        assert_eq!(claims.issuer, sys_sk.public_key());
        assert_eq!(claims.nats.issuer_account, sys_id.public_key());
        assert_eq!(
            claims.nats.permission_limits.permissions,
            presets::permissions(preset)
        );
        assert!(
            u["status"].get("jwt").is_none(),
            "a creds user's JWT is not in status"
        );
    }

    // NatsAccount orders: its limits, 48 h expiry, signed by the operator signing key.
    let orders = wait_ready(&rig.api::<NatsAccount>(SYS), "orders", "True", "Signed").await;
    let acct_id = generated(&rig, SYS, "orders-account-identity", "account/orders").await;
    let acct_sk = generated(&rig, SYS, "orders-account-signing-1", "account/orders").await;
    assert_eq!(str_at(&orders, "/status/publicKey"), acct_id.public_key());
    let jwt = str_at(&orders, "/status/jwt");
    assert_eq!(str_at(&orders, "/status/jwtHash"), sha256_hex(jwt));
    let a = decode::<Account>(jwt).expect("an account JWT");
    assert_eq!(a.subject, acct_id.public_key());
    assert_eq!(a.issuer, op_sk.public_key());
    assert_eq!(a.expires - a.issued_at, 48 * 3600);
    assert_eq!(a.nats.limits.account.conn, 200);
    assert_eq!(a.nats.limits.nats.subs, 10000);
    assert_eq!(a.nats.limits.nats.payload, 1_048_576);
    assert_eq!(a.nats.limits.jetstream.disk_storage, 53_687_091_200);
    assert_eq!(a.nats.limits.jetstream.memory_storage, 1_073_741_824);
    assert_eq!(a.nats.limits.jetstream.streams, 20);
    assert_eq!(a.nats.limits.jetstream.consumer, 200);
    assert!(a.nats.signing_keys.contains(&acct_sk.public_key()));
    assert!(is(&orders, "Distributed", "False", "NoSystemConnection"));

    let app = ready_user(&rig, SYS, "orders-app").await;
    let (_, app_claims) = creds(&rig, SYS, "orders-app-creds").await;
    assert_eq!(app_claims.subject, str_at(&app, "/status/publicKey"));
    assert_eq!(app_claims.issuer, acct_sk.public_key());
    assert_eq!(app_claims.nats.issuer_account, acct_id.public_key());
    assert_eq!(
        app_claims.nats.permission_limits.permissions.publish.allow,
        vec!["orders.>", "$JS.API.>", "$JS.ACK.ORDERS.>"]
    );
    ready_user(&rig, SYS, "orders-reader").await;
    let (_, reader) = creds(&rig, SYS, "orders-reader-creds").await;
    assert_eq!(
        reader.nats.permission_limits.permissions,
        presets::permissions(UserPreset::Readonly)
    );

    // A second pass signs nothing new: the JWTs stay as they are.
    let before = str_at(&orders, "/status/jwt").to_string();
    // Passes after this moment: two for every NatsAccount there is (each resyncs every 2 s).
    let accounts = rig
        .api::<NatsAccount>(SYS)
        .list(&Default::default())
        .await
        .expect("NatsAccount list")
        .items
        .len() as u64;
    let passes = rig.metrics.reconciles("NatsAccount");
    sim::wait::poll(
        "two more passes of every NatsAccount",
        sim::testkit::WAIT,
        || async {
            let now = rig.metrics.reconciles("NatsAccount");
            if now >= passes + 2 * accounts {
                Ok(Some(()))
            } else {
                Err(format!("{} passes since", now - passes))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let again = wait_ready(&rig.api::<NatsAccount>(SYS), "orders", "True", "Signed").await;
    assert_eq!(
        str_at(&again, "/status/jwt"),
        before,
        "an unchanged account keeps its JWT"
    );

    // 06: adopted signing keys (one scoped), a role user, a publicKey-only user.
    rig.apply_story("02-auth-plane", "06-scoped-and-external-users.yaml", &[])
        .await;
    let users_sk = seed_of(
        &rig.secret(SYS, "orders-signing-keys").await.unwrap(),
        "users.nk",
    );
    let batch_sk = seed_of(
        &rig.secret(SYS, "orders-signing-keys").await.unwrap(),
        "batch.nk",
    );
    let orders = wait_for(
        &rig.api::<NatsAccount>(SYS),
        "orders",
        "orders re-signed",
        |o| {
            is(o, "Ready", "True", "Signed")
                && decode::<Account>(str_at(o, "/status/jwt"))
                    .is_ok_and(|a| a.nats.signing_keys.contains(&batch_sk.public_key()))
        },
    )
    .await;
    let a = decode::<Account>(str_at(&orders, "/status/jwt")).unwrap();
    assert_eq!(a.subject, acct_id.public_key(), "the identity is kept");
    assert!(a.nats.signing_keys.contains(&users_sk.public_key()));
    assert_eq!(
        a.nats
            .signing_keys
            .scope(&batch_sk.public_key())
            .map(|s| s.role.as_str()),
        Some("batch")
    );
    ready_user(&rig, SYS, "orders-batch").await;
    let (_, batch) = creds(&rig, SYS, "orders-batch-creds").await;
    assert_eq!(
        batch.issuer,
        batch_sk.public_key(),
        "a role user is signed by its scoped key"
    );
    let device = ready_user(&rig, SYS, "orders-device-7").await;
    let device_jwt = decode::<User>(str_at(&device, "/status/jwt")).expect("a user JWT in status");
    assert_eq!(
        device_jwt.subject,
        "UBA3MSCPARNERZM6QLT7BT5ONADNP5GZRP25ANNE5UO3RMPNAI62YQUU"
    );
    assert_eq!(device_jwt.issuer, users_sk.public_key());
    // orders-app is re-signed by the adopted plain signing key.
    wait_for(
        &rig.api::<NatsUser>(SYS),
        "orders-app",
        "orders-app re-signed",
        |_| true,
    )
    .await;
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(s.as_bytes()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_04_team_account_is_refused_until_granted_and_revoked_when_the_grant_goes() {
    let rig = Rig::start(&[SYS, "team-payments", "team-analytics"]).await;
    rig.apply_story("02-auth-plane", "01-trust-roots.yaml", &[])
        .await;
    wait_ready(&rig.api::<NatsOperator>(SYS), "demo", "True", "Signed").await;

    // Without the platform grant: ReferenceNotPermitted before any key is recorded.
    rig.apply_story(
        "04-team-self-service",
        "01-team-payments.yaml",
        &["NatsStream"],
    )
    .await;
    let accounts = rig.api::<NatsAccount>("team-payments");
    let refused = wait_ready(&accounts, "payments", "False", "ReferenceNotPermitted").await;
    assert!(is(
        &refused,
        "ReferencesResolved",
        "False",
        "ReferenceNotPermitted"
    ));
    assert!(
        refused["status"].get("publicKey").is_none(),
        "no key recorded"
    );
    assert!(
        rig.secret("team-payments", "payments-account-identity")
            .await
            .is_none()
    );
    let user = wait_ready(
        &rig.api::<NatsUser>("team-payments"),
        "payments-app",
        "False",
        "AccountNotAdmitted",
    )
    .await;
    assert!(message(&user, "Ready").contains("not admitted"));
    assert!(
        rig.secret("team-payments", "payments-app-creds")
            .await
            .is_none()
    );

    // The grant admits it: signed, and its user too.
    rig.apply_story("04-team-self-service", "02-platform-grant.yaml", &[])
        .await;
    let payments = wait_ready(&accounts, "payments", "True", "Signed").await;
    assert!(message(&payments, "ReferencesResolved").contains("team-payments-accounts"));
    let a = decode::<Account>(str_at(&payments, "/status/jwt")).unwrap();
    assert_eq!(a.nats.limits.account.conn, 100);
    assert_eq!(a.nats.limits.jetstream.disk_storage, 21_474_836_480);
    ready_user(&rig, "team-payments", "payments-app").await;

    // A user in another namespace: refused without the account's grant, signed with it.
    let reader_doc =
        sim::testkit::story_docs("docs/stories/04-team-self-service/03-analytics.yaml")
            .into_iter()
            .find(|d| d["kind"] == "NatsUser")
            .unwrap();
    rig.apply(reader_doc).await;
    wait_ready(
        &rig.api::<NatsUser>("team-analytics"),
        "payments-reader",
        "False",
        "AccountNotAdmitted",
    )
    .await;
    rig.apply_story("04-team-self-service", "03-analytics.yaml", &[])
        .await;
    ready_user(&rig, "team-analytics", "payments-reader").await;
    let (_, reader) = creds(&rig, "team-analytics", "payments-reader-creds").await;
    assert_eq!(reader.nats.issuer_account, a.subject);

    // Withdrawing the grant revokes: the NatsOperator records the deletion, the JWT is emptied.
    rig.api::<NatsReferenceGrant>(SYS)
        .delete("team-payments-accounts", &DeleteParams::default())
        .await
        .unwrap();
    let op = wait_for(
        &rig.api::<NatsOperator>(SYS),
        "demo",
        "deletedAccounts records payments",
        |o| {
            o.pointer("/status/deletedAccounts")
                .and_then(|d| d.as_array())
                .is_some_and(|d| d.iter().any(|x| x["publicKey"] == a.subject.as_str()))
        },
    )
    .await;
    let rec = op["status"]["deletedAccounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["publicKey"] == a.subject.as_str())
        .unwrap()
        .clone();
    assert!(
        rec.get("expires").is_some(),
        "the deletion lasts until the JWT would expire"
    );
    let revoked = wait_for(&accounts, "payments", "payments JWT emptied", |o| {
        is(o, "Ready", "False", "ReferenceNotPermitted") && o["status"].get("jwt").is_none()
    })
    .await;
    assert_eq!(
        str_at(&revoked, "/status/publicKey"),
        a.subject,
        "its key stays recorded"
    );
    wait_ready(
        &rig.api::<NatsUser>("team-payments"),
        "payments-app",
        "False",
        "AccountNotAdmitted",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_05_private_export_gets_an_activation_and_imports_resolve_from_exports() {
    let rig = Rig::start(&[SYS, "team-monitoring", "team-core"]).await;
    rig.apply_story("02-auth-plane", "01-trust-roots.yaml", &[])
        .await;
    rig.apply_story("05-account-wiring", "01-namespaces-and-grants.yaml", &[])
        .await;
    rig.apply_story("05-account-wiring", "02-monitoring.yaml", &[])
        .await;
    // The partner's account, whose key the story's import names: the docs' key illustrates it
    // (no seed), so the import names this test's partner instead.
    let partner = NKey::generate(KeyKind::Account);
    for mut doc in sim::testkit::story_docs("docs/stories/05-account-wiring/03-core.yaml") {
        for imp in doc["spec"]["imports"].as_array_mut().into_iter().flatten() {
            if imp.get("publicKey").is_some() {
                imp["publicKey"] = partner.public_key().into();
            }
        }
        rig.apply(doc).await;
    }
    let accounts_core = rig.api::<NatsAccount>("team-core");
    // Without the partner's activation Secret the import is unresolved.
    let unresolved = wait_ready(&accounts_core, "core", "False", "ImportsUnresolved").await;
    assert!(message(&unresolved, "Ready").contains("partner-rates-activation"));
    let core_pk = str_at(&unresolved, "/status/publicKey").to_string();
    assert!(!core_pk.is_empty());
    let activation = |signer: &NKey| {
        nats_claims::ActivationClaims::new(
            core_pk.clone(),
            "partner.rates.>",
            nats_claims::ExportType::Service,
        )
        .encode(signer)
        .unwrap()
    };
    let supply = |token: String| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "partner-rates-activation", "namespace": "team-core"},
            "stringData": {"activation.jwt": token},
        })
    };
    // A token some other account signed: every server would refuse the JWT carrying it, so the
    // import stays unresolved, naming why.
    rig.apply(supply(activation(&NKey::generate(KeyKind::Account))))
        .await;
    let refused = sim::wait::poll(
        "core refuses a token not issued by the exporting account",
        std::time::Duration::from_secs(60),
        || async {
            let a = accounts_core.get("core").await.map_err(|e| e.to_string())?;
            let a = serde_json::to_value(&a).map_err(|e| e.to_string())?;
            if message(&a, "Ready").contains("not by the exporting account") {
                Ok(Some(a))
            } else {
                Err(message(&a, "Ready"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        is(&refused, "Ready", "False", "ImportsUnresolved"),
        "{refused}"
    );
    // The partner's activation for the import by public key, as the partner would hand it over.
    rig.apply(supply(activation(&partner))).await;

    let mon = wait_ready(
        &rig.api::<NatsAccount>("team-monitoring"),
        "monitoring",
        "True",
        "Signed",
    )
    .await;
    let mon_pk = str_at(&mon, "/status/publicKey").to_string();
    let mon_sk = generated(
        &rig,
        "team-monitoring",
        "monitoring-account-signing-1",
        "account/monitoring",
    )
    .await;
    let m = decode::<Account>(str_at(&mon, "/status/jwt")).unwrap();
    assert_eq!(m.nats.exports.len(), 2);
    let execute = m.nats.exports.iter().find(|e| e.name == "execute").unwrap();
    assert!(execute.token_req, "a private export requires a token");
    let acts = mon["status"]["activations"]
        .as_array()
        .expect("activations")
        .clone();
    assert_eq!(acts.len(), 1);
    assert_eq!(acts[0]["export"], "execute");
    assert_eq!(acts[0]["publicKey"], core_pk.as_str());
    let act = decode::<nats_claims::Activation>(acts[0]["token"].as_str().unwrap())
        .expect("an activation JWT");
    assert_eq!(act.subject, core_pk);
    assert_eq!(
        act.issuer,
        mon_sk.public_key(),
        "signed by the exporter's signing key"
    );
    assert_eq!(act.nats.issuer_account, mon_pk);

    let core = wait_ready(&accounts_core, "core", "True", "Signed").await;
    let imports = core["status"]["imports"].as_array().unwrap().clone();
    assert_eq!(imports.len(), 3);
    assert_eq!(imports[0]["subject"], "checks.results.>");
    assert_eq!(imports[0]["localSubject"], "upstream.checks.>");
    assert_eq!(imports[1]["activation"], "Signed");
    assert_eq!(
        imports[1]["localSubject"], "checks.execute.*",
        "not remapped"
    );
    assert_eq!(imports[2]["activation"], "Supplied");
    assert_eq!(
        imports[2]["localSubject"], "partner.rates.>",
        "not remapped"
    );
    let c = decode::<Account>(str_at(&core, "/status/jwt")).unwrap();
    let exec = c.nats.imports.iter().find(|i| i.name == "execute").unwrap();
    assert_eq!(exec.account, mon_pk);
    assert_eq!(exec.subject, "checks.execute.*");
    assert_eq!(exec.token, acts[0]["token"].as_str().unwrap());
}
