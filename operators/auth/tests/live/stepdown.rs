//! Live: the jetstream-stepdown export preset (§5.4). The orders account exports it, the system
//! account JWT is signed again with the matching prefixed imports and pushed, and the
//! jetstream-controller preset's user — dialed with its own inbox, through nats-wire with the
//! account's stepdown domain — moves the leader of an R3 stream in the orders account, which the
//! system account cannot do directly.

use crate::common;

use async_nats::jetstream;
use auth_controller::presets::stepdown_domain;
use common::*;
use nats_api::auth::{Export, ExportPreset, GeneratedKind};
use nats_wire::Wire;

#[tokio::test]
async fn the_system_balancer_moves_an_accounts_leader_through_jetstream_stepdown() {
    let plane = Plane::start().await;
    let mut orders_obj = orders_account();
    orders_obj.spec.exports.push(Export {
        preset: Some(ExportPreset::JetStreamStepdown),
        ..Export::default()
    });
    let orders = Acct::new(GeneratedKind::Account, "orders");
    let jwt = plane.sign_account(&orders, &orders_obj.spec, vec![]).await;
    plane.push(&jwt).await;

    let app = sim::wait::poll("orders-app connects", DEADLINE, || async {
        let (c, _) = connect(&plane.topo, &orders.creds(&orders_user("orders-app")), None).await;
        c.map(Some).map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    let js = jetstream::new(app);
    sim::wait::poll("an R3 stream in orders", DEADLINE * 3, || async {
        js.get_or_create_stream(jetstream::stream::Config {
            name: "ORDERS".into(),
            subjects: vec!["orders.>".into()],
            num_replicas: 3,
            ..Default::default()
        })
        .await
        .map(Some)
        .map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    let before = plane
        .topo
        .wait_stream_leader("ORDERS", DEADLINE * 3)
        .await
        .unwrap();

    let (client, _) = connect(
        &plane.topo,
        &plane.system.creds(&system_user("jetstream-controller")),
        Some("jetstream-controller"),
    )
    .await;
    let balancer = Wire::new(client.unwrap())
        .with_request_timeout(std::time::Duration::from_secs(2))
        .with_js_domain(stepdown_domain(&orders.public_key()));
    // Before the system account imports the export, nothing answers there.
    assert!(
        balancer
            .stream_leader_stepdown("ORDERS", None)
            .await
            .is_err(),
        "a stepdown went through without the system account's import"
    );

    plane.resign_system_account(&[orders.public_key()]).await;
    // The pushed system account JWT reaches every server's resolver; retry until the import serves.
    sim::wait::poll("stepdown through the import", DEADLINE, || async {
        balancer
            .stream_leader_stepdown("ORDERS", None)
            .await
            .map(Some)
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    let after = sim::wait::poll("a new leader", DEADLINE * 3, || async {
        let l = plane.topo.stream_leader("ORDERS").await?;
        Ok(l.filter(|l| *l != before))
    })
    .await
    .unwrap();
    println!("ORDERS leader moved {before} -> {after}");
}
