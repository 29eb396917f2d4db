//! API tier + live NATS, issue 37 item 3: one tenant's NatsConnection to a tarpit — a server
//! that accepts the connection, sends INFO, answers PING with PONG and swallows everything else,
//! so every `$JS.API.>` request waits out its timeout — does not starve another tenant.
//!
//! In one test, on one controller: tenant A's NatsStreams on a real nats-server, timed from
//! their first create to all Ready, alone; then tenant T's as many NatsStreams on the tarpit,
//! and once T's passes wait on it, tenant B's as many on the real server, timed the same way. B's time stays within 1.5 times A's
//! (plus a second of grace for the scheduler of a 2-core machine), both figures printed. The
//! tarpit's passes never held more than the share (counted in flight while B ran).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use controller_kit::metrics::Metrics;
use futures::StreamExt;
use jetstream_controller::controller::Settings;
use kube::api::{Api, PostParams};
use nats_api::jetstream::{NatsStream, metric};
use nats_api::nats::NatsConnection;
use serde_json::json;
use sim::testkit::{AbortOnDrop, apiserver_with_crds};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::live_tenant_cost::counter;

const WAIT: Duration = Duration::from_secs(240);

/// How many NatsStreams each tenant has.
const STREAMS: usize = 200;

/// A tarpit on 127.0.0.1 (a port the OS picks): it accepts, sends INFO, answers PING with PONG
/// and swallows everything else; its URL, how many connections it accepted, and how many
/// `$JS.API.` requests it swallowed.
struct Tarpit {
    url: String,
    swallowed: Arc<AtomicUsize>,
    _task: AbortOnDrop,
}

