//! The sim's local server lifecycle, live: the quickstart NatsCluster's three servers started
//! through the port form a JetStream cluster over route TLS; one is restarted under a new
//! revision (lame duck, exit, start) and counted; one is deleted with its storage.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cluster_controller::objects::configmap::revision;
use cluster_controller::plan::{ClusterInputs, plan_servers};
use cluster_controller::render::render;
use cluster_controller::route_ca::RouteCa;
use cluster_controller::server_lifecycle::{DesiredServer, ServerFile, ServerLifecycle};
use nats_api::cluster::NatsCluster;
use sim::local::LocalServerLifecycle;

fn quickstart() -> NatsCluster {
    sim::testkit::story_object(
        "docs/stories/01-quickstart/01-natscluster.yaml",
        "NatsCluster",
    )
}

fn server_lifecycle(root: &Path) -> LocalServerLifecycle {
    LocalServerLifecycle::with_ports(
        root,
        Arc::new(|v: &str| sim::install::nats_server(v).map_err(|e| e.to_string())),
        Arc::new(sim::ports::free_port),
    )
}

/// Every server's desired state, route certificates included as files.
fn desired(lc: &LocalServerLifecycle, cluster: &NatsCluster, ca: &RouteCa) -> Vec<DesiredServer> {
    let name = cluster.metadata.name.clone().expect("name");
    let layout = lc.layout(cluster);
    let plans = plan_servers(
        &ClusterInputs {
            name: &name,
            spec: &cluster.spec,
            trust: None,
            account_preloads: vec![],
            leaf_remotes: vec![],
        },
        layout.as_ref(),
    )
    .expect("plans");
    let cert = sim::testkit::localhost_cert(ca);
    plans
        .into_iter()
        .enumerate()
        .map(|(i, plan)| {
            let tls = layout.tls_dir(i as u32, "routes");
            let config = render(&plan);
            DesiredServer {
                ordinal: i as u32,
                revision: revision(&config),
                config,
                files: vec![
                    ServerFile {
                        path: format!("{tls}/tls.crt"),
                        contents: cert.cert_pem.clone().into_bytes(),
                    },
                    ServerFile {
                        path: format!("{tls}/tls.key"),
                        contents: cert.key_pem.clone().into_bytes(),
                    },
                    ServerFile {
                        path: format!("{tls}/ca.crt"),
                        contents: cert.ca_pem.clone().into_bytes(),
                    },
                ],
                plan,
            }
        })
        .collect()
}

async fn get(client: &reqwest::Client, url: String) -> Option<serde_json::Value> {
    client.get(url).send().await.ok()?.json().await.ok()
}

