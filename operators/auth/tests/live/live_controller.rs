//! Live tier through the controller: a real kube-apiserver 1.20, the auth controller in-process
//! with `--system-connection`, and a real 3-server nats-server cluster trusting the NATS operator
//! JWT the controller signed (read from the NatsOperatorTrust it mirrors into). An account
//! applied as a resource is usable within 2 s without a restart by the user whose creds Secret
//! the controller wrote (measured and printed); distribution reads "3 of 3"; each preset's user,
//! with the creds the controller wrote, is refused by the server outside its list; an importer
//! reaches a private service export through the activation the controller signed.

use crate::apirig;
use crate::common;
mod operator_rotation;
mod roster_per_operator;
mod tenancy_imports;
mod withdrawal;

use std::time::{Duration, Instant};

use apirig::{Rig, str_at, wait_ready};
use auth_controller::controller::{Settings, SystemConnection};
use auth_controller::presets;
use common::{Judge, VERSION, connect};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use nats_api::auth::{NatsAccount, NatsOperator, NatsSystemAccount, NatsUser, UserPreset};
use nats_api::nats::NatsOperatorTrust;
use serde_json::json;
use sim::testkit::{WAIT, is, message, wait_for};
use sim::{Auth, OperatorMode, Topology, TopologySpec};

const SYS: &str = "nats-system";

/// Story 02's trust roots and system users signed by the controller, 3 servers booted under
/// them, and the controller's system connection pointed at those servers.
async fn plane(extra_namespaces: &[&str]) -> (Rig, Topology) {
    let mut namespaces = vec![SYS];
    namespaces.extend_from_slice(extra_namespaces);
    let mut rig = Rig::bare(&namespaces).await;
    rig.start_controller(Settings {
        resync: Duration::from_secs(2),
        system_connection: Some(SystemConnection {
            namespace: SYS.into(),
            name: "auth".into(),
        }),
        ..Default::default()
    });
    rig.apply_story("02-auth-plane", "01-trust-roots.yaml", &[])
        .await;
    rig.apply_story("02-auth-plane", "02-system-users.yaml", &["NatsConnection"])
        .await;
    let op = wait_ready(&rig.api::<NatsOperator>(SYS), "demo", "True", "Signed").await;
    let trust = wait_ready(
        &rig.api::<NatsOperatorTrust>(SYS),
        "demo",
        "True",
        "Mirrored",
    )
    .await;
    let operator_jwt = str_at(&trust, "/status/operatorJWT").to_string();
    let sys_jwt = str_at(&trust, "/status/systemAccountJWT").to_string();
    let sys_pk = str_at(&op, "/status/systemAccount/publicKey").to_string();
    let topo = Topology::start(TopologySpec::cluster(3).with_version(VERSION).with_auth(
        Auth::Operator(OperatorMode {
            operator_jwt,
            system_account: sys_pk.clone(),
            preload: vec![(sys_pk, sys_jwt)],
        }),
    ))
    .await
    .expect("3 servers boot under the operator the controller signed");
    wait_ready(
        &rig.api::<NatsUser>(SYS),
        "auth-controller",
        "True",
        "Signed",
    )
    .await;
    // The system connection of story 02, pointed at the sim's servers (no TLS here).
    rig.apply(json!({
        "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
        "metadata": {"name": "auth", "namespace": SYS},
        "spec": {
            "servers": topo.client_urls(),
            "credentials": {"secretKeyRef": {"name": "auth-controller-creds", "key": "user.creds"}},
        },
    }))
    .await;
    let sys = wait_for(
        &rig.api::<NatsSystemAccount>(SYS),
        "system",
        "system account 3 of 3",
        |o| is(o, "Distributed", "True", "AllServersCurrent"),
    )
    .await;
    assert_eq!(message(&sys, "Distributed"), "3 of 3 servers hold this JWT");
    (rig, topo)
}

/// The creds file the controller wrote to `ns`/`secret`.
async fn creds_text(rig: &Rig, ns: &str, secret: &str) -> Option<String> {
    let s = rig.secret(ns, secret).await?;
    let b = s.data?.get("user.creds")?.0.clone();
    Some(String::from_utf8_lossy(&b).into_owned())
}

