//! Tenancy of imports (§5.4, §7), proven at the servers: an import of an account under another
//! NatsOperator is refused and never signed, and an import admitted by a NatsReferenceGrant in
//! the exporter's namespace is removed from the importer's JWT on every server once that grant is
//! deleted, so the importer's users can no longer reach the exported service or stream.

use std::time::{Duration, Instant};

use async_nats::Client;
use futures::StreamExt as _;
use nats_api::auth::{NatsAccount, NatsOperator, NatsUser};
use nats_api::nats::NatsReferenceGrant;
use serde_json::{Value, json};
use sim::Topology;
use sim::testkit::{WAIT, is, message, wait_for};

use super::apirig::{Rig, str_at, wait_ready};
use super::common::connect;
use super::{SYS, creds_text, plain_user, plane};

/// How long a step of a server's account update may take to show at a client.
const AT_THE_SERVER: Duration = Duration::from_secs(10);

/// The account claims of a JWT.
fn claims(jwt: &str) -> nats_claims::Claims<nats_claims::Account> {
    nats_claims::decode::<nats_claims::Account>(jwt)
        .unwrap_or_else(|e| panic!("an account JWT: {e}"))
}

/// The exporting account keys of a JWT's imports.
fn imported_from(jwt: &str) -> Vec<String> {
    claims(jwt)
        .nats
        .imports
        .iter()
        .map(|i| i.account.clone())
        .collect()
}

/// A wire client over the auth-controller system user, to ask the servers what they hold.
async fn system_wire(rig: &Rig, topo: &Topology) -> nats_wire::Wire {
    let sys = creds_text(rig, SYS, "auth-controller-creds")
        .await
        .expect("the auth-controller creds");
    let (client, _) = connect(topo, &sys, Some("auth-controller")).await;
    nats_wire::Wire::new(client.expect("the auth-controller user connects"))
}

