//! Live: a user's deletion as §5.3 orders it, done with the auth-controller preset's user on a
//! real 3-server operator-mode cluster. The user's key goes into the revocation record, the
//! account JWT signed from that record is pushed, distribution reaches 3 of 3, CONNZ finds the
//! user's live connections and KICK drops them; the revoked creds no longer connect, while
//! another user of the account still does.

use crate::common;

use std::time::Duration;

use async_nats::Event;
use auth_controller::{distribution, kick, revocations};
use common::*;
use nats_api::auth::GeneratedKind;
use nats_claims::{AccountClaims, UserClaims};
use nats_wire::Collect;
use nats_wire::monitor::ConnzOptions;

fn user_key(creds: &str) -> String {
    let parsed = nats_claims::Creds::parse(creds).unwrap();
    let claims: UserClaims = nats_claims::decode(&parsed.jwt).unwrap();
    claims.subject
}

#[tokio::test]
async fn a_deleted_user_is_revoked_distributed_and_kicked() {
    let plane = Plane::start().await;
    let orders_obj = orders_account();
    let orders = Acct::new(GeneratedKind::Account, "orders");
    let first = plane.sign_account(&orders, &orders_obj.spec, vec![]).await;
    plane.push(&first).await;

    let app_creds = orders.creds(&orders_user("orders-app"));
    let reader_creds = orders.creds(&orders_user("orders-reader"));
    let app_key = user_key(&app_creds);
    let (app, mut app_events) = connect(&plane.topo, &app_creds, None).await;
    let app = app.unwrap();
    app.flush().await.unwrap();

    // Deletion: the key joins the record with the signing keys that may have issued it.
    let mut record = vec![];
    let issuers = vec![orders.keys.signing.public_key()];
    revocations::revoke(&mut record, &app_key, now_secs(), &issuers);
    let list = revocations::as_list(&record);
    let held = plane
        .wire
        .claims_lookup(&orders.public_key(), Collect::expecting(3, DEADLINE))
        .await
        .unwrap();
    let held_iat = auth_controller::push_rules::held_issued_at(held.iter().filter_map(|a| a.jwt()));
    let iat = auth_controller::push_rules::issue_time(now_secs(), &held_iat);
    let keys = orders.signing_keys();
    let pk = orders.public_key();
    let claims = auth_controller::account::account_claims(
        &orders_obj.spec,
        auth_controller::account::AccountInput {
            name: "orders",
            public_key: &pk,
            signing_keys: &keys,
            imports: vec![],
            revocations: &list,
            issued_at: iat,
        },
    )
    .unwrap();
    let revoking = claims
        .encode_issued_at(&plane.operator_signing, iat)
        .unwrap();
    let revoking_claims: AccountClaims = nats_claims::decode(&revoking).unwrap();
    assert!(revocations::covered_by(
        &record,
        &revoking_claims.nats.revocations
    ));
    auth_controller::push_rules::may_push(&plane.operator, &revoking_claims, &held_iat).unwrap();
    plane.push(&revoking).await;

    // The finalizer holds until every server holds the revoking JWT.
    let d = sim::wait::poll("3 of 3 hold the revoking JWT", DEADLINE, || async {
        let lookups = plane
            .wire
            .claims_lookup(&pk, Collect::expecting(3, DEADLINE))
            .await
            .map_err(|e| e.to_string())?;
        let d = distribution::distribution(3, &lookups, &revoking);
        Ok(distribution::all_current(&d).then_some(d))
    })
    .await
    .unwrap();
    assert_eq!(distribution::describe(&d), "3 of 3 servers hold this JWT");

    // CONNZ by account and user, then KICK whatever is still connected.
    let options = ConnzOptions::user_of_account(&pk, &app_key);
    let connz = plane
        .wire
        .ping_connz(&options, Collect::expecting(3, DEADLINE))
        .await
        .unwrap();
    for (server, cid) in kick::targets(&connz, &app_key) {
        // The server may already have closed it on taking the revoking JWT.
        let _ = plane.wire.kick(&server, cid).await;
    }
    let gone = sim::wait::poll("no connection of the deleted user", DEADLINE, || async {
        let connz = plane
            .wire
            .ping_connz(&options, Collect::expecting(3, DEADLINE))
            .await
            .map_err(|e| e.to_string())?;
        Ok(kick::targets(&connz, &app_key).is_empty().then_some(()))
    })
    .await;
    assert!(gone.is_ok(), "{gone:?}");
    let disconnected = tokio::time::timeout(DEADLINE, async {
        while let Some(e) = app_events.recv().await {
            if matches!(e, Event::Disconnected) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        disconnected,
        Ok(true),
        "the deleted user's client saw no disconnect"
    );

    let (again, _) = connect(&plane.topo, &app_creds, None).await;
    assert!(again.is_err(), "revoked creds connected again");
    let (reader, mut reader_events) = connect(&plane.topo, &reader_creds, None).await;
    assert!(reader.is_ok(), "another user of the account was cut off");

    // Kicking is targeted: a live reader connection found by CONNZ is dropped by KICK.
    let reader = reader.unwrap();
    reader.flush().await.unwrap();
    let reader_key = user_key(&reader_creds);
    let ropts = ConnzOptions::user_of_account(&pk, &reader_key);
    let found = sim::wait::poll("CONNZ finds the reader", DEADLINE, || async {
        let c = plane
            .wire
            .ping_connz(&ropts, Collect::expecting(3, Duration::from_secs(3)))
            .await
            .map_err(|e| e.to_string())?;
        let t = kick::targets(&c, &reader_key);
        Ok((!t.is_empty()).then_some(t))
    })
    .await
    .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    plane.wire.kick(&found[0].0, found[0].1).await.unwrap();
    let kicked = tokio::time::timeout(DEADLINE, async {
        while let Some(e) = reader_events.recv().await {
            if matches!(e, Event::Disconnected) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(kicked, Ok(true), "the kicked reader saw no disconnect");
}
