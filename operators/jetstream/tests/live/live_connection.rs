//! Live tier of NatsConnection dialing: a real nats-server 2.15 in operator mode (sim) admits a
//! user whose creds come from a Secret (Ready Connected), refuses a well-formed creds file of an
//! account it does not trust (ConnectFailed), and a closed port is ConnectFailed too.

use std::collections::BTreeMap;
use std::time::Duration;

use jetstream_controller::connection::{Ready, Secrets, dial_config, ready_after_dial};
use nats_api::nats::NatsConnectionSpec;
use nats_claims::{AccountClaims, Creds, KeyKind, NKey, OperatorClaims, UserClaims};
use serde_json::json;
use sim::topology::{Auth, OperatorMode, Topology, TopologySpec};

/// A user of `account` (signed by the account's identity key).
fn user_creds(account: &NKey) -> String {
    let user = NKey::generate(KeyKind::User);
    let jwt = UserClaims::new(user.public_key())
        .name("controller")
        .encode(account)
        .expect("user JWT");
    Creds::render_key(&jwt, &user)
        .expect("creds")
        .expose()
        .to_string()
}

/// One operator-mode server trusting an operator with a system account and an APP account.
async fn plane() -> (Topology, NKey) {
    let operator = NKey::generate(KeyKind::Operator);
    let sys = NKey::generate(KeyKind::Account);
    let app = NKey::generate(KeyKind::Account);
    let operator_jwt = OperatorClaims::new(operator.public_key())
        .name("plane")
        .system_account(sys.public_key())
        .encode(&operator)
        .expect("operator JWT");
    let sys_jwt = AccountClaims::new(sys.public_key())
        .name("SYS")
        .encode(&operator)
        .expect("SYS JWT");
    let app_jwt = AccountClaims::new(app.public_key())
        .name("APP")
        .encode(&operator)
        .expect("APP JWT");
    let spec = TopologySpec::cluster(1).with_auth(Auth::Operator(OperatorMode {
        operator_jwt,
        system_account: sys.public_key(),
        preload: vec![(sys.public_key(), sys_jwt), (app.public_key(), app_jwt)],
    }));
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
