//! Live: each preset's user, signed from story 02's NatsUsers, is judged by a real nats-server:
//! every subject its table grants is accepted, every subject another preset's table grants (and a
//! few more) is refused, a controller preset cannot subscribe outside `_INBOX.<preset>.>`, and a
//! leafnode user cannot connect as an ordinary client.
//!
//! The server answers a refused publish with `-ERR 'Permissions Violation ...'` and an accepted one
//! with nothing, so each probe is followed by a publish to a sentinel subject the preset refuses:
//! the server handles a connection's messages in order, so the sentinel's error arriving with no
//! error for the probe before it means the probe was accepted.

use crate::common;

use auth_controller::presets;
use common::*;
use nats_api::auth::{GeneratedKind, NatsUser, UserPreset};

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

fn user_with_preset(base: &NatsUser, preset: UserPreset) -> NatsUser {
    let mut u = base.clone();
    u.spec.preset = Some(preset);
    u.spec.permissions = None;
    u
}

#[tokio::test]
async fn each_preset_is_refused_outside_its_list() {
    let plane = Plane::start().await;
    let orders_obj = orders_account();
    let orders = Acct::new(GeneratedKind::Account, "orders");
    let jwt = plane.sign_account(&orders, &orders_obj.spec, vec![]).await;
    plane.push(&jwt).await;

    let cases: Vec<(UserPreset, String, &Acct, &[&str])> = vec![
        (
            UserPreset::ClusterController,
            plane.system.creds(&system_user("cluster-controller")),
            &plane.system,
            &[
                "orders.x",
                "$SYS.REQ.SERVER.PING.CONNZ",
                "$SYS.REQ.ACCOUNT.NOSUCH.CLAIMS.LOOKUP",
            ],
        ),
        (
            UserPreset::JetStreamController,
            plane.system.creds(&system_user("jetstream-controller")),
            &plane.system,
            &[
                "$JS.API.STREAM.CREATE.X",
                "$SYS.REQ.SERVER.PING.VARZ",
                "$JS.AKEY.API.STREAM.DELETE.X",
            ],
        ),
        (
            UserPreset::AuthController,
            plane.system.creds(&system_user("auth-controller")),
            &plane.system,
            &[
                "$SYS.REQ.SERVER.PING.JSZ",
                "$SYS.REQ.SERVER.NOSUCH.VARZ",
                "orders.x",
            ],
        ),
        (
            UserPreset::Readonly,
            orders.creds(&orders_user("orders-reader")),
            &orders,
            &[
                "orders.new",
                "$JS.API.STREAM.CREATE.ORDERS",
                "$JS.API.STREAM.DELETE.ORDERS",
                "$JS.API.CONSUMER.MSG.NEXT.ORDERS.c",
            ],
        ),
    ];

    let mut table = Vec::new();
    for (preset, creds, _acct, extra_refused) in &cases {
        let inbox = preset.is_system().then(|| preset.as_str());
        let (client, events) = connect(&plane.topo, creds, inbox).await;
        let client = client.unwrap_or_else(|e| panic!("{} user refused: {e}", preset.as_str()));
        let mut judge = Judge {
            client,
            events,
            n: 0,
        };
        let own: Vec<&str> = presets::publish(*preset)
            .iter()
            .map(|g| g.subject)
            .collect();
        for g in presets::publish(*preset) {
            let s = concrete(g.subject);
            let ok = judge.publish_allowed(&s).await;
            table.push((preset.as_str(), "publish", s.clone(), ok));
            assert!(
                ok,
                "{}: {s} is in its list but the server refused it",
                preset.as_str()
            );
        }
        // Every subject another preset grants that this one does not, and the extras.
        let mut refused: Vec<String> = presets::ALL
            .iter()
            .filter(|p| **p != *preset)
            .flat_map(|p| presets::publish(*p))
            .filter(|g| !own.contains(&g.subject))
            .map(|g| concrete(g.subject))
            .filter(|s| {
                !presets::publish(*preset)
                    .iter()
                    .any(|g| concrete(g.subject) == *s)
            })
            .collect();
        refused.extend(extra_refused.iter().map(|s| s.to_string()));
        refused.sort();
        refused.dedup();
        for s in refused {
            let ok = judge.publish_allowed(&s).await;
            table.push((preset.as_str(), "publish", s.clone(), ok));
            assert!(
                !ok,
                "{}: {s} is outside its list but the server let it through",
                preset.as_str()
            );
        }
        if preset.is_system() {
            for other in presets::ALL
                .iter()
                .filter(|p| p.is_system() && **p != *preset)
            {
                let s = format!("_INBOX.{}.>", other.as_str());
                let ok = judge.subscribe_allowed(&s).await;
                table.push((preset.as_str(), "subscribe", s.clone(), ok));
                assert!(!ok, "{} may subscribe to {s}", preset.as_str());
            }
            let own_inbox = format!("_INBOX.{}.probe.>", preset.as_str());
            let ok = judge.subscribe_allowed(&own_inbox).await;
            table.push((preset.as_str(), "subscribe", own_inbox, ok));
            assert!(
                ok,
                "{} cannot subscribe under its own inbox",
                preset.as_str()
            );
        }
    }

    // A leafnode user may connect only as a leaf: as an ordinary client it is refused.
    let leaf = user_with_preset(&orders_user("orders-reader"), UserPreset::Leafnode);
    let (as_client, _) = connect(&plane.topo, &orders.creds(&leaf), None).await;
    assert!(as_client.is_err(), "a leafnode user connected as a client");
    table.push(("leafnode", "connect", "STANDARD".into(), false));

    println!("preset      | op        | subject | allowed");
    for (p, op, s, ok) in &table {
        println!("{p} | {op} | {s} | {ok}");
    }
}
