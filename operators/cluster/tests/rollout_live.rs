//! Oracle: a real three-server JetStream cluster (the sim's topology) with an R3 stream.
//!
//! The rollout's observation adapters and gate, fed from real JSZ answers over the system user:
//! the gate is open on a settled cluster; after an involuntary disruption (kill -9 of a server)
//! it closes naming the server and the stream group that is not current, and the step order
//! holds the next voluntary step; once the server is back and the groups are current it opens and
//! the step is taken.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cluster_controller::lifecycle::ObservedServer;
use cluster_controller::rollout::gate::{Gate, GateInput, SettledView, gate};
use cluster_controller::rollout::observe::{
    Targets, gate_servers, members, meta_observation, not_current, reported_revision,
};
use cluster_controller::rollout::order::{Action, Hold, OrderInput, Step, StepKind, decide};
use nats_wire::jsapi::meta_view_of;
use nats_wire::monitor::JszOptions;
use nats_wire::{Collect, ConnectionConfig, ServerFilter, Wire};
use sim::topology::{Topology, TopologySpec};

struct Observed {
    gate: Gate,
    observed: Vec<ObservedServer>,
}

/// One observation pass, as the reconciler makes it: processes (the lifecycle), JSZ and the
/// meta view over the system connection, each server's /varz digest mapped to its revision.
async fn observe(topo: &mut Topology, wire: &Wire, digests: &BTreeMap<String, String>) -> Observed {
    let names = topo.server_names();
    let mut observed = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let ready = topo.server_mut(n).expect("server").is_running();
        observed.push(ObservedServer {
            ordinal: i as u32,
            server_name: n.clone(),
            present: true,
            ready,
            revision: Some("r1".into()),
            restarts: 0,
        });
    }
    let targets: Targets = (0..names.len() as u32)
        .map(|o| (o, "r1".to_string()))
        .collect();
    let options = JszOptions {
        filter: ServerFilter::cluster("c1"),
        accounts: true,
        streams: true,
        consumer: true,
        raft_groups: true,
        ..Default::default()
    };
    let replies = wire
        .ping_jsz(
            &options,
            Collect::expecting(names.len(), Duration::from_secs(2)),
        )
        .await;
    let (answers, view) = match &replies {
        Ok(r) => (
            r.replies
                .iter()
                .map(|x| (x.server.name.clone(), x.data.clone()))
                .collect::<Vec<_>>(),
            Some(meta_view_of(r)),
        ),
        Err(_) => (Vec::new(), None),
    };
    let answered: BTreeSet<String> = answers.iter().map(|(n, _)| n.clone()).collect();
    let mut reported = BTreeMap::new();
    for n in &answered {
        if let Ok(v) = topo.monitor(n, "/varz").await
            && let Some(d) = v["config_digest"].as_str()
            && let Some(known) = digests.get(n)
            && let Some(r) = reported_revision(d, &[("r1".to_string(), known.clone())])
        {
            reported.insert(n.clone(), r);
        }
    }
    let settled = match &replies {
        Err(e) => SettledView::Unobserved {
            error: e.to_string(),
        },
        Ok(_) => {
            let groups = not_current(&answers, None);
            if groups.is_empty() {
                SettledView::Settled
            } else {
                SettledView::NotCurrent { groups }
            }
        }
    };
    let servers = gate_servers(&observed, &targets, &reported, &answered);
    let meta = meta_observation(true, view.as_ref());
    let g = gate(&GateInput {
        servers: &servers,
        meta: &meta,
        settled: &settled,
        rejoining: &[],
    });
    Observed { gate: g, observed }
}

/// The step order with server 0 waiting for a restart onto r2.
fn next(o: &Observed) -> Action {
    let mut targets: Targets = (0..3).map(|i| (i, "r1".to_string())).collect();
    targets.insert(0, "r2".into());
    let m = members(&o.observed, &targets);
    decide(&OrderInput {
        replicas: 3,
        servers: &m,
        meta_leader: None,
        paused: false,
        force_step: None,
        replace: &[],
        removals: &[],
        gate: &o.gate,
        auth_change: None,
    })
    .action
}

async fn until(
    topo: &mut Topology,
    wire: &Wire,
    digests: &BTreeMap<String, String>,
    what: &str,
    ok: impl Fn(&Gate) -> bool,
) -> Observed {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let o = observe(topo, wire, digests).await;
        if ok(&o.gate) {
            return o;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: last gate {:?}",
            o.gate
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_holds_the_next_step_after_a_kill_until_the_cluster_is_settled() {
    let mut topo = Topology::start(TopologySpec::cluster(3))
        .await
        .expect("three servers");
    topo.wait_meta_leader(Duration::from_secs(60))
        .await
        .expect("a meta leader");
    let app = topo.connect().await.expect("app connects");
    let created = app
        .request(
            "$JS.API.STREAM.CREATE.ORDERS",
            r#"{"name":"ORDERS","subjects":["orders.>"],"num_replicas":3}"#.into(),
        )
        .await
        .expect("stream create answers");
    let body = String::from_utf8_lossy(&created.payload).to_string();
    assert!(!body.contains("\"error\""), "{body}");
    for i in 0..50 {
        app.publish(format!("orders.{i}"), "x".into())
            .await
            .expect("publish");
    }
    app.flush().await.expect("flush");

    let url = topo.client_urls()[0].replace("nats://", "nats://sys:sys@");
    let wire = nats_wire::dial(&ConnectionConfig::new([url]))
        .await
        .expect("the system user connects");
    let mut digests = BTreeMap::new();
    for n in topo.server_names() {
        let v = topo.monitor(&n, "/varz").await.expect("varz");
        digests.insert(
            n,
            v["config_digest"].as_str().unwrap_or_default().to_string(),
        );
    }

    let o = until(
        &mut topo,
        &wire,
        &digests,
        "the gate opens on a settled cluster",
        Gate::is_open,
    )
    .await;
    let step0 = Step {
        server: "c1-0".into(),
        ordinal: 0,
        kind: StepKind::Restart,
    };
    assert_eq!(next(&o), Action::Take(step0.clone()));

    // An involuntary disruption: the gate closes naming the server and the R3 stream's group.
    topo.server_mut("c1-2")
        .expect("c1-2")
        .kill9()
        .expect("kill -9");
    let o = until(
        &mut topo,
        &wire,
        &digests,
        "the gate names the killed server and the stream not current",
        |g| {
            g.waiting_for()
                .is_some_and(|w| w.contains("c1-2 not Ready") && w.contains("stream APP > ORDERS"))
        },
    )
    .await;
    assert_eq!(
        next(&o),
        Action::Held(Hold::Gate),
        "the next voluntary step waits"
    );

    // Back: the gate opens once every group is current again, and the step is taken.
    topo.server_mut("c1-2")
        .expect("c1-2")
        .start()
        .await
        .expect("c1-2 restarts");
    let o = until(
        &mut topo,
        &wire,
        &digests,
        "the gate opens once settled",
        Gate::is_open,
    )
    .await;
    assert_eq!(next(&o), Action::Take(step0));
    drop(topo);
}
