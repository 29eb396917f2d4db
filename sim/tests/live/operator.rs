//! Live: a 3-server cluster in operator mode (trusted operator, system account, full resolver with
//! preload) accepts an account JWT pushed over $SYS.REQ.CLAIMS.UPDATE, and that account's user
//! runs JetStream on it. The JWTs come from `nats-claims`.

use std::time::Duration;

use async_nats::{ConnectOptions, jetstream};
use nats_claims::{AccountClaims, JetStreamLimits, KeyKind, NKey};
use sim::{Auth, Topology, TopologySpec};

const T: Duration = Duration::from_secs(30);

fn user_creds(account: &NKey) -> String {
    sim::trust::user_creds(account, "u").unwrap()
}

#[tokio::test]
async fn operator_mode_cluster_accepts_a_pushed_account() {
    let roots = sim::trust::Roots::sign("sim").unwrap();
    let (operator, sys) = (&roots.operator, &roots.system);
    let spec = TopologySpec::cluster(3).with_auth(Auth::Operator(roots.operator_mode(&[])));
    let topo = Topology::start(spec).await.unwrap();
    let cfg = std::fs::read_to_string(topo.servers()[0].config_path()).unwrap();
    assert!(
        cfg.contains("type: full") && cfg.contains("resolver_preload"),
        "{cfg}"
    );

    let sys_client = ConnectOptions::with_credentials(&user_creds(sys))
        .unwrap()
        .connect(topo.server_addrs())
        .await
        .unwrap();

    // An account unknown to the servers: its user is refused until the account JWT is pushed.
    let app = NKey::generate(KeyKind::Account);
    let app_creds = user_creds(&app);
    let refused = ConnectOptions::with_credentials(&app_creds)
        .unwrap()
        .connection_timeout(Duration::from_secs(3))
        .connect(topo.server_addrs())
        .await;
    assert!(refused.is_err(), "a user of an unpushed account connected");

    let app_jwt = AccountClaims::new(app.public_key())
        .name("APP")
        .jetstream(JetStreamLimits {
            memory_storage: -1,
            disk_storage: -1,
            streams: -1,
            consumer: -1,
            ..Default::default()
        })
        .encode(operator)
        .unwrap();
    let answer = sys_client
        .request("$SYS.REQ.CLAIMS.UPDATE", app_jwt.clone().into())
        .await
        .unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&answer.payload).unwrap();
    assert_eq!(answer["data"]["code"], 200, "{answer}");

    // The full resolver spreads the JWT to every server; the user connects and runs an R3 stream.
    let app_client = sim::wait::poll("a user of the pushed account connects", T, || async {
        ConnectOptions::with_credentials(&app_creds)
            .map_err(|e| e.to_string())?
            .connection_timeout(Duration::from_secs(2))
            .connect(topo.server_addrs())
            .await
            .map(Some)
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    let js = jetstream::new(app_client);
    sim::wait::poll("an R3 stream in the pushed account", T, || async {
        js.get_or_create_stream(jetstream::stream::Config {
            name: "APPSTREAM".into(),
            subjects: vec!["app.>".into()],
            num_replicas: 3,
            ..Default::default()
        })
        .await
        .map(Some)
        .map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    topo.wait_stream_current("APPSTREAM", T).await.unwrap();
    let ack = js
        .publish("app.x", "hi".into())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(ack.sequence, 1);
}
