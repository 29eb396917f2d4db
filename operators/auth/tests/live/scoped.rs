//! Live: story 02's 06-scoped-and-external-users.yaml on a real 3-server operator-mode cluster.
//! The orders account adopts the signing seeds of the orders-signing-keys Secret (its identity
//! stays generated); orders-batch, signed with the scoped key `batch`, may do exactly what the
//! scope says, judged by the server; orders-device-7, known by its public key only, gets a JWT and
//! no creds. An account JWT signed by a key the NATS operator JWT does not list is held by the push
//! guard: the servers would store it in place of the account's JWT, yet admit none of its users.

use crate::common;

use std::collections::BTreeMap;

use auth_controller::account::AccountSigningKey;
use auth_controller::keys::{self, IdentityPlan, SeedSource};
use auth_controller::push_rules::{self, Held};
use auth_controller::user::{self, Issued};
use common::*;
use k8s_openapi::api::core::v1::Secret;
use nats_api::auth::{GeneratedKind, NatsAccount, NatsUser};
use nats_claims::{AccountClaims, KeyKind, NKey, UserClaims};
use nats_wire::Collect;

const FILE: &str = "06-scoped-and-external-users.yaml";

#[tokio::test]
async fn scoped_and_external_users_of_an_adopted_signing_key_set() {
    let plane = Plane::start().await;
    let account: NatsAccount = manifest::<NatsAccount>(FILE, "NatsAccount").remove(0);
    let secret: Secret = manifest::<Secret>(FILE, "Secret").remove(0);
    let users: Vec<NatsUser> = manifest(FILE, "NatsUser");
    let user = |name: &str| {
        users
            .iter()
            .find(|u| u.metadata.name.as_deref() == Some(name))
            .unwrap()
            .clone()
    };

    // Key plan: identity generated, both signing keys adopted from the Secret.
    let plan = keys::key_plan(
        GeneratedKind::Account,
        "orders",
        account.spec.keys.as_ref(),
        false,
        None,
        &BTreeMap::new(),
    )
    .unwrap();
    assert!(matches!(
        plan.identity,
        IdentityPlan::Seed(SeedSource::Generate { .. })
    ));
    let identity = NKey::generate(KeyKind::Account);
    let string_data = secret.string_data.clone().unwrap();
    let spec_keys = account.spec.keys.clone().unwrap();
    let mut signing: Vec<(AccountSigningKey, NKey)> = vec![];
    for (name, source) in &plan.signing {
        let SeedSource::Adopt { secret: s, key } = source else {
            panic!("{name} is adopted")
        };
        assert_eq!(s, "orders-signing-keys");
        let seed = keys::read_seed(s, key, KeyKind::Account, string_data[key].as_bytes()).unwrap();
        let scope = spec_keys
            .signing
            .iter()
            .find(|k| &k.name == name)
            .unwrap()
            .scope
            .clone();
        signing.push((
            AccountSigningKey {
                public_key: seed.public_key(),
                scope,
            },
            seed,
        ));
    }
    let listed: Vec<AccountSigningKey> = signing.iter().map(|(k, _)| k.clone()).collect();
    let pk = identity.public_key();
    let jwt = plane
        .sign_account_with("orders", &pk, &listed, &account.spec, vec![])
        .await;
    plane.push(&jwt).await;

    // orders-batch: the role picks the scoped key; the JWT carries no permissions of its own.
    let batch = user("orders-batch");
    let with_retiring: Vec<_> = listed.iter().cloned().map(|k| (k, false)).collect();
    let signer_key = user::signing_key_for(&batch.spec, &with_retiring).unwrap();
    assert_eq!(signer_key.scope.as_ref().unwrap().role, "batch");
    let signer = &signing
        .iter()
        .find(|(k, _)| k.public_key == signer_key.public_key)
        .unwrap()
        .1;
    let batch_seed = NKey::generate(KeyKind::User);
    let claims = user::user_claims("orders-batch", &batch.spec, &batch_seed.public_key(), &pk);
    let Issued::Creds(creds) = user::issue(&claims, signer, Some(&batch_seed), now_secs()).unwrap()
    else {
        panic!("a seed gives creds")
    };
    let client = sim::wait::poll("orders-batch connects", DEADLINE, || async {
        let (c, e) = connect(&plane.topo, creds.expose(), None).await;
        c.map(|c| Some((c, e))).map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    let mut judge = Judge {
        client: client.0,
        events: client.1,
        n: 0,
    };
    assert!(judge.publish_allowed("orders.batch.run").await);
    assert!(
        judge
            .publish_allowed("$JS.API.CONSUMER.MSG.NEXT.ORDERS.batch")
            .await
    );
    assert!(!judge.publish_allowed("orders.created").await);
    assert!(judge.subscribe_allowed("_INBOX.x.>").await);
    assert!(!judge.subscribe_allowed("orders.>").await);

    // orders-device-7: a JWT for status and no creds, usable by the device's own seed.
    let device = user("orders-device-7");
    let device_key = device.spec.public_key.clone().unwrap();
    let plain = user::signing_key_for(&device.spec, &with_retiring).unwrap();
    assert!(plain.scope.is_none());
    let plain_seed = &signing
        .iter()
        .find(|(k, _)| k.public_key == plain.public_key)
        .unwrap()
        .1;
    let claims = user::user_claims("orders-device-7", &device.spec, &device_key, &pk);
    let Issued::JwtOnly(device_jwt) = user::issue(&claims, plain_seed, None, now_secs()).unwrap()
    else {
        panic!("publicKey-only users get no creds")
    };
    let back: UserClaims = nats_claims::decode(&device_jwt).unwrap();
    assert_eq!(back.subject, device_key);
    assert_eq!(
        back.nats.permission_limits.permissions.publish.allow,
        ["orders.devices.7.>"]
    );
    nats_claims::trust::check_user(&nats_claims::decode(&jwt).unwrap(), &back, true).unwrap();

    // UntrustedSigner: an account JWT signed by a key the NATS operator JWT does not list.
    let rogue = NKey::generate(KeyKind::Operator);
    let stranger = NKey::generate(KeyKind::Account);
    let stranger_signing = NKey::generate(KeyKind::Account);
    let rogue_jwt = AccountClaims::new(stranger.public_key())
        .name("rogue")
        .signing_key(stranger_signing.public_key())
        .encode_issued_at(&rogue, now_secs())
        .unwrap();
    let rogue_claims: AccountClaims = nats_claims::decode(&rogue_jwt).unwrap();
    assert!(matches!(
        push_rules::may_push(&plane.operator, &rogue_claims, &[]),
        Err(Held::UntrustedSigner { .. })
    ));
    // Why the guard matters: nats-server 2.15's full resolver stores it anyway ("jwt updated",
    // and CLAIMS.LOOKUP returns it), in place of whatever JWT the account had, yet admits no user
    // under it.
    let answers = plane
        .wire
        .claims_update(&rogue_jwt, Collect::expecting(3, DEADLINE))
        .await
        .unwrap();
    println!(
        "untrusted account JWT pushed anyway: {:?}",
        answers
            .replies
            .iter()
            .map(|r| (r.data.code, r.data.message.as_str()))
            .collect::<Vec<_>>()
    );
    let held = plane
        .wire
        .claims_lookup(&stranger.public_key(), Collect::expecting(3, DEADLINE))
        .await
        .unwrap();
    println!(
        "servers holding it: {}",
        held.iter()
            .filter(|a| a.jwt() == Some(rogue_jwt.as_str()))
            .count()
    );
    let u = NKey::generate(KeyKind::User);
    let u_jwt = UserClaims::new(u.public_key())
        .issuer_account(stranger.public_key())
        .encode(&stranger_signing)
        .unwrap();
    let u_creds = nats_claims::Creds::render_key(&u_jwt, &u).unwrap();
    let (refused, _) = connect(&plane.topo, u_creds.expose(), None).await;
    assert!(
        refused.is_err(),
        "a user of an account signed by an untrusted key connected"
    );
}
