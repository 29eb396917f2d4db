//! Live: adopting an account made elsewhere (§5.1), on a real 3-server operator-mode cluster. The
//! account's identity and signing seeds come from a `keys` Secret; its JWT is re-signed from spec,
//! so a user JWT issued under it before adoption, with no NatsUser, keeps working. What the old JWT
//! carried and the spec cannot say (a subject mapping) is refused with AdoptionDropsClaims until
//! spec.adoption.droppedClaims is Accept.

use crate::common;

use std::collections::BTreeMap;

use auth_controller::account::AccountSigningKey;
use auth_controller::gates;
use auth_controller::keys::{self, IdentityPlan, SeedSource};
use common::*;
use futures::StreamExt as _;
use nats_api::auth::{
    Adoption, DroppedClaims, GeneratedKind, IdentityKey, Keys, NatsAccountSpec, SigningKey,
};
use nats_api::common::SecretKeyRef;
use nats_claims::{AccountClaims, Creds, KeyKind, NKey, UserClaims, WeightedMapping};

#[tokio::test]
async fn an_adopted_account_keeps_its_key_and_its_users() {
    let plane = Plane::start().await;

    // Made elsewhere: identity, a signing key, a mapping, and a user issued under it.
    let identity = NKey::generate(KeyKind::Account);
    let signing = NKey::generate(KeyKind::Account);
    let mut legacy = AccountClaims::new(identity.public_key())
        .name("legacy")
        .signing_key(signing.public_key());
    legacy.nats.mappings.insert(
        "legacy.>".into(),
        vec![WeightedMapping {
            subject: "orders.>".into(),
            weight: 100,
            cluster: String::new(),
        }],
    );
    let legacy_jwt = legacy
        .encode_issued_at(&plane.operator_signing, now_secs() - 10)
        .unwrap();
    plane.push(&legacy_jwt).await;
    let old_user = NKey::generate(KeyKind::User);
    let old_user_jwt = UserClaims::new(old_user.public_key())
        .name("made-elsewhere")
        .issuer_account(identity.public_key())
        .encode(&signing)
        .unwrap();
    let old_creds = Creds::render_key(&old_user_jwt, &old_user).unwrap();

    // The keys Secret and the spec that adopts it.
    let secret: BTreeMap<&str, String> = BTreeMap::from([
        ("seed", identity.seed().expose().to_string()),
        ("users.nk", signing.seed().expose().to_string()),
    ]);
    let mut spec: NatsAccountSpec = orders_account().spec;
    spec.keys = Some(Keys {
        identity: Some(IdentityKey {
            secret_key_ref: SecretKeyRef {
                name: "legacy-keys".into(),
                key: None,
            },
        }),
        signing: vec![SigningKey {
            name: "users".into(),
            secret_key_ref: SecretKeyRef {
                name: "legacy-keys".into(),
                key: Some("users.nk".into()),
            },
            ..SigningKey::default()
        }],
    });
    let plan = keys::key_plan(
        GeneratedKind::Account,
        "legacy",
        spec.keys.as_ref(),
        false,
        None,
        &BTreeMap::new(),
    )
    .unwrap();
    let IdentityPlan::Seed(SeedSource::Adopt { key, .. }) = &plan.identity else {
        panic!("the identity is adopted: {:?}", plan.identity)
    };
    let adopted_id = keys::read_seed(
        "legacy-keys",
        key,
        KeyKind::Account,
        secret[key.as_str()].as_bytes(),
    )
    .unwrap();
    let SeedSource::Adopt { key, .. } = &plan.signing[0].1 else {
        panic!("the signing key is adopted")
    };
    let adopted_signing = keys::read_seed(
        "legacy-keys",
        key,
        KeyKind::Account,
        secret[key.as_str()].as_bytes(),
    )
    .unwrap();
    assert_eq!(
        adopted_id.public_key(),
        identity.public_key(),
        "the key is kept"
    );

    let listed = [AccountSigningKey {
        public_key: adopted_signing.public_key(),
        scope: None,
    }];
    let pk = adopted_id.public_key();
    let resigned = plane
        .sign_account_with("legacy", &pk, &listed, &spec, vec![])
        .await;

    // The spec cannot say the mapping: refused unless accepted.
    let dropped = gates::dropped_by_resign(&legacy_jwt, &resigned).unwrap();
    assert!(
        dropped.iter().any(|d| d.contains("mappings")),
        "{dropped:?}"
    );
    assert!(gates::adoption(&dropped, DroppedClaims::Refuse).is_err());
    spec.adoption = Some(Adoption {
        dropped_claims: DroppedClaims::Accept,
    });
    let accepted = spec.adoption.as_ref().unwrap().dropped_claims;
    gates::adoption(&dropped, accepted).unwrap();
    plane.push(&resigned).await;
    let c: AccountClaims = nats_claims::decode(&resigned).unwrap();
    assert_eq!(c.nats.limits.account.conn, 200, "claims come from spec");

    // The user issued before adoption, with no NatsUser, still connects and works.
    let client = sim::wait::poll("the pre-adoption user connects", DEADLINE, || async {
        let (c, _) = connect(&plane.topo, old_creds.expose(), None).await;
        c.map(Some).map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    let mut sub = client.subscribe("orders.>").await.unwrap();
    client.flush().await.unwrap();
    client.publish("orders.kept", "x".into()).await.unwrap();
    let got = tokio::time::timeout(DEADLINE, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.subject.as_str(), "orders.kept");
}