/// A round trip on `subject` by a client of `creds`: connected, subscribed, published, received.
async fn round_trip(topo: &Topology, creds: &str, subject: &str) -> Result<(), String> {
    let (client, _events) = connect(topo, creds, None).await;
    let client = client.map_err(|e| e.to_string())?;
    let mut sub = client
        .subscribe(subject.to_string())
        .await
        .map_err(|e| e.to_string())?;
    client
        .publish(subject.to_string(), "usable".into())
        .await
        .map_err(|e| e.to_string())?;
    client.flush().await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_millis(500), sub.next()).await {
        Ok(Some(_)) => Ok(()),
        _ => Err("no message back".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_applied_as_a_resource_is_usable_within_2s_and_each_preset_is_held_to_its_list()
{
    let (rig, topo) = plane(&[]).await;

    // Story 02's orders account and users, applied as resources; servers keep running.
    let applied = Instant::now();
    rig.apply_story("02-auth-plane", "04-orders.yaml", &[])
        .await;
    let usable = sim::wait::poll("orders-app usable", Duration::from_secs(10), || async {
        let Some(creds) = creds_text(&rig, SYS, "orders-app-creds").await else {
            return Err("no creds Secret yet".to_string());
        };
        round_trip(&topo, &creds, "orders.ping").await.map(Some)
    })
    .await;
    let latency = applied.elapsed();
    usable.unwrap_or_else(|e| panic!("{e}"));
    println!(
        "push-to-usable: NatsAccount + NatsUser applied -> creds Secret written -> JWT pushed -> round trip by orders-app: {} ms",
        latency.as_millis()
    );
    // A timing: judged in the nightly tier (sim::timings), reported in the gate.
    if sim::timings::judges_timings() {
        assert!(
            latency <= Duration::from_secs(2),
            "orders usable only after {latency:?}"
        );
    }

    // Distribution: every server of the roster holds the account JWT.
    let orders = wait_for(
        &rig.api::<NatsAccount>(SYS),
        "orders",
        "orders 3 of 3",
        |o| is(o, "Distributed", "True", "AllServersCurrent"),
    )
    .await;
    assert_eq!(orders["status"]["distribution"]["servers"], 3);
    assert_eq!(orders["status"]["distribution"]["current"], 3);
    assert_eq!(
        message(&orders, "Distributed"),
        "3 of 3 servers hold this JWT"
    );
    assert!(orders["status"]["distribution"]["lastPushTime"].is_string());
    let pushed = rig
        .api::<k8s_openapi::api::events::v1::Event>(SYS)
        .list(&Default::default())
        .await
        .unwrap();
    assert!(
        pushed
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("JWTPushed")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("orders")),
        "a JWTPushed Event about orders"
    );

    // A leafnode user, for the preset table.
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
        "metadata": {"name": "orders-leaf", "namespace": SYS},
        "spec": {
            "accountRef": {"kind": "NatsAccount", "name": "orders"},
            "preset": "leafnode",
            "credentials": {"secretKeyRef": {"name": "orders-leaf-creds"}},
        },
    }))
    .await;

    // Each preset's user, with the creds Secret the controller wrote.
    let cases: [(UserPreset, &str, &[&str]); 4] = [
        (
            UserPreset::ClusterController,
            "cluster-controller",
            &[
                "orders.x",
                "$SYS.REQ.SERVER.PING.CONNZ",
                "$SYS.REQ.ACCOUNT.NOSUCH.CLAIMS.LOOKUP",
            ],
        ),
        (
            UserPreset::JetStreamController,
            "jetstream-controller",
            &["$JS.API.STREAM.CREATE.X", "$SYS.REQ.SERVER.PING.VARZ"],
        ),
        (
            UserPreset::AuthController,
            "auth-controller",
            &["$SYS.REQ.SERVER.PING.JSZ", "orders.x"],
        ),
        (
            UserPreset::Readonly,
            "orders-reader",
            &[
                "orders.new",
                "$JS.API.STREAM.CREATE.ORDERS",
                "$JS.API.STREAM.DELETE.ORDERS",
            ],
        ),
    ];
    let mut table: Vec<(&str, &str, String, bool)> = Vec::new();
    for (preset, user, refused) in cases {
        wait_ready(&rig.api::<NatsUser>(SYS), user, "True", "Signed").await;
        let creds = creds_text(&rig, SYS, &format!("{user}-creds"))
            .await
            .unwrap_or_else(|| panic!("{user}-creds written"));
        let inbox = preset.is_system().then(|| preset.as_str());
        let (client, events) = connect(&topo, &creds, inbox).await;
        let client = client.unwrap_or_else(|e| panic!("{user} refused: {e}"));
        let mut judge = Judge {
            client,
            events,
            n: 0,
        };
        for g in presets::publish(preset) {
            let s = concrete(g.subject);
            let ok = judge.publish_allowed(&s).await;
            table.push((preset.as_str(), "publish", s.clone(), ok));
            assert!(
                ok,
                "{}: {s} is in its list but was refused",
                preset.as_str()
            );
        }
        for s in refused {
            let ok = judge.publish_allowed(s).await;
            table.push((preset.as_str(), "publish", s.to_string(), ok));
            assert!(
                !ok,
                "{}: {s} is outside its list but was let through",
                preset.as_str()
            );
        }
        if preset.is_system() {
            for other in presets::ALL
                .iter()
                .filter(|p| p.is_system() && **p != preset)
            {
                let s = format!("_INBOX.{}.>", other.as_str());
                let ok = judge.subscribe_allowed(&s).await;
                table.push((preset.as_str(), "subscribe", s.clone(), ok));
                assert!(!ok, "{} may subscribe to {s}", preset.as_str());
            }
        }
    }
    wait_ready(&rig.api::<NatsUser>(SYS), "orders-leaf", "True", "Signed").await;
    let leaf = creds_text(&rig, SYS, "orders-leaf-creds").await.unwrap();
    let (as_client, _) = connect(&topo, &leaf, None).await;
    assert!(as_client.is_err(), "a leafnode user connected as a client");
    table.push(("leafnode", "connect", "STANDARD".into(), false));

    println!("preset | op | subject | allowed");
    for (p, op, s, ok) in &table {
        println!("{p} | {op} | {s} | {ok}");
    }

    // Deleting a user: its key revoked in the account JWT on every server, its live connection
    // kicked, its creds Secret gone last, then the object.
    let app_creds = creds_text(&rig, SYS, "orders-app-creds").await.unwrap();
    let (live, mut events) = connect(&topo, &app_creds, None).await;
    let live = live.expect("orders-app connects before its deletion");
    let app = rig.api::<NatsUser>(SYS).get("orders-app").await.unwrap();
    let app_pk = app.status.as_ref().unwrap().public_key.clone().unwrap();
    // The live connection as the deletion's CONNZ finds it, and the Kicking message it gives.
    let orders_pk = rig.api::<NatsAccount>(SYS).get("orders").await.unwrap();
    let orders_pk = orders_pk.status.unwrap().public_key.unwrap();
    let sys_creds = creds_text(&rig, SYS, "auth-controller-creds")
        .await
        .unwrap();
    let (sys_client, _) = connect(&topo, &sys_creds, Some("auth-controller")).await;
    let wire = nats_wire::Wire::new(sys_client.expect("auth-controller user connects"));
    let connz = wire
        .ping_connz(
            &nats_wire::monitor::ConnzOptions::user_of_account(&orders_pk, &app_pk),
            nats_wire::Collect::expecting(3, Duration::from_secs(5)),
        )
        .await
        .unwrap();
    let targets = auth_controller::kick::targets(&connz, &app_pk);
    let kicking = auth_controller::kick::kicking_message(&app_pk, &targets);
    assert!(
        kicking.as_deref().is_some_and(|m| m.starts_with(&format!(
            "deleting: kicking 1 connection of revoked user {app_pk} on server N"
        ))),
        "{kicking:?} from {targets:?}"
    );
    // Every status the deletion writes, watched from the version read above.
    let watch = rig
        .api::<NatsUser>(SYS)
        .watch(
            &kube::api::WatchParams::default().fields("metadata.name=orders-app"),
            app.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap();
    let seen = tokio::spawn(async move {
        let mut readies = Vec::new();
        let mut watch = std::pin::pin!(watch);
        while let Some(Ok(e)) = watch.next().await {
            match e {
                kube::api::WatchEvent::Modified(u) => {
                    let u = serde_json::to_value(&u).unwrap();
                    if let Some(c) = sim::testkit::condition(&u, "Ready") {
                        readies.push((c.0, c.1, message(&u, "Ready")));
                    }
                }
                kube::api::WatchEvent::Deleted(_) => break,
                _ => {}
            }
        }
        readies
    });
    let deleted = Instant::now();
    rig.api::<NatsUser>(SYS)
        .delete("orders-app", &Default::default())
        .await
        .unwrap();
    sim::wait::poll("orders-app gone", Duration::from_secs(20), || async {
        match rig.api::<NatsUser>(SYS).get_opt("orders-app").await {
            Ok(None) => Ok(Some(())),
            Ok(Some(u)) => Err(format!("still there: {:?}", u.status)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let readies = tokio::time::timeout(Duration::from_secs(10), seen)
        .await
        .expect("the watch saw the deletion")
        .unwrap();
    println!("Ready during the deletion: {readies:?}");
    // The servers close a revoked user's connections themselves once they hold the revoking
    // JWT, so the controller's CONNZ usually finds none left and Kicking is seldom written; when
    // it is, it names the one connection and its server.
    // A user pass that comes before every server holds the revoking JWT writes Ready False
    // Distributing; one that finds the account's reconcile already done needs none (seen in CI).
    // Nothing else is written while it goes.
    assert!(
        readies.iter().all(|(status, reason, _)| (status == "False"
            && (reason == "Distributing" || reason == "Kicking"))
            || (status == "True" && reason == "Signed")),
        "the deletion wrote only Distributing or Kicking: {readies:?}"
    );
    for (_, _, m) in readies.iter().filter(|(_, reason, _)| reason == "Kicking") {
        assert!(
            m.starts_with(&format!(
                "deleting: kicking 1 connection of revoked user {app_pk} on server N"
            )),
            "{m}"
        );
    }
    println!(
        "user deleted -> revoked on 3 of 3 -> kicked -> Secret gone -> released: {} ms",
        deleted.elapsed().as_millis()
    );
    assert!(
        rig.secret(SYS, "orders-app-creds").await.is_none(),
        "creds Secret deleted"
    );
    let orders = rig.api::<NatsAccount>(SYS).get("orders").await.unwrap();
    let st = orders.status.unwrap();
    assert!(st.revocations.iter().any(|r| r.public_key == app_pk));
    let claims = nats_claims::decode::<nats_claims::Account>(st.jwt.as_deref().unwrap()).unwrap();
    assert!(
        claims.nats.revocations.contains_key(&app_pk),
        "the account JWT revokes it"
    );
    // The live connection was closed by the server.
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(e) = events.recv().await {
            if matches!(e, async_nats::Event::Disconnected) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(closed, Ok(true), "the deleted user's connection was closed");
    drop(live);
    let (again, _) = connect(&topo, &app_creds, None).await;
    assert!(again.is_err(), "a revoked user connects again");
}

/// A concrete subject a grant covers: `*` as one token, `>` as one token.
fn concrete(pattern: &str) -> String {
    pattern
        .split('.')
        .map(|t| match t {
            "*" => "NOSUCH",
            ">" => "x",
            t => t,
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn plain_user(name: &str, ns: &str, account: &str) -> serde_json::Value {
    json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "accountRef": {"kind": "NatsAccount", "name": account},
            "credentials": {"secretKeyRef": {"name": format!("{name}-creds")}},
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_importer_reaches_a_private_service_export_through_its_activation() {
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
    core["spec"]["imports"] = json!(imports);
    rig.apply(core).await;
    rig.apply(plain_user("checker", "team-monitoring", "monitoring"))
        .await;
    rig.apply(plain_user("caller", "team-core", "core")).await;

    for (ns, name) in [("team-monitoring", "monitoring"), ("team-core", "core")] {
        wait_for(
            &rig.api::<NatsAccount>(ns),
            name,
            &format!("{name} 3 of 3"),
            |o| {
                is(o, "Ready", "True", "Signed")
                    && is(o, "Distributed", "True", "AllServersCurrent")
            },
        )
        .await;
    }
    let core = rig
        .api::<NatsAccount>("team-core")
        .get("core")
        .await
        .unwrap();
    let execute = core
        .status
        .as_ref()
        .unwrap()
        .imports
        .iter()
        .find(|i| i.export.as_deref() == Some("execute"))
        .cloned()
        .unwrap();
    assert_eq!(
        execute.activation,
        Some(nats_api::auth::ActivationSource::Signed)
    );

    wait_ready(
        &rig.api::<NatsUser>("team-monitoring"),
        "checker",
        "True",
        "Signed",
    )
    .await;
    wait_ready(
        &rig.api::<NatsUser>("team-core"),
        "caller",
        "True",
        "Signed",
    )
    .await;
    let checker = creds_text(&rig, "team-monitoring", "checker-creds")
        .await
        .unwrap();
    let caller = creds_text(&rig, "team-core", "caller-creds").await.unwrap();
    let (responder, _) = connect(&topo, &checker, None).await;
    let responder = responder.expect("checker connects");
    let mut requests = responder.subscribe("checks.execute.*").await.unwrap();
    responder.flush().await.unwrap();
    let serve = tokio::spawn({
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
    let (client, _) = connect(&topo, &caller, None).await;
    let client = client.expect("caller connects");
    // The import may reach the servers' interest graph a moment after the JWT: poll.
    let answer = sim::wait::poll(
        "the private service answers",
        Duration::from_secs(10),
        || {
            let client = client.clone();
            async move {
                match tokio::time::timeout(
                    Duration::from_secs(1),
                    client.request("checks.execute.disk", "go".into()),
                )
                .await
                {
                    Ok(Ok(m)) => Ok(Some(String::from_utf8_lossy(&m.payload).into_owned())),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("timed out".into()),
                }
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answer, "ran checks.execute.disk");
    serve.abort();

    // An account the private export does not list cannot import it.
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "stranger", "namespace": "team-core"},
        "spec": {
            "operatorRef": {"name": "demo", "namespace": SYS},
            "imports": [{"accountRef": {"kind": "NatsAccount", "name": "monitoring", "namespace": "team-monitoring"}, "export": "execute"}],
        },
    }))
    .await;
    let stranger = wait_ready(
        &rig.api::<NatsAccount>("team-core"),
        "stranger",
        "False",
        "ImportsUnresolved",
    )
    .await;
    assert!(message(&stranger, "Ready").contains("does not list this account"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn withdrawing_a_grant_deletes_the_account_from_every_server() {
    let (rig, topo) = plane(&["team-payments"]).await;
    rig.apply_story("04-team-self-service", "02-platform-grant.yaml", &[])
        .await;
    rig.apply_story(
        "04-team-self-service",
        "01-team-payments.yaml",
        &["NatsStream"],
    )
    .await;
    let accounts = rig.api::<NatsAccount>("team-payments");
    let payments = wait_for(&accounts, "payments", "payments 3 of 3", |o| {
        is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
    let pk = str_at(&payments, "/status/publicKey").to_string();
    wait_ready(
        &rig.api::<NatsUser>("team-payments"),
        "payments-app",
        "True",
        "Signed",
    )
    .await;
    let app = creds_text(&rig, "team-payments", "payments-app-creds")
        .await
        .unwrap();
    round_trip(&topo, &app, "payments.ping")
        .await
        .expect("payments-app is usable while granted");

    // The auth-controller system user, to ask the servers what they hold.
    let sys = creds_text(&rig, SYS, "auth-controller-creds")
        .await
        .unwrap();
    let (client, _) = connect(&topo, &sys, Some("auth-controller")).await;
    let wire = nats_wire::Wire::new(client.expect("auth-controller user connects"));

    rig.api::<nats_api::nats::NatsReferenceGrant>(SYS)
        .delete("team-payments-accounts", &Default::default())
        .await
        .unwrap();
    let withdrawn = Instant::now();
    sim::wait::poll(
        "no server holds payments",
        Duration::from_secs(20),
        || async {
            let answers = wire
                .claims_lookup(
                    &pk,
                    nats_wire::Collect::expecting(3, Duration::from_secs(2)),
                )
                .await
                .map_err(|e| e.to_string())?;
            if answers.len() == 3 && answers.iter().all(|a| a.jwt().is_none()) {
                Ok(Some(()))
            } else {
                Err(format!(
                    "{} answers, {} holding a JWT",
                    answers.len(),
                    answers.iter().filter(|a| a.jwt().is_some()).count()
                ))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "grant withdrawn -> CLAIMS.DELETE -> no server holds the account: {} ms",
        withdrawn.elapsed().as_millis()
    );
    let emptied = wait_for(&accounts, "payments", "payments JWT emptied", |o| {
        is(o, "Ready", "False", "ReferenceNotPermitted") && o["status"].get("jwt").is_none()
    })
    .await;
    assert!(
        message(&emptied, "Ready").contains("no longer signed"),
        "Ready says the account is no longer signed: {}",
        message(&emptied, "Ready")
    );
    let (again, _) = connect(&topo, &app, None).await;
    assert!(again.is_err(), "a user of a deleted account still connects");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_made_elsewhere_is_adopted_with_its_key_users_and_revocations() {
    let (rig, topo) = plane(&[]).await;
    let sys = creds_text(&rig, SYS, "auth-controller-creds")
        .await
        .unwrap();
    let (client, _) = connect(&topo, &sys, Some("auth-controller")).await;
    let wire = nats_wire::Wire::new(client.expect("auth-controller user connects"));
    let op_signing = {
        let s = rig.secret(SYS, "demo-operator-signing-1").await.unwrap();
        let b = s.data.unwrap()["seed"].0.clone();
        nats_claims::NKey::from_seed(&b).unwrap()
    };

    // Made elsewhere (as with nsc): identity, signing key, a mapping, a revoked user, a user.
    use nats_claims::{AccountClaims, Creds, KeyKind, NKey, UserClaims, WeightedMapping};
    let identity = NKey::generate(KeyKind::Account);
    let signing = NKey::generate(KeyKind::Account);
    let revoked_user = NKey::generate(KeyKind::User).public_key();
    let now = common::now_secs();
    let mut legacy = AccountClaims::new(identity.public_key())
        .name("legacy")
        .signing_key(signing.public_key())
        .revoke_at(revoked_user.clone(), now - 60);
    legacy.nats.mappings.insert(
        "legacy.>".into(),
        vec![WeightedMapping {
            subject: "orders.>".into(),
            weight: 100,
            cluster: String::new(),
        }],
    );
    let legacy_jwt = legacy.encode_issued_at(&op_signing, now - 10).unwrap();
    let pushed = wire
        .claims_update(
            &legacy_jwt,
            nats_wire::Collect::expecting(3, Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert!(pushed.failures.is_empty(), "{:?}", pushed.failures);
    let old_user = NKey::generate(KeyKind::User);
    let old_jwt = UserClaims::new(old_user.public_key())
        .name("made-elsewhere")
        .issuer_account(identity.public_key())
        .encode(&signing)
        .unwrap();
    let old_creds = Creds::render_key(&old_jwt, &old_user).unwrap();
    round_trip(&topo, old_creds.expose(), "elsewhere.ping")
        .await
        .expect("the pre-adoption user works");

    rig.apply(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "legacy-keys", "namespace": SYS},
        "stringData": {"seed": identity.seed().expose(), "users.nk": signing.seed().expose()},
    }))
    .await;
    let mut doc = json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "legacy", "namespace": SYS},
        "spec": {
            "operatorRef": {"name": "demo"},
            "keys": {
                "identity": {"secretKeyRef": {"name": "legacy-keys"}},
                "signing": [{"name": "users", "secretKeyRef": {"name": "legacy-keys", "key": "users.nk"}}],
            },
        },
    });
    rig.apply(doc.clone()).await;
    let accounts = rig.api::<NatsAccount>(SYS);
    let refused = wait_ready(&accounts, "legacy", "False", "AdoptionDropsClaims").await;
    assert!(
        message(&refused, "Ready").contains("mappings"),
        "{}",
        message(&refused, "Ready")
    );

    doc["spec"]["adoption"] = json!({"droppedClaims": "Accept"});
    rig.apply(doc).await;
    let adopted = wait_for(&accounts, "legacy", "legacy adopted, 3 of 3", |o| {
        is(o, "Ready", "True", "Signed") && is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
    let a = nats_claims::decode::<nats_claims::Account>(str_at(&adopted, "/status/jwt")).unwrap();
    assert_eq!(
        a.subject,
        identity.public_key(),
        "the adopted account keeps its key"
    );
    assert!(
        a.nats.revocations.contains_key(&revoked_user),
        "revocations of the adopted JWT are carried over"
    );
    assert!(
        a.nats.mappings.is_empty(),
        "the dropped mapping is gone, as accepted"
    );
    assert!(
        adopted["status"]["revocations"]
            .to_string()
            .contains(&revoked_user),
        "and recorded in status.revocations"
    );
    round_trip(&topo, old_creds.expose(), "elsewhere.ping")
        .await
        .expect("a user issued before adoption keeps working");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_never_pushed_older_than_a_jwt_the_servers_hold() {
    let (rig, topo) = plane(&[]).await;
    rig.apply_story("02-auth-plane", "04-orders.yaml", &["NatsUser"])
        .await;
    let accounts = rig.api::<NatsAccount>(SYS);
    let orders = wait_for(&accounts, "orders", "orders 3 of 3", |o| {
        is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
    let ours = nats_claims::decode::<nats_claims::Account>(str_at(&orders, "/status/jwt")).unwrap();

    // Someone pushes a JWT for the account issued well after ours (same operator signing key).
    let op_signing = {
        let s = rig.secret(SYS, "demo-operator-signing-1").await.unwrap();
        nats_claims::NKey::from_seed(&s.data.unwrap()["seed"].0).unwrap()
    };
    let ahead = ours.issued_at + 100;
    let mut newer = ours.clone();
    newer.nats.limits.account.conn = 7;
    let newer_jwt = newer.encode_issued_at(&op_signing, ahead).unwrap();
    let sys = creds_text(&rig, SYS, "auth-controller-creds")
        .await
        .unwrap();
    let (client, _) = connect(&topo, &sys, Some("auth-controller")).await;
    let wire = nats_wire::Wire::new(client.expect("auth-controller user connects"));
    wire.claims_update(
        &newer_jwt,
        nats_wire::Collect::expecting(3, Duration::from_secs(5)),
    )
    .await
    .unwrap();

    // A spec change: the controller signs past the newer JWT, never under it.
    let mut doc = sim::testkit::story_docs("docs/stories/02-auth-plane/04-orders.yaml")
        .into_iter()
        .find(|d| d["kind"] == "NatsAccount")
        .unwrap();
    doc["spec"]["limits"]["connections"] = json!(300);
    rig.apply(doc).await;
    let signed = wait_for(
        &accounts,
        "orders",
        "orders re-signed past the held JWT",
        |o| {
            is(o, "Distributed", "True", "AllServersCurrent")
                && nats_claims::decode::<nats_claims::Account>(str_at(o, "/status/jwt"))
                    .is_ok_and(|a| a.nats.limits.account.conn == 300)
        },
    )
    .await;
    let a = nats_claims::decode::<nats_claims::Account>(str_at(&signed, "/status/jwt")).unwrap();
    assert!(
        a.issued_at > ahead,
        "signed at {} over a held JWT issued at {ahead}",
        a.issued_at
    );
    let held = wire
        .claims_lookup(
            &a.subject,
            nats_wire::Collect::expecting(3, Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(held.len(), 3);
    assert!(
        held.iter()
            .all(|h| h.jwt() == Some(str_at(&signed, "/status/jwt")))
    );
}

/// A system account adopted with keys brought from elsewhere (§5.2): the servers already hold a
/// JWT for its key carrying a mapping the spec cannot say, so it is refused with
/// AdoptionDropsClaims, naming the mappings, until spec.adoption.droppedClaims is Accept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_account_adopted_over_a_richer_jwt_is_refused_until_accepted() {
    use nats_claims::{KeyKind, NKey, WeightedMapping};
    let mut rig = Rig::bare(&[SYS]).await;
    rig.start_controller(Settings {
        resync: Duration::from_secs(2),
        system_connection: Some(SystemConnection {
            namespace: SYS.into(),
            name: "auth".into(),
        }),
        ..Default::default()
    });
    let identity = NKey::generate(KeyKind::Account);
    rig.apply(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "system-keys", "namespace": SYS},
        "stringData": {"seed": identity.seed().expose()},
    }))
    .await;
    let mut sys_doc = json!(null);
    for mut doc in sim::testkit::story_docs("docs/stories/02-auth-plane/01-trust-roots.yaml") {
        if doc["kind"] == "NatsSystemAccount" {
            doc["spec"]["keys"] = json!({"identity": {"secretKeyRef": {"name": "system-keys"}}});
            sys_doc = doc.clone();
        }
        rig.apply(doc).await;
    }
    rig.apply_story("02-auth-plane", "02-system-users.yaml", &["NatsConnection"])
        .await;
    let op = wait_ready(&rig.api::<NatsOperator>(SYS), "demo", "True", "Signed").await;
    let trust = wait_ready(
        &rig.api::<NatsOperatorTrust>(SYS),
        "demo",
        "True",
        "Mirrored",
    )
    .await;
    let sys_pk = str_at(&op, "/status/systemAccount/publicKey").to_string();
    assert_eq!(
        sys_pk,
        identity.public_key(),
        "the brought key is the one signed"
    );
    let op_signing = {
        let s = rig.secret(SYS, "demo-operator-signing-1").await.unwrap();
        let b = s.data.unwrap()["seed"].0.clone();
        NKey::from_seed(&b).unwrap()
    };
    // Made elsewhere: the same system account (its signing keys, so its users connect) plus a
    // mapping, which is what the servers boot holding.
    let mut legacy =
        nats_claims::decode::<nats_claims::Account>(str_at(&trust, "/status/systemAccountJWT"))
            .unwrap();
    legacy.nats.mappings.insert(
        "legacy.>".into(),
        vec![WeightedMapping {
            subject: "orders.>".into(),
            weight: 100,
            cluster: String::new(),
        }],
    );
    let legacy_jwt = legacy
        .encode_issued_at(&op_signing, common::now_secs() - 10)
        .unwrap();
    let topo = Topology::start(TopologySpec::cluster(3).with_version(VERSION).with_auth(
        Auth::Operator(OperatorMode {
            operator_jwt: str_at(&trust, "/status/operatorJWT").to_string(),
            system_account: sys_pk.clone(),
            preload: vec![(sys_pk.clone(), legacy_jwt)],
        }),
    ))
    .await
    .expect("3 servers boot holding the system account JWT made elsewhere");
    wait_ready(
        &rig.api::<NatsUser>(SYS),
        "auth-controller",
        "True",
        "Signed",
    )
    .await;
    rig.apply(json!({
        "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
        "metadata": {"name": "auth", "namespace": SYS},
        "spec": {
            "servers": topo.client_urls(),
            "credentials": {"secretKeyRef": {"name": "auth-controller-creds", "key": "user.creds"}},
        },
    }))
    .await;
    let systems = rig.api::<NatsSystemAccount>(SYS);
    let refused = wait_ready(&systems, "system", "False", "AdoptionDropsClaims").await;
    assert!(
        message(&refused, "Ready").contains("mappings"),
        "{}",
        message(&refused, "Ready")
    );
    assert!(
        refused["status"]["distribution"].is_null(),
        "nothing was pushed while refused"
    );

    sys_doc["spec"]["adoption"] = json!({"droppedClaims": "Accept"});
    rig.apply(sys_doc).await;
    wait_for(&systems, "system", "system account adopted, 3 of 3", |o| {
        is(o, "Ready", "True", "Signed") && is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
}

/// A deleted account is deleted from a server that comes back holding it: one that was down
/// during the deletion, and one restarted from a snapshot of its resolver directory taken before
/// the deletion (a restored volume; the resolver's catch-up sync only adds). Either comes back
/// under a new server id, having confirmed nothing: the controller sends it CLAIMS.DELETE within
/// seconds of its answering STATSZ, whatever the NatsOperator's pass interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_returns_holding_a_deleted_account_is_sent_the_deletion() {
    let (rig, mut topo) = plane(&[]).await;
    let accounts = rig.api::<NatsAccount>(SYS);
    let sys = creds_text(&rig, SYS, "auth-controller-creds")
        .await
        .unwrap();
    let (client, _) = connect(&topo, &sys, Some("auth-controller")).await;
    let wire = nats_wire::Wire::new(client.expect("auth-controller user connects"));
    // How many of `n` answering servers hold `pk`.
    let holding = async |pk: &str, n: usize| -> Result<usize, String> {
        let answers = wire
            .claims_lookup(pk, nats_wire::Collect::expecting(n, Duration::from_secs(2)))
            .await
            .map_err(|e| e.to_string())?;
        if answers.len() < n {
            return Err(format!("{} of {n} servers answered", answers.len()));
        }
        Ok(answers.iter().filter(|a| a.jwt().is_some()).count())
    };
    let signed = async |name: &str| -> String {
        rig.apply(json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
            "metadata": {"name": name, "namespace": SYS},
            "spec": {"operatorRef": {"name": "demo"}},
        }))
        .await;
        let a = wait_for(&accounts, name, &format!("{name} 3 of 3"), |o| {
            is(o, "Distributed", "True", "AllServersCurrent")
        })
        .await;
        str_at(&a, "/status/publicKey").to_string()
    };
    let delete = async |name: &str, pk: &str, up: usize| {
        accounts.delete(name, &Default::default()).await.unwrap();
        sim::wait::poll(
            &format!("{name} gone from the {up} servers up"),
            WAIT,
            || async {
                if accounts
                    .get_opt(name)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_some()
                {
                    return Err(format!("{name} still there"));
                }
                match holding(pk, up).await? {
                    0 => Ok(Some(())),
                    n => Err(format!("{n} servers hold it")),
                }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    };
    // From its start, until no server of the three holds `pk`; the time it took.
    let deleted_everywhere = async |pk: &str, what: &str| {
        let back = Instant::now();
        sim::wait::poll(
            &format!("{what}: no server of the three holds the account"),
            Duration::from_secs(30),
            || async {
                match holding(pk, 3).await? {
                    0 => Ok(Some(())),
                    n => Err(format!("{n} of 3 hold it")),
                }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let took = back.elapsed();
        println!(
            "{what}: server started -> CLAIMS.DELETE -> no server holds the deleted account: {} ms",
            took.as_millis()
        );
        // A timing: judged in the nightly tier (sim::timings), reported in the gate.
        if sim::timings::judges_timings() {
            assert!(
                took <= Duration::from_secs(5),
                "{what}: deleted only after {took:?}"
            );
        }
    };
    let away = topo.server_names()[2].clone();
    let jwt_dir = topo
        .server(&away)
        .expect("the third server")
        .dir()
        .join("jwt");

    // Down during the deletion.
    let first = signed("down-during").await;
    topo.server_mut(&away)
        .expect("the third server")
        .sigterm(Duration::from_secs(10))
        .await
        .expect("the third server stops");
    delete("down-during", &first, 2).await;
    topo.server_mut(&away)
        .expect("the third server")
        .start()
        .await
        .expect("the third server starts again");
    deleted_everywhere(&first, "down during the deletion").await;

    // Restored from a snapshot taken before the deletion.
    let second = signed("restored").await;
    let snapshot = topo.scratch("jwt-snapshot");
    copy_dir(&jwt_dir, &snapshot);
    assert!(
        std::fs::read_dir(&snapshot)
            .expect("snapshot")
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&second)),
        "the snapshot holds the account's JWT"
    );
    delete("restored", &second, 3).await;
    topo.server_mut(&away)
        .expect("the third server")
        .sigterm(Duration::from_secs(10))
        .await
        .expect("the third server stops");
    std::fs::remove_dir_all(&jwt_dir).expect("the resolver directory removed");
    copy_dir(&snapshot, &jwt_dir);
    topo.server_mut(&away)
        .expect("the third server")
        .start()
        .await
        .expect("the third server starts from the snapshot");
    deleted_everywhere(&second, "restored from a snapshot").await;
}

/// Copies the files of directory `from` into `to` (created).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("target directory");
    for e in std::fs::read_dir(from).expect("source directory").flatten() {
        if e.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
        }
    }
}

/// A user whose key is replaced — its creds Secret deleted, so the controller writes it afresh
/// under a new key — has the old key revoked from that moment: status.replacedKeys holds it until
/// the account JWT revokes it, the servers take that JWT and close the old key's connection, the
/// old creds are refused, and the new ones work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_user_key_is_revoked_and_its_connection_closed() {
    let (rig, topo) = plane(&[]).await;
    let accounts = rig.api::<NatsAccount>(SYS);
    let users = rig.api::<NatsUser>(SYS);
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
        "metadata": {"name": "keys", "namespace": SYS},
        "spec": {"operatorRef": {"name": "demo"}},
    }))
    .await;
    rig.apply(json!({
        "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsUser",
        "metadata": {"name": "rotating", "namespace": SYS},
        "spec": {
            "accountRef": {"kind": "NatsAccount", "name": "keys"},
            "credentials": {"secretKeyRef": {"name": "rotating-creds"}},
            "permissions": {
                "publish": {"allow": ["keys.>"]},
                "subscribe": {"allow": ["keys.>", "_INBOX.>"]},
            },
        },
    }))
    .await;
    wait_for(&accounts, "keys", "keys 3 of 3", |o| {
        is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;
    let user = wait_ready(&users, "rotating", "True", "Signed").await;
    let old_pk = str_at(&user, "/status/publicKey").to_string();
    let old_creds = creds_text(&rig, SYS, "rotating-creds").await.unwrap();
    sim::wait::poll("the old creds usable", WAIT, || async {
        round_trip(&topo, &old_creds, "keys.ping").await.map(Some)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let (old_client, mut old_events) = connect(&topo, &old_creds, None).await;
    let old_client = old_client.expect("the old key connects");

    // The Secret lost: written afresh under a new key.
    rig.api::<Secret>(SYS)
        .delete("rotating-creds", &Default::default())
        .await
        .unwrap();
    let replaced_at = Instant::now();
    let renewed = wait_for(&users, "rotating", "rotating under a new key", |o| {
        is(o, "Ready", "True", "Signed")
            && o["status"]["publicKey"]
                .as_str()
                .is_some_and(|k| k != old_pk)
    })
    .await;
    let new_pk = str_at(&renewed, "/status/publicKey").to_string();
    // The account JWT revokes the old key and every server holds it; replacedKeys then empties.
    let keys = wait_for(
        &accounts,
        "keys",
        "keys revoking the old key, 3 of 3",
        |o| {
            let revokes = o["status"]["jwt"]
                .as_str()
                .and_then(|j| nats_claims::decode_unverified::<nats_claims::Account>(j).ok())
                .is_some_and(|c| c.nats.revocations.contains_key(&old_pk));
            revokes && is(o, "Distributed", "True", "AllServersCurrent")
        },
    )
    .await;
    let claims =
        nats_claims::decode_unverified::<nats_claims::Account>(str_at(&keys, "/status/jwt"))
            .expect("the account JWT");
    assert!(
        !claims.nats.revocations.contains_key(&new_pk),
        "the new key is not revoked"
    );
    wait_for(&users, "rotating", "replacedKeys emptied", |o| {
        o["status"]
            .get("replacedKeys")
            .and_then(|r| r.as_array())
            .is_none_or(|r| r.is_empty())
    })
    .await;

    // The server closed the old key's connection; the old creds are refused, the new ones work.
    let closed = tokio::time::timeout(WAIT, async {
        while let Some(e) = old_events.recv().await {
            if matches!(e, async_nats::Event::Disconnected) {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(closed, Ok(true)),
        "the old key's connection is still {:?}",
        old_client.connection_state()
    );
    println!(
        "creds Secret lost -> new key signed -> old key revoked on 3 of 3 -> its connection closed: {} ms",
        replaced_at.elapsed().as_millis()
    );
    let (refused, _) = connect(&topo, &old_creds, None).await;
    assert!(refused.is_err(), "the replaced key still connects");
    let new_creds = creds_text(&rig, SYS, "rotating-creds").await.unwrap();
    sim::wait::poll("the new creds usable", WAIT, || async {
        round_trip(&topo, &new_creds, "keys.ping").await.map(Some)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// §5.3's roster with memory, for a server that stopped rather than fell silent: it announced
/// its shutdown (`$SYS.SERVER.<id>.LAMEDUCK`, which the auth-controller preset may subscribe
/// to), so the controller forgets it after the short window instead of the 15 minutes a silent
/// server is remembered, and an account applied after it, and the accounts before it, read all
/// the servers left current. A NatsCluster deleted or scaled down stops its servers this way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_announced_its_shutdown_leaves_the_roster_after_the_short_window() {
    let (rig, mut topo) = plane(&[]).await;
    let accounts = rig.api::<NatsAccount>(SYS);
    let apply = async |name: &str| {
        rig.apply(json!({
            "apiVersion": "auth.nats.mikluko.io/v1beta1", "kind": "NatsAccount",
            "metadata": {"name": name, "namespace": SYS},
            "spec": {"operatorRef": {"name": "demo"}},
        }))
        .await;
    };
    apply("before").await;
    wait_for(&accounts, "before", "before 3 of 3", |o| {
        is(o, "Distributed", "True", "AllServersCurrent")
    })
    .await;

    // Stopped as a pod's preStop stops it: lame duck mode (announced as it starts), clients
    // evicted over the sim's 30 s lame duck duration, then the exit. The server chosen is the one
    // the controller's system connection is on, which hears no LAMEDUCK event of its own server
    // (only the other servers' clients do) but the lame duck INFO the server sends its clients.
    // Once the controller listens: its connection subscribed to the lame duck events.
    let away = sim::wait::poll(
        "the server the controller is connected to, its connection subscribed",
        WAIT,
        || async {
            for name in topo.server_names() {
                let connz = topo.monitor(&name, "/connz?subs=1").await?;
                let listening = connz["connections"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| c["name"] == "auth-controller")
                    .any(|c| {
                        c["subscriptions_list"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|s| s == nats_wire::events::LAME_DUCK_EVENTS)
                    });
                if listening {
                    return Ok(Some(name));
                }
            }
            Err("no auth-controller connection subscribed to lame duck events".to_string())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    println!("stopping {away}, the server the controller's connection is on");
    let stopped = Instant::now();
    topo.server_mut(&away)
        .expect("the third server")
        .lame_duck()
        .expect("the third server enters lame duck mode");
    apply("after").await;
    // The lame duck duration, the window, a pass to notice and one to count: well under the 15
    // minutes a silent server is remembered.
    let within = Duration::from_secs(30)
        + auth_controller::roster::FORGET_SHUT_DOWN_AFTER
        + Duration::from_secs(60);
    for name in ["after", "before"] {
        let a = sim::testkit::wait_for_within(
            &accounts,
            name,
            &format!("{name}: 2 of 2 once {away} is forgotten"),
            within,
            |o| {
                is(o, "Distributed", "True", "AllServersCurrent")
                    && message(o, "Distributed") == "2 of 2 servers hold this JWT"
            },
        )
        .await;
        let roster: Vec<&str> = a
            .pointer("/status/distribution/roster")
            .and_then(|r| r.as_array())
            .map(|r| {
                r.iter()
                    .filter_map(|s| s.get("name").and_then(|n| n.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            !roster.contains(&away.as_str()) && roster.len() == 2,
            "{name}: the roster recorded {roster:?}"
        );
    }
    println!(
        "{away} stopped -> forgotten, both accounts 2 of 2: {} ms",
        stopped.elapsed().as_millis()
    );
}
