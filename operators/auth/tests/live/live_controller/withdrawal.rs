//! §7 A withdrawn grant revokes what it admitted, proven at the servers. Story 04's analytics
//! reader is admitted to the payments account by the grant `analytics-readers`; deleting that
//! grant revokes the reader's key in the account JWT, every server holds it, the reader's live
//! connection is closed and its creds are refused, while the payments team's own user still
//! connects. Applying the grant again re-admits the same key under a fresh JWT, issued after the
//! revocation, which the servers accept; the JWT of before stays refused.

use std::time::{Duration, Instant};

use async_nats::Event;
use nats_api::auth::{NatsAccount, NatsUser};
use nats_api::nats::NatsReferenceGrant;
use sim::testkit::{is, message, wait_for};

use super::apirig::{str_at, wait_ready};
use super::common::connect;
use super::{creds_text, plane};

const PAYMENTS: &str = "team-payments";
const ANALYTICS: &str = "team-analytics";

/// The subject (user public key) and issue time of a creds file's JWT.
fn jwt_of(creds: &str) -> (String, i64) {
    let parsed = nats_claims::Creds::parse(creds).expect("a creds file");
    let claims: nats_claims::UserClaims = nats_claims::decode(&parsed.jwt).expect("a user JWT");
    (claims.subject, claims.issued_at)
}

/// Polls until a client of `creds` is refused (`refused`) or admitted (`!refused`), returning
/// how long it took.
async fn until_connect(topo: &sim::Topology, creds: &str, refused: bool, what: &str) -> Duration {
    let start = Instant::now();
    sim::wait::poll(what, Duration::from_secs(30), || async {
        let (client, _) = connect(topo, creds, None).await;
        match (client, refused) {
            (Err(_), true) => Ok(Some(())),
            (Ok(_), false) => Ok(Some(())),
            (Ok(_), true) => Err("still connects".to_string()),
            (Err(e), false) => Err(format!("refused: {e}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawn_grant_revokes_the_user_it_admitted_and_a_restored_one_readmits_its_key() {
    let (rig, topo) = plane(&[PAYMENTS, ANALYTICS]).await;
    rig.apply_story("04-team-self-service", "02-platform-grant.yaml", &[])
        .await;
    rig.apply_story(
        "04-team-self-service",
        "01-team-payments.yaml",
        &["NatsStream", "NatsConnection"],
    )
    .await;
    rig.apply_story("04-team-self-service", "03-analytics.yaml", &[])
        .await;
    let users = rig.api::<NatsUser>(ANALYTICS);
    wait_ready(&users, "payments-reader", "True", "Signed").await;
    wait_ready(
        &rig.api::<NatsUser>(PAYMENTS),
        "payments-app",
        "True",
        "Signed",
    )
    .await;
    let accounts = rig.api::<NatsAccount>(PAYMENTS);
    wait_for(&accounts, "payments", "payments 3 of 3", |o| {
        is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
    let reader = creds_text(&rig, ANALYTICS, "payments-reader-creds")
        .await
        .expect("the reader's creds Secret");
    let app = creds_text(&rig, PAYMENTS, "payments-app-creds")
        .await
        .expect("the app's creds Secret");
    let (reader_key, first_iat) = jwt_of(&reader);
    until_connect(&topo, &reader, false, "the reader connects while granted").await;
    let (live, mut live_events) = connect(&topo, &reader, None).await;
    let live = live.expect("the reader's live connection");
    live.flush().await.expect("flushed");

    // Withdraw: the grant the payments team applied goes.
    let grants = rig.api::<NatsReferenceGrant>(PAYMENTS);
    grants
        .delete("analytics-readers", &Default::default())
        .await
        .expect("the grant deleted");
    let deleted = Instant::now();
    let refused_after = until_connect(&topo, &reader, true, "the reader's creds refused").await;
    println!(
        "grant deleted -> the reader's creds refused by the servers: {} ms",
        refused_after.as_millis()
    );
    // Its live connection was closed by the servers (revocation) or the controller (KICK).
    let closed = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(e) = live_events.recv().await {
            if matches!(e, Event::Disconnected | Event::Closed) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        closed,
        Ok(true),
        "the withdrawn reader's connection was closed"
    );
    drop(live);

    let withdrawn = wait_for(
        &users,
        "payments-reader",
        "reader revoked everywhere",
        |o| {
            is(o, "Ready", "False", "AccountNotAdmitted")
                && message(o, "Ready").contains("revoked on every server")
        },
    )
    .await;
    println!(
        "grant deleted -> the reader reads revoked on every server: {} ms",
        deleted.elapsed().as_millis()
    );
    let withdrawn_at = str_at(&withdrawn, "/status/withdrawnAt").to_string();
    assert!(!withdrawn_at.is_empty(), "status.withdrawnAt recorded");
    assert!(
        message(&withdrawn, "Ready").contains("no NatsReferenceGrant in team-payments"),
        "the refusal names the missing grant: {}",
        message(&withdrawn, "Ready")
    );
    let payments = accounts.get("payments").await.expect("payments");
    let revoked = payments
        .status
        .as_ref()
        .expect("payments status")
        .revocations
        .iter()
        .find(|r| r.public_key == reader_key)
        .map(|r| r.at.0.as_second());
    assert!(
        revoked.is_some_and(|at| at >= first_iat),
        "the account's revocation record holds the reader's key: {revoked:?}"
    );
    // The payments team's own user is untouched.
    until_connect(&topo, &app, false, "the app still connects").await;

    // Restore: the same key, a fresh JWT issued after the revocation.
    rig.apply_story("04-team-self-service", "03-analytics.yaml", &[])
        .await;
    let readmitted = wait_ready(&users, "payments-reader", "True", "Signed").await;
    assert!(
        readmitted["status"].get("withdrawnAt").is_none(),
        "withdrawnAt cleared once signed again"
    );
    let fresh = sim::wait::poll("a fresh creds file", Duration::from_secs(20), || async {
        let c = creds_text(&rig, ANALYTICS, "payments-reader-creds")
            .await
            .ok_or("no creds Secret")?;
        if jwt_of(&c).1 > first_iat {
            Ok(Some(c))
        } else {
            Err("the creds still carry the JWT of before".to_string())
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let (fresh_key, fresh_iat) = jwt_of(&fresh);
    assert_eq!(fresh_key, reader_key, "the same key is re-admitted");
    assert!(
        revoked.is_some_and(|at| fresh_iat > at),
        "the fresh JWT ({fresh_iat}) is issued after the revocation ({revoked:?})"
    );
    let admitted_after = until_connect(&topo, &fresh, false, "the fresh creds connect").await;
    println!(
        "grant applied again -> the fresh creds admitted: {} ms after Ready",
        admitted_after.as_millis()
    );
    // The revocation is not lifted: the JWT of before stays refused.
    let (old, _) = connect(&topo, &reader, None).await;
    assert!(
        old.is_err(),
        "the JWT of before the withdrawal connects again"
    );
}
