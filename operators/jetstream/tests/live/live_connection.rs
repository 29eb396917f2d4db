//! Live tier of NatsConnection dialing: a real nats-server 2.15 in operator mode (sim) admits a
//! user whose creds come from a Secret (Ready Connected), refuses a well-formed creds file of an
//! account it does not trust (ConnectFailed), and a closed port is ConnectFailed too.

use std::collections::BTreeMap;
use std::time::Duration;

use jetstream_controller::dialing::{Ready, Secrets, dial_config, ready_after_dial};
use nats_api::nats::NatsConnectionSpec;
use nats_claims::{KeyKind, NKey};
use serde_json::json;
use sim::topology::{Auth, Topology, TopologySpec};
use sim::trust::Roots;

/// A user of `account` (signed by the account's identity key).
fn user_creds(account: &NKey) -> String {
    sim::trust::user_creds(account, "controller").expect("user creds")
}

/// One operator-mode server trusting an operator with a system account and an APP account.
async fn plane() -> (Topology, NKey) {
    let roots = Roots::sign("plane").expect("trust roots");
    let (app, app_jwt) = roots.account("APP").expect("APP JWT");
    let spec = TopologySpec::cluster(1).with_auth(Auth::Operator(
        roots.operator_mode(&[(app.public_key(), app_jwt)]),
    ));
    let topo = Topology::start(spec)
        .await
        .expect("operator-mode server starts");
    (topo, app)
}

fn connection(servers: Vec<String>) -> NatsConnectionSpec {
    serde_json::from_value(json!({
        "servers": servers,
        "credentials": {"secretKeyRef": {"name": "app-user"}}
    }))
    .expect("a NatsConnection spec")
}

fn secrets(creds: &str) -> Secrets {
    BTreeMap::from([(
        "app-user".to_string(),
        BTreeMap::from([("user.creds".to_string(), creds.as_bytes().to_vec())]),
    )])
}

async fn dial_ready(spec: &NatsConnectionSpec, secrets: &Secrets) -> Ready {
    let config = match dial_config(spec, secrets) {
        Ok(c) => c.with_connect_timeout(Duration::from_secs(5)),
        Err(ready) => return ready,
    };
    let dialed = nats_wire::dial(&config).await;
    ready_after_dial(spec, dialed.as_ref().map(|_| ()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creds_from_a_secret_connect_and_untrusted_or_unreachable_fail() {
    let (topo, app) = plane().await;
    let spec = connection(topo.client_urls());

    let ready = dial_ready(&spec, &secrets(&user_creds(&app))).await;
    assert_eq!(ready, Ready::Connected, "{}", ready.message());

    // Well-formed creds of an account the operator never signed: the server refuses the user.
    let stranger = NKey::generate(KeyKind::Account);
    let ready = dial_ready(&spec, &secrets(&user_creds(&stranger))).await;
    assert_eq!(ready.reason(), "ConnectFailed", "{}", ready.message());

    // Creds that are not a creds file never reach the server.
    let ready = dial_ready(&spec, &secrets("not creds")).await;
    assert_eq!(ready.reason(), "InvalidSecret", "{}", ready.message());

    // The Secret missing.
    let ready = dial_ready(&spec, &Secrets::new()).await;
    assert_eq!(ready.reason(), "SecretNotFound", "{}", ready.message());

    // Nothing listens on the port.
    let closed = connection(vec![format!(
        "nats://127.0.0.1:{}",
        sim::ports::free_port()
    )]);
    let ready = dial_ready(&closed, &secrets(&user_creds(&app))).await;
    assert_eq!(ready.reason(), "ConnectFailed", "{}", ready.message());
}
