//! Live: story 02's auth plane, signed by the pure core, on a real 3-server operator-mode cluster.
//! The NATS operator is trusted and the system account preloaded (the auth-controller system user
//! connects); the orders account, pushed with CLAIMS.UPDATE, is usable by orders-app's creds
//! within 2 s without a restart (sampled over six accounts); distribution reads "3 of 3" from real
//! STATSZ and lookups; and the servers keep an older JWT pushed over a newer one, which the push
//! guard refuses to do.

use crate::common;

use std::time::{Duration, Instant};

use auth_controller::distribution;
use auth_controller::keys::IDENTITY;
use common::*;
use futures::StreamExt as _;
use nats_api::auth::GeneratedKind;
use nats_claims::AccountClaims;
use nats_wire::Collect;
use nats_wire::ServerFilter;

#[tokio::test]
async fn story_02_account_is_usable_within_two_seconds_and_distributed_3_of_3() {
    let plane = Plane::start().await;
    assert_eq!(IDENTITY, "identity");

    let orders_obj = orders_account();
    let orders = Acct::new(
        GeneratedKind::Account,
        orders_obj.metadata.name.as_deref().unwrap(),
    );
    let app_creds = orders.creds(&orders_user("orders-app"));

    // Before the push the account is unknown: its user is refused.
    let (refused, _) = connect(&plane.topo, &app_creds, None).await;
    assert!(refused.is_err(), "a user of an unpushed account connected");

    let jwt = plane.sign_account(&orders, &orders_obj.spec, vec![]).await;
    let claims: AccountClaims = nats_claims::decode(&jwt).unwrap();
    assert_eq!(claims.nats.limits.account.conn, 200);
    assert_eq!(claims.nats.limits.jetstream.streams, 20);
    assert!(
        claims.expires >= claims.issued_at + 48 * 3600,
        "default jwtTTL 48h"
    );

    // Push, then measure until orders-app connects and round-trips a message.
    let started = Instant::now();
    plane.push(&jwt).await;
    let client = sim::wait::poll("orders-app connects", DEADLINE, || async {
        let (c, _) = connect(&plane.topo, &app_creds, None).await;
        c.map(Some).map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    let mut sub = client.subscribe("orders.created").await.unwrap();
    client.flush().await.unwrap();
    client
        .publish("orders.created", "o-1".into())
        .await
        .unwrap();
    let msg = tokio::time::timeout(DEADLINE, sub.next())
        .await
        .expect("round trip in time")
        .expect("subscription open");
    assert_eq!(&msg.payload[..], b"o-1");
    let latency = started.elapsed();
    println!("push-to-usable latency: {latency:?}");
    // A timing: judged in the nightly tier (sim::timings), reported in the gate.
    if sim::timings::judges_timings() {
        assert!(
            latency < Duration::from_secs(2),
            "account usable only after {latency:?}"
        );
    }

    // More samples of push-to-usable, one fresh account each.
    let mut samples = vec![latency];
    for i in 0..5 {
        let extra = Acct::new(GeneratedKind::Account, &format!("orders-{i}"));
        let creds = extra.creds(&orders_user("orders-app"));
        let jwt = plane.sign_account(&extra, &orders_obj.spec, vec![]).await;
        let started = Instant::now();
        plane.push(&jwt).await;
        let c = sim::wait::poll(
            "a user of the pushed account connects",
            DEADLINE,
            || async {
                let (c, _) = connect(&plane.topo, &creds, None).await;
                c.map(Some).map_err(|e| e.to_string())
            },
        )
        .await
        .unwrap();
        c.flush().await.unwrap();
        samples.push(started.elapsed());
    }
    samples.sort();
    println!(
        "push-to-usable over {} accounts: min {:?}, median {:?}, max {:?}",
        samples.len(),
        samples[0],
        samples[samples.len() / 2],
        samples[samples.len() - 1]
    );
    if sim::timings::judges_timings() {
        assert!(
            samples.iter().all(|s| *s < Duration::from_secs(2)),
            "{samples:?}"
        );
    }

    // Distribution: the STATSZ roster and each server's lookup.
    let roster = plane
        .wire
        .ping_statsz(&ServerFilter::all(), Collect::expecting(3, DEADLINE))
        .await
        .unwrap();
    assert_eq!(roster.replies.len(), 3, "{:?}", roster.failures);
    let d = sim::wait::poll("every server holds the JWT", DEADLINE, || async {
        let lookups = plane
            .wire
            .claims_lookup(&orders.public_key(), Collect::expecting(3, DEADLINE))
            .await
            .map_err(|e| e.to_string())?;
        let d = distribution::distribution(roster.replies.len(), &lookups, &jwt);
        Ok(distribution::all_current(&d).then_some(d))
    })
    .await
    .unwrap();
    assert_eq!(distribution::describe(&d), "3 of 3 servers hold this JWT");

    // A re-signed JWT is newer than the held one; the old one now counts as behind.
    let newer = plane.sign_account(&orders, &orders_obj.spec, vec![]).await;
    let newer_claims: AccountClaims = nats_claims::decode(&newer).unwrap();
    assert!(newer_claims.issued_at > claims.issued_at);
    let lookups = plane
        .wire
        .claims_lookup(&orders.public_key(), Collect::expecting(3, DEADLINE))
        .await
        .unwrap();
    let d = distribution::distribution(3, &lookups, &newer);
    assert_eq!(distribution::describe(&d), "0 of 3 servers hold this JWT");

    // Without an iat guard on the servers' side, an older JWT pushed over a newer one stays: what
    // the controller's push guard prevents.
    plane.push(&newer).await;
    let older = jwt.clone();
    assert!(claims.issued_at < newer_claims.issued_at);
    let guard = auth_controller::push_rules::may_push(
        &plane.operator,
        &claims,
        &[newer_claims.issued_at + 1],
    );
    assert!(guard.is_err(), "the guard let an older JWT through");
    plane.push(&older).await;
    let lookups = plane
        .wire
        .claims_lookup(&orders.public_key(), Collect::expecting(3, DEADLINE))
        .await
        .unwrap();
    let d = distribution::distribution(3, &lookups, &older);
    println!(
        "after pushing the older JWT over the newer: {}",
        distribution::describe(&d)
    );
}