/// Polls until each of the 3 servers answers CLAIMS.LOOKUP for `key` with `jwt`.
async fn every_server_holds(wire: &nats_wire::Wire, key: &str, jwt: &str) {
    sim::wait::poll("every server holds the JWT", WAIT, || async {
        let answers = wire
            .claims_lookup(
                key,
                nats_wire::Collect::expecting(3, Duration::from_secs(2)),
            )
            .await
            .map_err(|e| e.to_string())?;
        let current = answers.iter().filter(|a| a.jwt() == Some(jwt)).count();
        if answers.len() == 3 && current == 3 {
            Ok(Some(()))
        } else {
            Err(format!("{} answers, {current} holding it", answers.len()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// A request answered within a second: the answer, or why not.
async fn ask(client: &Client, subject: &str) -> Result<String, String> {
    match tokio::time::timeout(
        Duration::from_secs(1),
        client.request(subject.to_string(), "go".into()),
    )
    .await
    {
        Ok(Ok(m)) => Ok(String::from_utf8_lossy(&m.payload).into_owned()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 1 s".into()),
    }
}

/// One publish on `subject` by `publisher` (the exporter), seen by its own `witness`
/// subscription (so it reached the servers): whether `sub` (the importer's) receives it too.
async fn delivered(
    publisher: &Client,
    subject: &str,
    sub: &mut async_nats::Subscriber,
    witness: &mut async_nats::Subscriber,
) -> bool {
    publisher
        .publish(subject.to_string(), "result".into())
        .await
        .expect("publish");
    publisher.flush().await.expect("flush");
    tokio::time::timeout(AT_THE_SERVER, witness.next())
        .await
        .expect("the exporter's own subscriber receives the publish")
        .expect("the witness subscription is open");
    matches!(
        tokio::time::timeout(Duration::from_millis(500), sub.next()).await,
        Ok(Some(_))
    )
}

/// Publishes (as [`delivered`]) until whether `sub` receives is `want`, within `AT_THE_SERVER`.
async fn until_delivery(
    what: &str,
    want: bool,
    publisher: &Client,
    subject: &str,
    sub: &mut async_nats::Subscriber,
    witness: &mut async_nats::Subscriber,
) {
    let deadline = Instant::now() + AT_THE_SERVER;
    while delivered(publisher, subject, sub, witness).await != want {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {AT_THE_SERVER:?}"
        );
    }
}

/// Two NatsOperators in one Kubernetes cluster, the servers trusting `demo` only. `core`
/// (team-core, under demo) imports, by accountRef and by public key, the public exports of `far`
/// (team-far, under `elsewhere`) and, by accountRef, a stream of `ticks` (team-core, under demo).
/// Every grant a same-operator import would need is in place, so the NatsOperator alone refuses:
/// `core` reads Ready False ImportsUnresolved naming both NatsOperators and each import, is
/// signed without them, and the JWT in its status and on every server names `far` nowhere; its
/// user receives the stream it may import. CEL cannot refuse this at apply: the exporter's
/// NatsOperator is another object's field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_of_another_natsoperators_account_is_refused_and_never_signed() {
    let (rig, topo) = plane(&["team-core", "team-far"]).await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsSystemAccount",
        "metadata": {"name": "elsewhere-system", "namespace": SYS},
        "spec": {"operatorRef": {"name": "elsewhere"}},
    }))
    .await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsOperator",
        "metadata": {"name": "elsewhere", "namespace": SYS},
        "spec": {"systemAccountRef": {"name": "elsewhere-system"}},
    }))
    .await;
    // The platform admits team-core to demo and team-far to elsewhere; team-far admits core's
    // imports of far.
    for (name, ns, operator) in [
        ("core-to-demo", "team-core", "demo"),
        ("far-to-elsewhere", "team-far", "elsewhere"),
    ] {
        rig.apply(grant(SYS, name, ns, "NatsOperator", operator))
            .await;
    }
    rig.apply(grant(
        "team-far",
        "core-imports",
        "team-core",
        "NatsAccount",
        "far",
    ))
    .await;
    wait_ready(&rig.api::<NatsOperator>(SYS), "elsewhere", "True", "Signed").await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "far", "namespace": "team-far"},
        "spec": {
            "operatorRef": {"name": "elsewhere", "namespace": SYS},
            "exports": [
                {"name": "feed", "type": "Stream", "subject": "far.feed.>", "access": "Public"},
                {"name": "quote", "type": "Service", "subject": "far.quote", "access": "Public"},
            ],
        },
    }))
    .await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "ticks", "namespace": "team-core"},
        "spec": {
            "operatorRef": {"name": "demo", "namespace": SYS},
            "exports": [{"name": "ticks", "type": "Stream", "subject": "ticks.>", "access": "Public"}],
        },
    }))
    .await;
    let far = wait_for(
        &rig.api::<NatsAccount>("team-far"),
        "far",
        "far keyed",
        |o| !str_at(o, "/status/publicKey").is_empty(),
    )
    .await;
    let far_pk = str_at(&far, "/status/publicKey").to_string();

    let core_accounts = rig.api::<NatsAccount>("team-core");
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "core", "namespace": "team-core"},
        "spec": {
            "operatorRef": {"name": "demo", "namespace": SYS},
            "imports": [
                {"accountRef": {"kind": "NatsAccount", "name": "far", "namespace": "team-far"}, "export": "feed"},
                {"publicKey": far_pk, "export": "quote", "subject": "far.quote", "type": "Service"},
                {"accountRef": {"kind": "NatsAccount", "name": "ticks"}, "export": "ticks"},
            ],
        },
    }))
    .await;
    rig.apply(plain_user("ticker", "team-core", "ticks")).await;
    rig.apply(plain_user("caller", "team-core", "core")).await;

    let core = wait_for(
        &core_accounts,
        "core",
        "core refused, signed without",
        |o| {
            is(o, "Ready", "False", "ImportsUnresolved")
                && is(o, "Distributed", "True", "AllServersCurrent")
                && o.pointer("/status/imports")
                    .and_then(Value::as_array)
                    .is_some_and(|i| i.len() == 1)
        },
    )
    .await;
    let ready = message(&core, "Ready");
    for part in [
        "import feed: account team-far/far is under NatsOperator nats-system/elsewhere",
        &format!("import quote: account {far_pk} is under NatsOperator nats-system/elsewhere"),
        "not under this account's NatsOperator nats-system/demo",
        "signed without these imports",
    ] {
        assert!(ready.contains(part), "Ready names {part:?}: {ready}");
    }
    assert!(
        !ready.contains("ticks"),
        "the import of ticks resolves: {ready}"
    );
    assert!(is(
        &core,
        "ReferencesResolved",
        "False",
        "ImportsUnresolved"
    ));
    assert_eq!(core["status"]["imports"][0]["export"], "ticks");

    // Never signed: the JWT of status imports ticks alone, and every server holds that JWT.
    let ticks = wait_for(&core_accounts, "ticks", "ticks 3 of 3", |o| {
        is(o, "Ready", "True", "Signed") && is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
    let ticks_pk = str_at(&ticks, "/status/publicKey").to_string();
    let jwt = str_at(&core, "/status/jwt").to_string();
    assert_eq!(imported_from(&jwt), [ticks_pk]);
    let core_pk = str_at(&core, "/status/publicKey").to_string();
    let wire = system_wire(&rig, &topo).await;
    every_server_holds(&wire, &core_pk, &jwt).await;
    // The rest of the account works: its user receives the stream it may import.
    wait_ready(
        &rig.api::<NatsUser>("team-core"),
        "caller",
        "True",
        "Signed",
    )
    .await;
    wait_ready(
        &rig.api::<NatsUser>("team-core"),
        "ticker",
        "True",
        "Signed",
    )
    .await;
    let caller = creds_text(&rig, "team-core", "caller-creds").await.unwrap();
    let ticker = creds_text(&rig, "team-core", "ticker-creds").await.unwrap();
    let (caller, _) = connect(&topo, &caller, None).await;
    let caller = caller.expect("caller connects");
    let (ticker, _) = connect(&topo, &ticker, None).await;
    let ticker = ticker.expect("ticker connects");
    let mut sub = caller.subscribe("ticks.>").await.unwrap();
    caller.flush().await.unwrap();
    let mut witness = ticker.subscribe("ticks.>").await.unwrap();
    ticker.flush().await.unwrap();
    until_delivery(
        "caller receives ticks",
        true,
        &ticker,
        "ticks.one",
        &mut sub,
        &mut witness,
    )
    .await;
    // Passes since (resync 2 s) never signed far in.
    let now = core_accounts.get("core").await.unwrap();
    let now = now.status.and_then(|s| s.jwt).expect("core's JWT");
    assert!(
        !imported_from(&now).contains(&far_pk),
        "far signed in later"
    );
}

/// Story 05's core imports monitoring's public stream and private service across namespaces,
/// admitted by the grant `core-imports` in team-monitoring. Deleting that grant (§7: "deleting a
/// grant revokes what it admitted") removes both imports from core's JWT, signed afresh and held
/// by every server; core's user, on the connection it held and on a new one, no longer gets an
/// answer from the service nor a message of the stream. core's own try at keeping them, an import
/// that never resolves added beforehand, holds nothing. The grant applied again restores them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn withdrawing_an_imports_grant_removes_it_from_every_server_and_the_importer_loses_it() {
    let (rig, topo) = plane(&["team-monitoring", "team-core"]).await;
    rig.apply_story("05-account-wiring", "01-namespaces-and-grants.yaml", &[])
        .await;
    rig.apply_story("05-account-wiring", "02-monitoring.yaml", &[])
        .await;
    // Story 05's core account without the partner import (no partner account exists here).
    let mut core = sim::testkit::story_docs("docs/stories/05-account-wiring/03-core.yaml")
        .into_iter()
        .find(|d| d["kind"] == "NatsAccount")
        .unwrap();
    let imports: Vec<_> = core["spec"]["imports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i.get("publicKey").is_none())
        .cloned()
        .collect();
    assert_eq!(imports.len(), 2, "check-results and execute");
    core["spec"]["imports"] = json!(imports);
    rig.apply(core.clone()).await;
    rig.apply(plain_user("checker", "team-monitoring", "monitoring"))
        .await;
    rig.apply(plain_user("caller", "team-core", "core")).await;

    let accounts = rig.api::<NatsAccount>("team-core");
    let monitoring = wait_for(
        &rig.api::<NatsAccount>("team-monitoring"),
        "monitoring",
        "monitoring 3 of 3",
        |o| is(o, "Ready", "True", "Signed") && is(o, "Distributed", "True", "AllServersCurrent"),
    )
    .await;
    let monitoring_pk = str_at(&monitoring, "/status/publicKey").to_string();
    let granted = wait_for(&accounts, "core", "core 3 of 3 importing both", |o| {
        is(o, "Ready", "True", "Signed")
            && is(o, "Distributed", "True", "AllServersCurrent")
            && imported_from(str_at(o, "/status/jwt")).len() == 2
    })
    .await;
    let core_pk = str_at(&granted, "/status/publicKey").to_string();
    assert!(
        imported_from(str_at(&granted, "/status/jwt"))
            .iter()
            .all(|k| *k == monitoring_pk)
    );
    let wire = system_wire(&rig, &topo).await;
    every_server_holds(&wire, &core_pk, str_at(&granted, "/status/jwt")).await;

    for name in ["checker", "caller"] {
        let ns = if name == "checker" {
            "team-monitoring"
        } else {
            "team-core"
        };
        wait_ready(&rig.api::<NatsUser>(ns), name, "True", "Signed").await;
    }
    let checker = creds_text(&rig, "team-monitoring", "checker-creds")
        .await
        .unwrap();
    let caller_creds = creds_text(&rig, "team-core", "caller-creds").await.unwrap();
    let (responder, _) = connect(&topo, &checker, None).await;
    let responder = responder.expect("checker connects");
    let mut requests = responder.subscribe("checks.execute.*").await.unwrap();
    let mut witness = responder.subscribe("checks.results.>").await.unwrap();
    responder.flush().await.unwrap();
    let serve = sim::testkit::AbortOnDrop::spawn({
        let responder = responder.clone();
        async move {
            while let Some(m) = requests.next().await {
                if let Some(reply) = m.reply {
                    let _ = responder
                        .publish(reply, format!("ran {}", m.subject).into())
                        .await;
                }
            }
        }
    });

    // Granted: the caller, on a connection it keeps, reaches the service and the stream.
    let (held, _) = connect(&topo, &caller_creds, None).await;
    let held = held.expect("caller connects");
    let mut held_sub = held.subscribe("upstream.checks.>").await.unwrap();
    held.flush().await.unwrap();
    let answer = sim::wait::poll("the private service answers", AT_THE_SERVER, || async {
        ask(&held, "checks.execute.disk").await.map(Some)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answer, "ran checks.execute.disk");
    until_delivery(
        "the stream arrives under upstream",
        true,
        &responder,
        "checks.results.disk",
        &mut held_sub,
        &mut witness,
    )
    .await;

    // The importer's try at keeping what it imports: an import that never resolves, of an
    // account of its own whose seed Secret does not exist, so it never has a key. It is left out
    // of the JWT and the others stay; nothing holds the JWT at what it was.
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "stuck", "namespace": "team-core"},
        "spec": {
            "operatorRef": {"name": "demo", "namespace": SYS},
            "keys": {"identity": {"secretKeyRef": {"name": "no-such-seed"}}},
            "exports": [{"name": "never", "type": "Stream", "subject": "never.>", "access": "Public"}],
        },
    }))
    .await;
    let mut stuck_core = core.clone();
    stuck_core["spec"]["imports"]
        .as_array_mut()
        .unwrap()
        .push(json!({"accountRef": {"kind": "NatsAccount", "name": "stuck"}, "export": "never"}));
    rig.apply(stuck_core).await;
    let stuck = wait_for(&accounts, "core", "core naming the stuck import", |o| {
        is(o, "Ready", "False", "ImportsUnresolved")
            && message(o, "Ready").contains("import never")
            && is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
    assert_eq!(imported_from(str_at(&stuck, "/status/jwt")).len(), 2);

    // The exporter's team withdraws the grant.
    rig.api::<NatsReferenceGrant>("team-monitoring")
        .delete("core-imports", &Default::default())
        .await
        .unwrap();
    let withdrawn = Instant::now();
    let revoked = wait_for(
        &accounts,
        "core",
        "core re-signed without imports, 3 of 3",
        |o| {
            is(o, "Ready", "False", "ImportsUnresolved")
                && is(o, "Distributed", "True", "AllServersCurrent")
                && imported_from(str_at(o, "/status/jwt")).is_empty()
        },
    )
    .await;
    let jwt = str_at(&revoked, "/status/jwt").to_string();
    every_server_holds(&wire, &core_pk, &jwt).await;
    println!(
        "import grant deleted -> core re-signed without its imports -> every server holds it: {} ms",
        withdrawn.elapsed().as_millis()
    );
    let ready = message(&revoked, "Ready");
    assert!(
        ready.contains("import check-results: no NatsReferenceGrant in team-monitoring")
            && ready.contains("import execute: no NatsReferenceGrant in team-monitoring")
            && ready.contains("import never"),
        "{ready}"
    );
    assert!(
        revoked
            .pointer("/status/imports")
            .and_then(Value::as_array)
            .is_none_or(|i| i.is_empty()),
        "status.imports still lists {:?}",
        revoked.pointer("/status/imports")
    );

    // At the servers: neither the held connection nor a new one reaches what was imported.
    let (fresh, _) = connect(&topo, &caller_creds, None).await;
    let fresh = fresh.expect("caller still connects: only the import went");
    let mut fresh_sub = fresh.subscribe("upstream.checks.>").await.unwrap();
    fresh.flush().await.unwrap();
    for (which, client) in [("held", &held), ("fresh", &fresh)] {
        let denied = sim::wait::poll(
            &format!("the {which} connection no longer reaches the service"),
            AT_THE_SERVER,
            || async {
                match ask(client, "checks.execute.disk").await {
                    Ok(a) => Err(format!("still answered: {a}")),
                    Err(why) => Ok(Some(why)),
                }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        println!("{which} connection's request after the withdrawal: {denied}");
    }
    for (which, sub) in [("held", &mut held_sub), ("fresh", &mut fresh_sub)] {
        // A check result the exporter's witness sees, and the importer does not.
        until_delivery(
            &format!("the {which} connection no longer receives the stream"),
            false,
            &responder,
            "checks.results.disk",
            sub,
            &mut witness,
        )
        .await;
    }
    // And it stays so: three more rounds, none delivered, none answered.
    for _ in 0..3 {
        assert!(
            !delivered(
                &responder,
                "checks.results.disk",
                &mut held_sub,
                &mut witness
            )
            .await,
            "a check result reached the held connection after the withdrawal"
        );
        assert!(
            ask(&fresh, "checks.execute.disk").await.is_err(),
            "the service answered after the withdrawal"
        );
    }

    // The grant applied again restores both imports.
    rig.apply_story("05-account-wiring", "02-monitoring.yaml", &["NatsAccount"])
        .await;
    let restored = wait_for(
        &accounts,
        "core",
        "core importing both again, 3 of 3",
        |o| {
            is(o, "Distributed", "True", "AllServersCurrent")
                && imported_from(str_at(o, "/status/jwt")).len() == 2
        },
    )
    .await;
    every_server_holds(&wire, &core_pk, str_at(&restored, "/status/jwt")).await;
    let answer = sim::wait::poll(
        "the private service answers again",
        AT_THE_SERVER,
        || async { ask(&fresh, "checks.execute.disk").await.map(Some) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answer, "ran checks.execute.disk");
    drop(serve);
}

/// A NatsReferenceGrant in `ns` admitting `from_ns`'s NatsAccounts to `kind` `name`.
fn grant(ns: &str, name: &str, from_ns: &str, kind: &str, to: &str) -> Value {
    json!({
        "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsReferenceGrant",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "from": [{"group": "auth.nats.mikluko.io", "kind": "NatsAccount", "namespace": from_ns}],
            "to": [{"group": "auth.nats.mikluko.io", "kind": kind, "name": to}],
        },
    })
}
