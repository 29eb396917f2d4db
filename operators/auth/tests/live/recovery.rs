//! Live: revocations recovered from the servers and the decision while a roster server does not
//! answer (§5.3), on a real 3-server operator-mode cluster. With one server paused (SIGSTOP), only
//! 2 servers answer STATSZ and the lookups: the roster with memory still counts the paused one,
//! named silent, so an account recorded distributed is held (RecoveringRevocations), as is one
//! whose status was lost but which the answering servers hold, and a new one is signed with
//! RevocationsUnrecovered; once the server answers again the account is signed. A lost status
//! record comes back from the JWT the servers hold.

use crate::common;

use std::time::Duration;

use auth_controller::distribution::{self, Recovery};
use auth_controller::revocations;
use auth_controller::roster::{self, Answer, Forget, Roster};
use common::*;
use nats_api::auth::GeneratedKind;
use nats_claims::AccountClaims;
use nats_wire::{Collect, ServerFilter};

#[tokio::test]
async fn a_silent_roster_server_holds_a_distributed_account_and_revocations_come_back_from_the_servers()
 {
    let mut plane = Plane::start().await;
    let orders_obj = orders_account();
    let orders = Acct::new(GeneratedKind::Account, "orders");
    let pk = orders.public_key();

    // The account is signed with a revocation in its record, pushed and distributed.
    let mut record = vec![];
    let signing = vec![orders.keys.signing.public_key()];
    revocations::revoke(&mut record, "UDELETEDUSER", now_secs(), &signing);
    let keys = orders.signing_keys();
    let iat = now_secs();
    let list = revocations::as_list(&record);
    let jwt = auth_controller::account::account_claims(
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
    .unwrap()
    .encode_issued_at(&plane.operator_signing, iat)
    .unwrap();
    plane.push(&jwt).await;

    // The roster as a pass observes it: STATSZ answers merged with what was recorded before.
    let observe = async |recorded: &Roster, wait: Duration| -> Roster {
        let statsz = plane
            .wire
            .ping_statsz(&ServerFilter::all(), Collect::expecting(3, wait))
            .await
            .unwrap();
        let answered: Vec<Answer> = statsz
            .replies
            .iter()
            .map(|r| Answer {
                name: r.server.name.clone(),
                id: r.server.id.clone(),
            })
            .collect();
        roster::remember(
            &recorded.servers,
            &answered,
            &Default::default(),
            now_secs(),
            Forget::DEFAULT,
        )
    };
    let all = observe(&Roster::default(), DEADLINE).await;
    assert_eq!(all.answering(), 3);
    let roster: Vec<String> = all.servers.iter().map(|m| m.name.clone()).collect();
    let recorded = sim::wait::poll("3 of 3", DEADLINE, || async {
        let l = plane
            .wire
            .claims_lookup(&pk, Collect::expecting(3, DEADLINE))
            .await
            .map_err(|e| e.to_string())?;
        let d = distribution::distribution(roster.len(), &l, &jwt);
        Ok(distribution::all_current(&d).then_some(d))
    })
    .await
    .unwrap();

    // Status lost: the record comes back from what the servers hold.
    let held = plane
        .wire
        .claims_lookup(&pk, Collect::expecting(3, DEADLINE))
        .await
        .unwrap();
    let held_claims: AccountClaims =
        nats_claims::decode(held.iter().find_map(|a| a.jwt()).unwrap()).unwrap();
    let recovered = revocations::merge_from_jwt(&[], &held_claims);
    assert_eq!(recovered, record, "the lost record did not come back");

    // One roster server stops answering (not the one the controller is connected to).
    let connected = plane.wire.client().server_info().server_name;
    let silent = roster.iter().find(|n| **n != connected).unwrap().clone();
    plane.topo.server_mut(&silent).unwrap().pause().unwrap();
    let short = Collect::expecting(3, Duration::from_secs(2));
    // Collected until the deadline: a server that answers nothing within it is silent.
    let answered = sim::wait::poll("the paused server falls silent", DEADLINE, || async {
        let n = plane
            .wire
            .claims_lookup(&pk, short)
            .await
            .map_err(|e| e.to_string())?
            .len();
        Ok((n == 2).then_some(n))
    })
    .await
    .unwrap();
    let paused = observe(&all, Duration::from_secs(2)).await;
    assert_eq!(
        (paused.len(), paused.answering(), paused.silent()),
        (3, 2, vec![silent.as_str()]),
        "the roster with memory counts the paused server, named silent"
    );
    // What the answering servers hold, as the controller judges its status record by.
    let held_iats: Vec<i64> = plane
        .wire
        .claims_lookup(&pk, short)
        .await
        .unwrap()
        .iter()
        .filter_map(|a| distribution::issued_at(a.jwt()))
        .collect();
    assert_eq!(
        held_iats,
        vec![iat, iat],
        "the two answering servers hold the JWT"
    );
    let judged = |ours: Option<i64>| {
        let rec = distribution::record(ours, &held_iats, Some(&recorded));
        distribution::recovery(paused.len(), answered, rec)
    };
    assert_eq!(
        judged(Some(iat)),
        Recovery::SignFromRecord { missing: 1 },
        "with the record kept, a deleted user's revocation is signed and pushed to those answering"
    );
    assert_eq!(
        judged(None),
        Recovery::Hold { missing: 1 },
        "with the status lost, the JWT the answering servers hold says it was distributed: \
         the silent server may hold a newer one (RecoveringRevocations)"
    );
    assert_eq!(
        judged(Some(iat - 1)),
        Recovery::Hold { missing: 1 },
        "a record older than what the servers hold (a restored backup) waits too"
    );
    let fresh = Acct::new(GeneratedKind::Account, "fresh");
    let answered_fresh = plane
        .wire
        .claims_lookup(&fresh.public_key(), short)
        .await
        .unwrap()
        .len();
    assert_eq!(
        distribution::recovery(
            paused.len(),
            answered_fresh,
            distribution::record(None, &[], None)
        ),
        Recovery::SignUnrecovered { missing: 1 },
        "a new account is signed with RevocationsUnrecovered"
    );

    // The server answers again: ask again and sign.
    plane.topo.server_mut(&silent).unwrap().resume().unwrap();
    let answered = sim::wait::poll("every roster server answers", DEADLINE, || async {
        let n = plane
            .wire
            .claims_lookup(&pk, Collect::expecting(3, Duration::from_secs(2)))
            .await
            .map_err(|e| e.to_string())?
            .len();
        Ok((n == 3).then_some(n))
    })
    .await
    .unwrap();
    let back = observe(&paused, DEADLINE).await;
    assert!(back.silent().is_empty(), "{:?}", back.servers);
    assert_eq!(
        distribution::recovery(
            back.len(),
            answered,
            distribution::record(None, &held_iats, None)
        ),
        Recovery::Sign
    );
}

/// What tells a stopped server from a silent one (§5.3, see `roster`): a server put in lame duck
/// mode (what a pod's preStop does) announces it on `$SYS.SERVER.<id>.LAMEDUCK` while it is still
/// up, which the auth-controller preset's user hears; one paused says nothing. (SIGTERM's
/// `SHUTDOWN` event is heard through the controller in `live_controller`.)
#[tokio::test]
async fn a_server_entering_lame_duck_mode_announces_it_to_the_auth_controller_user() {
    use futures::StreamExt;
    let mut plane = Plane::start().await;
    let statsz = plane
        .wire
        .ping_statsz(&ServerFilter::all(), Collect::expecting(3, DEADLINE))
        .await
        .unwrap();
    let connected = plane.wire.client().server_info().server_name;
    let others: Vec<(String, String)> = statsz
        .replies
        .iter()
        .filter(|r| r.server.name != connected)
        .map(|r| (r.server.name.clone(), r.server.id.clone()))
        .collect();
    let [(paused, _), (stopping, stopping_id)] = &others[..] else {
        panic!("two servers besides {connected}: {others:?}");
    };
    let mut events = plane.wire.shutdown_events().await.unwrap();
    plane.wire.client().flush().await.unwrap();

    plane.topo.server_mut(paused).unwrap().pause().unwrap();
    plane
        .topo
        .server_mut(stopping)
        .unwrap()
        .lame_duck()
        .unwrap();
    let event = tokio::time::timeout(DEADLINE, events.next())
        .await
        .expect("an event within the deadline")
        .expect("the subscription is open");
    assert_eq!(
        (
            event.subject.as_str().ends_with(".LAMEDUCK"),
            nats_wire::events::shutdown_server_id(event.subject.as_str())
        ),
        (true, Some(stopping_id.as_str())),
        "lame duck mode announced under the server's id: {}",
        event.subject
    );
    // Nothing but the stopping server's own (its SHUTDOWN may follow) for two seconds.
    let quiet_until = tokio::time::Instant::now() + Duration::from_secs(2);
    let mut heard: Vec<String> = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout_at(quiet_until, events.next()).await {
        heard.push(m.subject.to_string());
    }
    let strangers: Vec<&String> = heard
        .iter()
        .filter(|s| nats_wire::events::shutdown_server_id(s.as_str()) != Some(stopping_id.as_str()))
        .collect();
    assert!(
        strangers.is_empty(),
        "the paused server announced: {strangers:?}"
    );
    plane.topo.server_mut(paused).unwrap().resume().unwrap();
}