/// Polls every server's `/jsz` until all agree on a meta leader of a group of `size`.
async fn meta_group(client: &reqwest::Client, monitors: &[String], size: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut leaders = Vec::new();
        for m in monitors {
            let j = get(client, format!("{m}/jsz")).await;
            leaders.push(j.and_then(|j| {
                let meta = j.get("meta_cluster")?;
                (meta.get("cluster_size")?.as_u64()? == size)
                    .then(|| meta.get("leader")?.as_str().map(String::from))
                    .flatten()
            }));
        }
        if leaders
            .iter()
            .all(|l| l.as_ref().is_some_and(|l| !l.is_empty()))
            && leaders.windows(2).all(|w| w[0] == w[1])
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no meta group of {size} formed: {leaders:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn alive(pid: u32) -> bool {
    // /proc/<pid>/stat's third field is the state; a zombie (Z) has exited.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_quickstart_servers_restart_under_a_new_revision_and_delete() {
    let mut cluster = quickstart();
    let ns = cluster.metadata.namespace.clone().expect("namespace");
    let name = cluster.metadata.name.clone().expect("name");
    let dir = tempfile::tempdir().expect("temp dir");
    let lc = server_lifecycle(dir.path());
    let ca = RouteCa::generate(&name, time::OffsetDateTime::now_utc()).expect("route CA");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("http client");

    // The layout keeps its ports across calls.
    let first = lc.layout(&cluster).ports(2);
    assert_eq!(lc.layout(&cluster).ports(2), first);
    assert_ne!(first.client, 0);

    let servers = desired(&lc, &cluster, &ca);
    lc.apply_shared(&cluster, &[]).await.expect("shared");
    for s in &servers {
        lc.apply_server(&cluster, s).await.expect("server starts");
    }
    let monitors: Vec<String> = (0..3)
        .map(|i| lc.address(&cluster, i).monitor_url)
        .collect();
    meta_group(&http, &monitors, 3).await;

    let observed = lc.observe(&cluster).await.expect("observe");
    assert_eq!(observed.len(), 3);
    for (o, s) in observed.iter().zip(&servers) {
        assert!(o.present && o.ready, "{o:?}");
        assert_eq!(o.revision.as_deref(), Some(s.revision.as_str()));
        assert_eq!(o.restarts, 0);
        assert_eq!(o.server_name, s.plan.server_name);
    }
    let pids: Vec<u32> = (0..3)
        .map(|i| lc.pid(&ns, &name, i).expect("a pid"))
        .collect();

    // The plan each config was rendered from is stored beside it, for its revision only.
    assert_eq!(
        lc.stored_plan(&cluster, 1, &servers[1].revision).await,
        Some(servers[1].plan.clone())
    );
    assert_eq!(lc.stored_plan(&cluster, 1, "another").await, None);

    // Applying the same revision again leaves the processes alone.
    lc.apply_server(&cluster, &servers[0]).await.expect("same");
    assert_eq!(lc.pid(&ns, &name, 0), Some(pids[0]));

    // A raised memory limit is a new revision: server 2 is restarted under it.
    cluster.spec.resources.as_mut().expect("resources").limits = Some(
        [(
            "memory".to_string(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("8Gi".into()),
        )]
        .into(),
    );
    let changed = desired(&lc, &cluster, &ca);
    assert_ne!(changed[2].revision, servers[2].revision);
    lc.apply_server(&cluster, &changed[2])
        .await
        .expect("server 2 restarts");
    let new_pid = lc.pid(&ns, &name, 2).expect("a pid");
    assert_ne!(new_pid, pids[2]);
    assert!(!alive(pids[2]), "the old process is gone");
    let varz = get(&http, format!("{}/varz", monitors[2]))
        .await
        .expect("varz");
    assert_eq!(
        varz["jetstream"]["config"]["max_memory"].as_i64(),
        Some(6 << 30),
        "75% of the new 8Gi limit"
    );
    meta_group(&http, &monitors, 3).await;
    let observed = lc.observe(&cluster).await.expect("observe");
    let restarts: Vec<u32> = observed.iter().map(|o| o.restarts).collect();
    assert_eq!(restarts, vec![0, 0, 1]);
    assert_eq!(
        observed[2].revision.as_deref(),
        Some(changed[2].revision.as_str())
    );
    assert_eq!(
        observed[1].revision.as_deref(),
        Some(servers[1].revision.as_str())
    );

    // write_config changes the file only.
    lc.write_config(&cluster, &changed[1]).await.expect("write");
    let on_disk = std::fs::read_to_string(lc.cluster_root(&ns, &name).join("1").join("nats.conf"))
        .expect("config");
    assert_eq!(on_disk, changed[1].config);
    assert_eq!(lc.pid(&ns, &name, 1), Some(pids[1]));

    // Deleting server 1 with its storage stops it and removes its directory.
    lc.delete_server(&cluster, 1, true).await.expect("delete");
    assert!(!alive(pids[1]));
    assert!(!lc.cluster_root(&ns, &name).join("1").exists());
    let observed = lc.observe(&cluster).await.expect("observe");
    let ordinals: Vec<u32> = observed.iter().map(|o| o.ordinal).collect();
    assert_eq!(ordinals, vec![0, 2]);

    // A server killed behind the port's back comes back at the next look, counted; the
    // supervisor brings it back without anyone looking (checked after this one).
    let p0 = lc.pid(&ns, &name, 0).expect("pid");
    std::process::Command::new("kill")
        .args(["-9", &p0.to_string()])
        .status()
        .expect("kill");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let o = lc.observe(&cluster).await.expect("observe");
        if o[0].restarts == 1 && lc.pid(&ns, &name, 0).is_some_and(|p| p != p0) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not revived: {o:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let supervisor = lc.supervise();
    let p2 = lc.pid(&ns, &name, 2).expect("pid");
    std::process::Command::new("kill")
        .args(["-9", &p2.to_string()])
        .status()
        .expect("kill");
    // Revived is logged just after the new pid is stored, so the log is what is awaited.
    use sim::local::LocalEvent;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !lc
        .events()
        .iter()
        .any(|e| e.server == "demo-2" && e.event == LocalEvent::Revived)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the supervisor did not revive demo-2"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    supervisor.abort();
    assert!(
        lc.pid(&ns, &name, 2).is_some_and(|p| p != p2),
        "demo-2 runs under a new pid"
    );

    // The log holds every start, the lame duck and restart of demo-2, demo-1's config written
    // with no restart, the delete and the revival.
    let log: Vec<(String, LocalEvent)> = lc
        .events()
        .into_iter()
        .map(|e| (e.server, e.event))
        .collect();
    let e = |s: &str, ev| (s.to_string(), ev);
    assert_eq!(
        log,
        vec![
            e("demo-0", LocalEvent::Started),
            e("demo-1", LocalEvent::Started),
            e("demo-2", LocalEvent::Started),
            e("demo-2", LocalEvent::LameDuck),
            e("demo-2", LocalEvent::Restarted),
            e("demo-1", LocalEvent::ConfigWritten),
            e("demo-1", LocalEvent::Deleted),
            e("demo-0", LocalEvent::Revived),
            e("demo-2", LocalEvent::Revived),
        ]
    );

    // Every process goes with the server lifecycle.
    let left: Vec<u32> = [0, 2]
        .iter()
        .filter_map(|i| lc.pid(&ns, &name, *i))
        .collect();
    drop(lc);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while left.iter().any(|p| alive(*p)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{left:?} outlived the server lifecycle"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
