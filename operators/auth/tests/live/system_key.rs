//! Live: why an account may not claim the system account's key (§5.1, PublicKeyInUse). An account
//! JWT the NATS operator signed for the system account's key replaces the system account's own on
//! nats-server 2.15 and cuts off its users; the uniqueness check refuses to sign it.

use crate::common;

use std::time::Duration;

use async_nats::Event;
use auth_controller::uniqueness::{Holder, check_unique, system_account_key};
use common::*;
use nats_claims::AccountClaims;

#[tokio::test]
async fn an_account_claiming_the_system_accounts_key_is_refused_before_it_cuts_off_system_users() {
    let plane = Plane::start().await;
    let sys_key = plane.system.public_key();

    let holder = Holder {
        name: "NatsSystemAccount nats-system/system".into(),
        public_key: system_account_key(Some(&sys_key), None, None).unwrap(),
        created: 1,
    };
    let sneaky = Holder {
        name: "NatsAccount team-a/sneaky".into(),
        public_key: sys_key.clone(),
        created: 0,
    };
    let refused = check_unique(&sneaky, &[], Some(&holder)).unwrap_err();
    assert_eq!(refused.holder, "NatsSystemAccount nats-system/system");

    // Pushed anyway, with a connection of the system account watching.
    let (watcher, mut events) = connect(
        &plane.topo,
        &plane.system.creds(&system_user("cluster-controller")),
        Some("cluster-controller"),
    )
    .await;
    let watcher = watcher.unwrap();
    watcher.flush().await.unwrap();
    let jwt = AccountClaims::new(sys_key.clone())
        .name("sneaky")
        .encode_issued_at(&plane.operator_signing, now_secs() + 5)
        .unwrap();
    // The answers may never come back: the pushing user is a system user too.
    let _ = plane
        .wire
        .claims_update(
            &jwt,
            nats_wire::Collect::expecting(3, Duration::from_secs(2)),
        )
        .await;
    let cut_off = tokio::time::timeout(DEADLINE, async {
        while let Some(e) = events.recv().await {
            if matches!(e, Event::Disconnected) {
                return true;
            }
        }
        false
    })
    .await;
    let (again, _) = connect(
        &plane.topo,
        &plane.system.creds(&system_user("cluster-controller")),
        Some("cluster-controller"),
    )
    .await;
    assert_eq!(cut_off, Ok(true), "the system user was not disconnected");
    assert!(
        again.is_err(),
        "a system user connected after a foreign JWT took the system account's key"
    );
}
