//! Oracle: the quickstart NatsCluster (docs/stories/01-quickstart), planned with the sim's
//! LocalLayout and rendered, boots three real servers that form a JetStream cluster over route
//! TLS issued by the controller's own route CA.

use std::path::PathBuf;
use std::time::Duration;

use cluster_controller::plan::{ClusterInputs, Layout, Ports, plan_servers};
use cluster_controller::render::render;
use cluster_controller::route_ca::RouteCa;
use nats_api::cluster::NatsCluster;
use sim::local::LocalLayout;
use sim::nats_conf::ServerConfig;
use sim::ports::free_port;
use sim::server::Server;

fn quickstart() -> NatsCluster {
    sim::testkit::story_object(
        "docs/stories/01-quickstart/01-natscluster.yaml",
        "NatsCluster",
    )
}

fn ports() -> Ports {
    Ports {
        client: free_port(),
        monitor: free_port(),
        route: free_port(),
        gateway: free_port(),
        leafnode: free_port(),
    }
}

fn write(path: &str, text: &str) {
    let p = PathBuf::from(path);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(&p, text).expect("write");
}

async fn jsz(client: &reqwest::Client, monitor: u16) -> Option<serde_json::Value> {
    client
        .get(format!("http://127.0.0.1:{monitor}/jsz"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_boots_a_three_server_jetstream_cluster() {
    let cluster = quickstart();
    let name = cluster.metadata.name.clone().expect("name");
    let spec = &cluster.spec;
    assert_eq!(spec.replicas, 3);
    assert!(
        spec.route_tls_enabled(),
        "the quickstart runs route TLS by default"
    );
    let bin = sim::install::nats_server(&spec.version).expect("nats-server installs");

    let dir = tempfile::tempdir().expect("temp dir");
    let layout = LocalLayout::new(dir.path(), (0..3).map(|_| ports()).collect());
    let plans = plan_servers(
        &ClusterInputs {
            name: &name,
            spec,
            trust: None,
            account_preloads: vec![],
            leaf_remotes: vec![],
        },
        &layout,
    )
    .expect("plans");

    // The route certificate the controller would issue, under its own CA.
    let now = time::OffsetDateTime::now_utc();
    let ca = RouteCa::generate(&name, now).expect("route CA");
    let cert = ca
        .issue(
            &["localhost".into()],
            &["127.0.0.1".parse().expect("ip")],
            now,
        )
        .expect("route certificate");

    let mut servers = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let ordinal = i as u32;
        let tls = layout.tls_dir(ordinal, "routes");
        write(&format!("{tls}/tls.crt"), &cert.cert_pem);
        write(&format!("{tls}/tls.key"), &cert.key_pem);
        write(&format!("{tls}/ca.crt"), &cert.ca_pem);
        // The sim's server runs the rendered config as its raw text; its own keys repeat the
        // same name, listeners and pid file, and the rendered ones come last and win.
        let mut config = ServerConfig::new(
            plan.server_name.clone(),
            plan.client.port,
            plan.monitor.port,
            PathBuf::from(&plan.pid_file),
        );
        config.lame_duck_duration = None;
        config.lame_duck_grace_period = None;
        config.extra = render(plan);
        servers.push(Server::new(
            bin.clone(),
            layout.server_dir(ordinal),
            name.clone(),
            config,
        ));
    }
    for s in &mut servers {
        s.start().await.expect("server starts");
    }

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("http client");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut last = Vec::new();
    loop {
        last.clear();
        for p in &plans {
            last.push(jsz(&client, p.monitor.port).await);
        }
        let leaders: Vec<Option<String>> = last
            .iter()
            .map(|j| {
                let meta = j.as_ref()?.get("meta_cluster")?;
                if meta.get("cluster_size")?.as_u64()? != 3 {
                    return None;
                }
                meta.get("leader")?.as_str().map(String::from)
            })
            .collect();
        if leaders
            .iter()
            .all(|l| l.as_ref().is_some_and(|l| !l.is_empty()))
            && leaders.windows(2).all(|w| w[0] == w[1])
        {
            let leader = leaders[0].clone().unwrap_or_default();
            assert!(
                plans.iter().any(|p| p.server_name == leader),
                "the meta leader {leader} is one of the planned servers"
            );
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let logs: Vec<String> = servers.iter().map(|s| s.log_tail()).collect();
            panic!(
                "no JetStream meta group of 3 formed: {last:?}\n{}",
                logs.join("\n---\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Each server runs under its planned name and its limits derive from the spec.
    for p in &plans {
        let varz: serde_json::Value = client
            .get(format!("http://127.0.0.1:{}/varz", p.monitor.port))
            .send()
            .await
            .expect("varz")
            .json()
            .await
            .expect("varz json");
        assert_eq!(varz["server_name"], p.server_name);
        assert_eq!(varz["cluster"]["name"], name);
        assert_eq!(
            varz["jetstream"]["config"]["max_memory"].as_i64(),
            p.jetstream.as_ref().and_then(|j| j.max_memory_store)
        );
        assert_eq!(varz["cluster"]["tls_required"], true, "routes run TLS");
        // The story's status reads a 3Gi memory store from the 4Gi limit and a 20Gi file store
        // from the 20Gi volume.
        assert_eq!(
            varz["jetstream"]["config"]["max_memory"].as_i64(),
            Some(3 << 30)
        );
        assert_eq!(
            varz["jetstream"]["config"]["max_storage"].as_i64(),
            Some(20 << 30)
        );
    }
    // Servers are killed by PID when `servers` drops.
    drop(servers);
}

async fn routes_of(client: &reqwest::Client, monitor: u16) -> Option<u64> {
    let v: serde_json::Value = client
        .get(format!("http://127.0.0.1:{monitor}/routez"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    v.get("num_routes")?.as_u64()
}

/// A route certificate reissued under the CA key kept in `<name>-routes-ca` is trusted by a
/// server still holding the first one: the reissue needs no restart of the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reissued_route_certificate_is_trusted_by_servers_holding_the_first() {
    let spec: nats_api::cluster::NatsClusterSpec =
        serde_yaml::from_str("version: 2.15.1\nreplicas: 2\n").expect("spec");
    let bin = sim::install::nats_server(&spec.version).expect("nats-server installs");
    let dir = tempfile::tempdir().expect("temp dir");
    let layout = LocalLayout::new(dir.path(), (0..2).map(|_| ports()).collect());
    let plans = plan_servers(
        &ClusterInputs {
            name: "demo",
            spec: &spec,
            trust: None,
            account_preloads: vec![],
            leaf_remotes: vec![],
        },
        &layout,
    )
    .expect("plans");

    let now = time::OffsetDateTime::now_utc();
    let ca = RouteCa::generate("demo", now).expect("route CA");
    let ip = ["127.0.0.1".parse().expect("ip")];
    let first = ca.issue(&[], &ip, now).expect("first");
    // The CA as the controller reads it back from its Secret to reissue (issued at the real
    // now: a peer checks the validity against its own clock).
    let owner = cluster_controller::objects::Owner {
        name: "demo".into(),
        namespace: "nats".into(),
        reference: Default::default(),
    };
    let kept = RouteCa::from_secret("demo", &ca.secret(&owner)).expect("CA from its Secret");
    let second = kept
        .issue(&[], &ip, time::OffsetDateTime::now_utc())
        .expect("reissued");
    assert_ne!(first.cert_pem, second.cert_pem);

    let mut servers = Vec::new();
    for (i, (plan, cert)) in plans.iter().zip([&first, &second]).enumerate() {
        let tls = layout.tls_dir(i as u32, "routes");
        write(&format!("{tls}/tls.crt"), &cert.cert_pem);
        write(&format!("{tls}/tls.key"), &cert.key_pem);
        write(&format!("{tls}/ca.crt"), &cert.ca_pem);
        let mut config = ServerConfig::new(
            plan.server_name.clone(),
            plan.client.port,
            plan.monitor.port,
            PathBuf::from(&plan.pid_file),
        );
        config.lame_duck_duration = None;
        config.lame_duck_grace_period = None;
        config.extra = render(plan);
        let mut s = Server::new(
            bin.clone(),
            layout.server_dir(i as u32),
            "demo".into(),
            config,
        );
        s.start().await.expect("server starts");
        servers.push(s);
    }
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("http client");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let a = routes_of(&client, plans[0].monitor.port).await;
        let b = routes_of(&client, plans[1].monitor.port).await;
        if a.is_some_and(|n| n >= 1) && b.is_some_and(|n| n >= 1) {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let logs: Vec<String> = servers.iter().map(|s| s.log_tail()).collect();
            panic!(
                "no TLS route between the first and the reissued certificate: {a:?} {b:?}\n{}",
                logs.join("\n---\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(servers);
}
