//! 1,000 NatsStreams applied at once under the `jetstream-controller` binary, on kube-apiserver
//! 1.20 and a 3-server cluster: the time until all are Ready, passes and apiserver requests per
//! stream, and the binary's resident size at rest (floor: the same binary at rest with nothing to
//! do, its watches listed). As in the other controllers' figures, 2,000 unrelated 10 KiB Secrets in
//! other namespaces exist before the binary starts (it watches Secrets' metadata, for connections).
//!
//! `streams.ready_1000` has two floors, both measured in the same run, 32 at a time as the
//! streams were applied:
//! - the **direct floor**: the same 1,000 streams created with `$JS.API.STREAM.CREATE` alone;
//! - the **work floor** (issue 40): the work a controller cannot avoid per stream, done by hand
//!   against the same apiserver and servers — the NatsStream applied (as the figure's clock
//!   includes), STREAM.CREATE, the finalizer added, one status write ([`work_floor`]).
//!
//! The binary runs with a short `--resync` ([`Size::resync`]), longer than the figure itself, so
//! the run also measures what a resync pass over the settled streams costs the apiserver.
//!
//! The same code runs at ten times the scale under `just bench --scale` ([`SCALE`]: 10,000
//! streams, `streams.ready_10000`, timed from the last apply, issue 40's item 3).
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::summary::Figure;

const NS: &str = "bench";
use crate::apply::AT_ONCE;
const UNRELATED: [&str; 2] = ["unrelated-a", "unrelated-b"];

/// How many streams a run applies and what its figures are judged against.
pub struct Size {
    pub count: usize,
    /// The binary's resync period: long after every stream is Ready, short enough to wait for.
    resync: Duration,
    /// Whether the figure is timed from the last apply (issue 40's 10,000) rather than the first.
    from_last_apply: bool,
    ready_goal: &'static str,
    rss_goal: &'static str,
}

/// `just bench`: 1,000 streams.
pub const THOUSAND: Size = Size {
    count: 1000,
    resync: Duration::from_secs(30),
    from_last_apply: false,
    ready_goal: "≤ 1.5× the work floor, ≤ 2 apiserver requests and ≤ 1.1 passes per stream",
    rss_goal: "≤ 25 MiB",
};

/// `just bench --scale`: 10,000 streams.
pub const SCALE: Size = Size {
    count: 10_000,
    resync: Duration::from_secs(90),
    from_last_apply: true,
    ready_goal: "≤ 60 s after the last apply; a resync pass < 1 apiserver request per stream",
    rss_goal: "≤ 40 MiB",
};

fn streams_api(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("jetstream.nats.mikluko.io", "v1beta1", "NatsStream");
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(&gvk, "natsstreams"),
    )
}

fn stream_doc(i: usize) -> anyhow::Result<DynamicObject> {
    named_doc(&format!("s{i}"), &format!("bench.{i}.>"))
}

fn named_doc(name: &str, subject: &str) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1",
        "kind": "NatsStream",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"connectionRef": {"name": "demo"}, "subjects": [subject],
                 "storage": "Memory", "replicas": 1},
    }))?)
}