async fn tarpit() -> Tarpit {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a tarpit port");
    let port = listener.local_addr().expect("its address").port();
    let swallowed = Arc::new(AtomicUsize::new(0));
    let counted = swallowed.clone();
    let task = AbortOnDrop::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let counted = counted.clone();
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let info = json!({
                    "server_id": "NTARPIT", "server_name": "tarpit", "version": "2.15.1",
                    "proto": 1, "go": "go1.24", "host": "127.0.0.1", "port": port,
                    "headers": true, "max_payload": 1_048_576, "jetstream": true,
                });
                if write
                    .write_all(format!("INFO {info}\r\n").as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.starts_with("PING") {
                        if write.write_all(b"PONG\r\n").await.is_err() {
                            return;
                        }
                    } else if line.contains("$JS.API.") {
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    Tarpit {
        url: format!("nats://127.0.0.1:{port}"),
        swallowed,
        _task: task,
    }
}

async fn connection(client: kube::Client, ns: &str, servers: Vec<String>) {
    let conn: NatsConnection = serde_json::from_value(json!({
        "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
        "metadata": {"name": "tenant", "namespace": ns},
        "spec": {"servers": servers},
    }))
    .expect("a NatsConnection");
    Api::<NatsConnection>::namespaced(client, ns)
        .create(&PostParams::default(), &conn)
        .await
        .expect("NatsConnection created");
}

/// Creates `STREAMS` NatsStreams in `ns` over its connection `tenant`, sixteen creates at once.
async fn streams(client: kube::Client, ns: &str) {
    let api: Api<NatsStream> = Api::namespaced(client, ns);
    let api = &api;
    futures::stream::iter(0..STREAMS)
        .for_each_concurrent(16, |i| async move {
            let name = format!("{}-{i}", ns.to_uppercase());
            let s: NatsStream = serde_json::from_value(json!({
                "apiVersion": "jetstream.nats.mikluko.io/v1beta1", "kind": "NatsStream",
                "metadata": {"name": name.to_lowercase(), "namespace": ns},
                "spec": {"name": name, "connectionRef": {"name": "tenant"},
                         "subjects": [format!("{name}.>")], "storage": "Memory"},
            }))
            .expect("a NatsStream");
            api.create(&PostParams::default(), &s)
                .await
                .unwrap_or_else(|e| panic!("creating {name}: {e}"));
        })
        .await;
}

/// NatsStreams of `ns` whose Ready is True, from the controller's condition gauge (no
/// apiserver request: the count must not load what it measures).
fn ready_in(metrics: &Metrics, ns: &str) -> usize {
    let mut ready = BTreeMap::new();
    for l in metrics.render().lines() {
        if l.starts_with(controller_kit::metrics::CONDITION)
            && l.contains("kind=\"NatsStream\"")
            && l.contains(&format!("namespace=\"{ns}\""))
            && l.contains("type=\"Ready\"")
            && let Some(name) = l.split("name=\"").nth(1).and_then(|r| r.split('"').next())
        {
            ready.insert(name.to_string(), l.ends_with(" 1"));
        }
    }
    ready.values().filter(|r| **r).count()
}

/// Creates the streams of tenant `ns` and times them to all Ready.
async fn time_to_ready(client: kube::Client, metrics: &Metrics, ns: &str) -> Duration {
    let started = Instant::now();
    streams(client, ns).await;
    sim::wait::poll(
        &format!("{STREAMS} NatsStreams of {ns} Ready"),
        WAIT,
        || async move {
            let n = ready_in(metrics, ns);
            if n == STREAMS {
                Ok(Some(()))
            } else {
                Err(format!("{n} Ready"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_tarpit_connection_does_not_starve_another_tenants_streams() {
    let api = apiserver_with_crds(&["tenant-a", "tenant-t", "tenant-b"]).await;
    let topo = sim::topology::Topology::start(sim::topology::TopologySpec::cluster(1))
        .await
        .expect("a nats-server");
    topo.wait_meta_leader(Duration::from_secs(30))
        .await
        .expect("a meta leader");
    let pit = tarpit().await;
    let metrics = Metrics::default();
    let settings = Settings::default();
    let share = jetstream_controller::controller::share_of(settings.scope.concurrency);
    let (ctx, _controllers) =
        crate::common::spawn_controller_with(api.client(), settings, metrics.clone());

    // Tenant A alone.
    connection(api.client(), "tenant-a", topo.client_urls()).await;
    let alone = time_to_ready(api.client(), &metrics, "tenant-a").await;

    // Tenant T on the tarpit, until its passes hold their share (one is put off).
    connection(api.client(), "tenant-t", vec![pit.url.clone()]).await;
    streams(api.client(), "tenant-t").await;
    // Its passes are waiting on the tarpit: two shares' worth of requests swallowed (a
    // signal that does not depend on the share being kept).
    let swallowed = &pit.swallowed;
    sim::wait::poll("the tarpit's passes waiting on it", WAIT, || async move {
        let n = swallowed.load(Ordering::Relaxed);
        if n >= 2 * share {
            Ok(Some(()))
        } else {
            Err(format!("{n} $JS.API requests swallowed"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // Tenant B beside it, the tarpit's passes in flight sampled meanwhile.
    connection(api.client(), "tenant-b", topo.client_urls()).await;
    let most = Arc::new(AtomicUsize::new(0));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (ctx, most, sampling) = (ctx.clone(), most.clone(), sampling.clone());
        tokio::spawn(async move {
            let key = "NatsStream|tenant-t/tenant";
            while sampling.load(Ordering::Relaxed) {
                most.fetch_max(ctx.shares.held(key), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let beside = time_to_ready(api.client(), &metrics, "tenant-b").await;
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    let most = most.load(Ordering::Relaxed);
    let swallowed = pit.swallowed.load(Ordering::Relaxed);
    let deferred = counter(
        &metrics,
        metric::CONNECTION_SHARE_DEFERRED,
        &[("kind", "NatsStream")],
    );
    let ratio = beside.as_secs_f64() / alone.as_secs_f64();
    println!(
        "figure: {STREAMS} healthy NatsStreams to all Ready: alone {:.2} s, beside {STREAMS} on \
         a tarpit {:.2} s (ratio {ratio:.2}); the tarpit's passes in flight at most {most} \
         (share {share}), passes put off {deferred}; $JS.API requests it swallowed {swallowed}; \
         tarpit Ready {}",
        alone.as_secs_f64(),
        beside.as_secs_f64(),
        ready_in(&metrics, "tenant-t")
    );
    assert!(swallowed > 0, "the tarpit was asked, and never answered");
    assert!(
        most <= share,
        "the tarpit's connection held {most} slots, more than its share {share}"
    );
    assert_eq!(
        ready_in(&metrics, "tenant-t"),
        0,
        "nothing on the tarpit is Ready"
    );
    let limit = alone.mul_f64(1.5) + Duration::from_secs(1);
    assert!(
        beside <= limit,
        "beside a tarpit tenant B took {beside:?}, more than 1.5 times tenant A alone \
         ({alone:?}) plus a second"
    );
}