/// The work floor of one stream `w<i>`: the NatsStream applied, its stream created with
/// STREAM.CREATE, the JetStream finalizer added (the kit's guarded JSON patch) and one status
/// written (server-side apply on the status subresource, as the controller writes it).
async fn work_of_one(
    streams: &Api<DynamicObject>,
    js: &async_nats::jetstream::Context,
    i: usize,
) -> anyhow::Result<()> {
    let name = format!("w{i}");
    let created = streams
        .create(
            &PostParams::default(),
            &named_doc(&name, &format!("work.{i}.>"))?,
        )
        .await?;
    js.create_stream(async_nats::jetstream::stream::Config {
        name: format!("work{i}"),
        subjects: vec![format!("work.{i}.>")],
        storage: async_nats::jetstream::stream::StorageType::Memory,
        ..Default::default()
    })
    .await?;
    let finalizers = created.metadata.finalizers.clone().unwrap_or_default();
    let ops = controller_kit::finalizer::add_ops(&finalizers, nats_api::jetstream::FINALIZER);
    streams
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(ops)?),
        )
        .await?;
    let now = controller_kit::conditions::now();
    let condition = |type_: &str, reason: &str| {
        json!({"type": type_, "status": "True", "reason": reason, "message": "stream matches spec",
               "lastTransitionTime": now, "observedGeneration": 1})
    };
    let status = json!({
        "apiVersion": "jetstream.nats.mikluko.io/v1beta1",
        "kind": "NatsStream",
        "status": {
            "observedGeneration": 1,
            "conditions": [condition("Ready", "MatchesSpec"), condition("Synced", "MatchesSpec")],
            "lastSyncedTime": now,
            "nextCheckTime": now,
            "ownership": {"origin": "Created", "uid": created.metadata.uid},
        },
    });
    streams
        .patch_status(
            &name,
            &PatchParams::apply(nats_api::jetstream::FIELD_MANAGER).force(),
            &Patch::Apply(status),
        )
        .await?;
    Ok(())
}

/// The work floor of `count` streams, [`AT_ONCE`] at a time (with the controller stopped).
async fn work_floor(
    client: &kube::Client,
    js: &async_nats::jetstream::Context,
    count: usize,
) -> anyhow::Result<Duration> {
    let streams = &streams_api(client);
    let started = Instant::now();
    let done: Vec<anyhow::Result<()>> = futures::stream::iter(0..count)
        .map(|i| work_of_one(streams, js, i))
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let took = started.elapsed();
    if let Some(Err(e)) = done.into_iter().find(|r| r.is_err()) {
        anyhow::bail!("the work floor of a stream: {e}");
    }
    Ok(took)
}

fn ready(s: &DynamicObject) -> bool {
    s.data
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

pub async fn figures(binary: &Path, size: &Size) -> anyhow::Result<Vec<Figure>> {
    let count = size.count;
    let resync = size.resync;
    let mut namespaces = vec![NS];
    namespaces.extend(UNRELATED);
    let api = sim::testkit::apiserver_with_crds(&namespaces).await;
    for ns in UNRELATED {
        sim::testkit::memory::unrelated_secrets(&api.client(), ns, 1000, 10 * 1024).await;
    }
    let topo = sim::Topology::start(sim::TopologySpec::cluster(3)).await?;
    topo.wait_meta_leader(Duration::from_secs(60)).await?;
    let port = sim::ports::free_port();
    let child = sim::testkit::spawn_binary(
        binary,
        api.kubeconfig(),
        &[
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--probe-addr",
            "127.0.0.1:0",
            "--resync",
            &format!("{}s", resync.as_secs()),
        ],
    );
    // At rest with nothing to do: its watches listed, every kind's pass counter served.
    sim::testkit::wait_metrics(
        port,
        "the binary's /metrics",
        Duration::from_secs(60),
        |b| b.contains("nats_operator_leader"),
    )
    .await;
    let idle = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;

    let conn: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "nats.mikluko.io/v1beta1", "kind": "NatsConnection",
        "metadata": {"name": "demo", "namespace": NS},
        "spec": {"servers": topo.client_urls()},
    }))?;
    let gvk = GroupVersionKind::gvk("nats.mikluko.io", "v1beta1", "NatsConnection");
    Api::<DynamicObject>::namespaced_with(
        api.client(),
        NS,
        &ApiResource::from_gvk_with_plural(&gvk, "natsconnections"),
    )
    .create(&PostParams::default(), &conn)
    .await?;

    let streams = streams_api(&api.client());
    let before = sim::testkit::metrics(port)
        .await
        .map_err(anyhow::Error::msg)?;
    let docs: Vec<DynamicObject> = (0..count).map(stream_doc).collect::<Result<_, _>>()?;
    let all_ready = crate::watch::counting(
        &streams,
        "every NatsStream Ready",
        count,
        Duration::from_secs(600),
        |n| n.starts_with('s'),
        ready,
    );
    let started = Instant::now();
    crate::apply::create_all(&streams, docs, "NatsStream").await?;
    let applied = started.elapsed();
    all_ready.await?;
    let all_ready = started.elapsed();
    let loaded = sim::testkit::memory::rss_kib(child.0.id()).unwrap_or(0) as f64 / 1024.0;
    let body = sim::testkit::metrics(port)
        .await
        .map_err(anyhow::Error::msg)?;
    let mut notes = crate::scrape::per_object(&before, &body, "NatsStream", count, "stream");
    // A resync pass over the settled streams: until every one has passed once more.
    let settled = crate::scrape::passes(&body, "NatsStream");
    let resynced = sim::wait::poll(
        "a resync pass over every NatsStream",
        resync * 4,
        || async move {
            let now = sim::testkit::metrics(port).await?;
            Ok(
                (crate::scrape::passes(&now, "NatsStream") >= settled + count as f64)
                    .then_some(now),
            )
        },
    )
    .await?;
    let resync_requests =
        (crate::scrape::requests(&resynced) - crate::scrape::requests(&body)) / count as f64;
    drop(child);

    // The floor: the same streams created directly, as another account would not see ours.
    let js = async_nats::jetstream::new(topo.connect().await?);
    let started = Instant::now();
    let made: Vec<Result<_, _>> = futures::stream::iter(0..count)
        .map(|i| {
            let js = js.clone();
            async move {
                js.create_stream(async_nats::jetstream::stream::Config {
                    name: format!("direct{i}"),
                    subjects: vec![format!("direct.{i}.>")],
                    storage: async_nats::jetstream::stream::StorageType::Memory,
                    ..Default::default()
                })
                .await
            }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let direct = started.elapsed();
    let failed = made.iter().filter(|r| r.is_err()).count();
    anyhow::ensure!(failed == 0, "{failed} direct STREAM.CREATE failed");
    let work = work_floor(&api.client(), &js, count).await?;
    let value = if size.from_last_apply {
        all_ready - applied
    } else {
        all_ready
    };
    let work_ratio = value.as_secs_f64() / work.as_secs_f64();
    notes.push(format!(
        "work floor {:.2} s: the NatsStream applied, STREAM.CREATE, the finalizer added, one \
         status write, {AT_ONCE} at a time; ratio {work_ratio:.2} on it",
        work.as_secs_f64()
    ));
    notes.push(format!(
        "a resync pass over the {count} settled streams: {resync_requests:.2} apiserver requests per stream"
    ));
    notes.push(format!(
        "applied in {:.2} s, all Ready {:.2} s after the first apply",
        applied.as_secs_f64(),
        all_ready.as_secs_f64()
    ));

    Ok(vec![
        Figure {
            name: format!("streams.ready_{count}"),
            what: format!(
                "{count} NatsStreams applied at once until all Ready{}",
                if size.from_last_apply {
                    ", from the last apply"
                } else {
                    ""
                }
            ),
            value: value.as_secs_f64(),
            unit: "s".into(),
            floor: direct.as_secs_f64(),
            floor_what: format!("{count} STREAM.CREATE sent directly, {AT_ONCE} at a time"),
            goal: Some(size.ready_goal.into()),
            notes,
        },
        Figure {
            name: format!("rss.jetstream_{count}_streams"),
            what: format!(
                "jetstream-controller resident size at rest with {count} NatsStreams (and 2000 unrelated 10 KiB Secrets)"
            ),
            value: loaded,
            unit: "MiB".into(),
            floor: idle,
            floor_what: "the same binary at rest with none".into(),
            goal: Some(size.rss_goal.into()),
            notes: vec![],
        },
    ])
}
