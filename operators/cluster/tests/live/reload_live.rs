//! Oracle: real nats-server processes.
//!
//! - The config digest computed in Rust from a rendered block is the one `nats-server -t`
//!   prints and `/varz` reports, for configs with awkward strings.
//! - On a three-server NATS cluster started from rendered configs, a reloadable change
//!   (max_payload, server_tags) reloads over `$SYS.REQ.SERVER.<id>.RELOAD` and is confirmed by
//!   `/varz` config_digest and config_load_time; a restart-only change (lame_duck_duration) is
//!   refused by the server and yields a restart, as the allow-list predicted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cluster_controller::apply_mode::{ApplyMode, apply_mode};
use cluster_controller::nats::ask_reload::reload_server;
use cluster_controller::reload::{ReloadDecision, ReloadTiming, config_digest};
use cluster_controller::render::conf::{Block, Value};
use cluster_controller::render::{
    JetStreamPlan, LAME_DUCK_DURATION, Listen, ServerPlan, render_block,
};
use nats_wire::{ConnectionConfig, Wire};
use sim::nats_conf::ServerConfig;
use sim::ports::free_port;
use sim::server::Server;

const VERSION: &str = sim::install::PINNED;

struct Ports {
    client: u16,
    monitor: u16,
    route: u16,
}

fn plan(dir: &Path, i: usize, ports: &[Ports]) -> ServerPlan {
    let p = &ports[i];
    ServerPlan {
        server_name: format!("demo-{i}"),
        cluster_name: "demo".into(),
        client: Listen::new("127.0.0.1", p.client),
        client_tls: None,
        monitor: Listen::new("127.0.0.1", p.monitor),
        route_listen: Listen::new("127.0.0.1", p.route),
        routes: ports
            .iter()
            .map(|q| format!("nats://127.0.0.1:{}", q.route))
            .collect(),
        route_tls: None,
        tags: vec![format!("ordinal:{i}")],
        pid_file: dir.join(format!("demo-{i}.pid")).display().to_string(),
        jetstream: Some(JetStreamPlan {
            store_dir: dir.join(format!("js-{i}")).display().to_string(),
            max_memory_store: Some(256 << 20),
            max_file_store: Some(1 << 30),
            domain: None,
            sync_interval: Some("always".into()),
        }),
        gateway: None,
        leafnodes: None,
        leaf_remotes: vec![],
        trust: None,
        lame_duck_duration: LAME_DUCK_DURATION.into(),
    }
}

/// The rendered block plus config accounts: the controller's system user (`sys`) in SYS.
fn with_accounts(mut b: Block) -> Block {
    let user = |u: &str| {
        let mut x = Block::new();
        x.set("user", u).set("password", u);
        Value::Block(x)
    };
    let mut sys = Block::new();
    sys.set("users", Value::List(vec![user("sys")]));
    let mut app = Block::new();
    app.set("jetstream", "enabled")
        .set("users", Value::List(vec![user("app")]));
    let mut accounts = Block::new();
    accounts.set("SYS", sys).set("APP", app);
    b.set("accounts", accounts).set("system_account", "SYS");
    b
}

/// `nats-server -t -c FILE`'s digest: "... is valid (sha256:...)".
fn server_digest(bin: &Path, conf: &Path) -> String {
    let out = Command::new(bin)
        .arg("-t")
        .arg("-c")
        .arg(conf)
        .output()
        .expect("nats-server -t runs");
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nats-server -t refused {}: {text}",
        conf.display()
    );
    let start = text
        .find("(sha256:")
        .unwrap_or_else(|| panic!("no digest in: {text}"));
    let rest = &text[start + 1..];
    rest[..rest.find(')').expect("closing paren")].to_string()
}

#[test]
fn the_computed_digest_is_the_one_nats_server_prints() {
    let bin = sim::install::nats_server(VERSION).expect("nats-server installs");
    let dir = tempfile::tempdir().expect("temp dir");
    let ports: Vec<Ports> = (0..3)
        .map(|_| Ports {
            client: free_port(),
            monitor: free_port(),
            route: free_port(),
        })
        .collect();
    let mut variants: Vec<(&str, Block)> = Vec::new();
    variants.push(("a plain server", render_block(&plan(dir.path(), 0, &ports))));
    variants.push((
        "with accounts",
        with_accounts(render_block(&plan(dir.path(), 1, &ports))),
    ));
    let mut odd = plan(dir.path(), 2, &ports);
    odd.tags = vec![
        "html:<b>&amp;</b>".into(),
        "quote:\"x\"".into(),
        "back:\\slash".into(),
        "unicode:zürich-東京".into(),
        "sep:\u{2028}".into(),
        "tab:\t".into(),
    ];
    let mut odd_block = render_block(&odd);
    odd_block.set("max_payload", 2i64 << 20);
    variants.push(("awkward strings and a later key", odd_block));

    for (i, (what, block)) in variants.iter().enumerate() {
        let path = dir.path().join(format!("v{i}.conf"));
        std::fs::write(&path, block.to_conf()).expect("write conf");
        assert_eq!(
            config_digest(block),
            server_digest(&bin, &path),
            "{what}:\n{}",
            block.to_conf()
        );
    }
}

struct Rig {
    // Declared first: the servers are killed (on Drop) before their directory goes.
    servers: Vec<Server>,
    blocks: Vec<Block>,
    plans: Vec<ServerPlan>,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start() -> Rig {
        let bin = sim::install::nats_server(VERSION).expect("nats-server installs");
        let dir = tempfile::tempdir().expect("temp dir");
        let ports: Vec<Ports> = (0..3)
            .map(|_| Ports {
                client: free_port(),
                monitor: free_port(),
                route: free_port(),
            })
            .collect();
        let mut servers = Vec::new();
        let mut blocks = Vec::new();
        let mut plans = Vec::new();
        for i in 0..3 {
            let p = plan(dir.path(), i, &ports);
            let block = with_accounts(render_block(&p));
            // The sim's server writes its own server_name, listen, http and pid_file first; the
            // rendered config repeats each with its own value and comes last, so the parsed
            // config, and its digest, is exactly the rendered block.
            let mut config = ServerConfig::new(
                p.server_name.clone(),
                p.client.port,
                p.monitor.port,
                PathBuf::from(&p.pid_file),
            );
            config.lame_duck_duration = None;
            config.lame_duck_grace_period = None;
            config.extra = block.to_conf();
            servers.push(Server::new(
                bin.clone(),
                dir.path().join(&p.server_name),
                "demo".into(),
                config,
            ));
            blocks.push(block);
            plans.push(p);
        }
        for s in &mut servers {
            s.start().await.expect("server starts");
        }
        Rig {
            servers,
            blocks,
            plans,
            _dir: dir,
        }
    }

    /// Rewrites server `i`'s config file with `block`, as the server lifecycle's write_config does.
    fn write(&mut self, i: usize, block: Block) {
        self.servers[i].config.extra = block.to_conf();
        self.servers[i].write_config().expect("config written");
        self.blocks[i] = block;
    }

    async fn varz(&self, i: usize) -> serde_json::Value {
        reqwest::get(format!("{}/varz", self.servers[i].monitor_url()))
            .await
            .expect("varz answers")
            .json()
            .await
            .expect("varz is JSON")
    }

    /// The system connection: the `sys` user of the SYS account.
    async fn system(&self) -> Wire {
        let url = format!("nats://sys:sys@127.0.0.1:{}", self.plans[0].client.port);
        nats_wire::dial(&ConnectionConfig::new([url]).with_request_timeout(Duration::from_secs(5)))
            .await
            .expect("the system user connects")
    }

    /// Polls until every server routes to the other two.
    async fn wait_routed(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let mut all = true;
            for i in 0..self.servers.len() {
                all &= self.varz(i).await["routes"].as_u64().unwrap_or(0) >= 2;
            }
            if all {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "servers did not route to each other"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloadable_change_reloads_and_a_restart_only_change_yields_a_restart() {
    let mut rig = Rig::start().await;
    rig.wait_routed().await;
    let wire = rig.system().await;
    let timing = ReloadTiming::default();

    // What runs is what was rendered: the digest from the block is the one /varz reports.
    for i in 0..3 {
        assert_eq!(
            rig.varz(i).await["config_digest"].as_str(),
            Some(config_digest(&rig.blocks[i]).as_str()),
            "demo-{i} reports the digest of its rendered config"
        );
    }

    // max_payload reloads (maxPayloadOption): confirmed by the digest and a later load time.
    let before = rig.varz(0).await;
    let mut block = rig.blocks[0].clone();
    block.set("max_payload", 2i64 << 20);
    let expected = config_digest(&block);
    rig.write(0, block);
    assert_eq!(
        reload_server(&wire, "demo-0", &expected, timing).await,
        ReloadDecision::Reloaded
    );
    let after = rig.varz(0).await;
    assert_eq!(after["max_payload"].as_i64(), Some(2 << 20));
    assert_eq!(after["config_digest"].as_str(), Some(expected.as_str()));
    assert!(
        after["config_load_time"].as_str() > before["config_load_time"].as_str(),
        "config_load_time advanced: {} -> {}",
        before["config_load_time"],
        after["config_load_time"]
    );
    assert_eq!(after["start"], before["start"], "reloaded, not restarted");
    // Asked again, the server already runs it.
    assert_eq!(
        reload_server(&wire, "demo-0", &expected, timing).await,
        ReloadDecision::AlreadyCurrent
    );

    // A file that reaches the server late, as on Kubernetes, where the kubelet projects a changed
    // ConfigMap into the pod at its next sync: the first reload reads the file the server ran,
    // and the reload is asked for again until the rendered one is read. Here the new file is
    // written only once the server has reloaded the old one.
    let before = rig.varz(0).await;
    let mut block = rig.blocks[0].clone();
    block.set("max_payload", 3i64 << 20);
    let expected = config_digest(&block);
    let project_late = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while rig.varz(0).await["config_load_time"] == before["config_load_time"] {
            assert!(
                tokio::time::Instant::now() < deadline,
                "demo-0 never reloaded the file it ran"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(rig.varz(0).await["config_digest"], before["config_digest"]);
        rig.write(0, block);
    };
    let (decision, ()) = tokio::join!(
        reload_server(&wire, "demo-0", &expected, timing),
        project_late
    );
    assert_eq!(decision, ReloadDecision::Reloaded);
    let after = rig.varz(0).await;
    assert_eq!(after["max_payload"].as_i64(), Some(3 << 20));
    assert_eq!(after["start"], before["start"], "reloaded, not restarted");

    // A change the allow-list calls reloadable (server_tags) reloads on the real server too.
    let old_plan = rig.plans[1].clone();
    let mut new_plan = old_plan.clone();
    new_plan.tags.push("zone:b".into());
    assert!(matches!(
        apply_mode(&old_plan, &new_plan, VERSION),
        ApplyMode::Reload { .. }
    ));
    let block = with_accounts(render_block(&new_plan));
    let expected = config_digest(&block);
    rig.write(1, block);
    assert_eq!(
        reload_server(&wire, "demo-1", &expected, timing).await,
        ReloadDecision::Reloaded
    );
    let tags = rig.varz(1).await["tags"].clone();
    assert!(
        tags.as_array()
            .is_some_and(|t| t.iter().any(|x| x == "zone:b")),
        "{tags}"
    );

    // lame_duck_duration is restart-only: the allow-list says restart, the server refuses the
    // reload, and the decision is a restart naming why; the server keeps what it ran.
    let old_plan = rig.plans[2].clone();
    let mut new_plan = old_plan.clone();
    new_plan.lame_duck_duration = "3m".into();
    match apply_mode(&old_plan, &new_plan, VERSION) {
        ApplyMode::Restart { restart_only, .. } => {
            assert_eq!(restart_only, vec!["lame_duck_duration"])
        }
        other => panic!("expected a restart, got {other:?}"),
    }
    let running = rig.varz(2).await["config_digest"].clone();
    let block = with_accounts(render_block(&new_plan));
    let expected = config_digest(&block);
    rig.write(2, block);
    match reload_server(&wire, "demo-2", &expected, timing).await {
        ReloadDecision::Restart { reason } => assert!(
            reason.contains("reload of demo-2 failed") && reason.contains("LameDuckDuration"),
            "{reason}"
        ),
        other => panic!("expected a restart, got {other:?}"),
    }
    assert_eq!(rig.varz(2).await["config_digest"], running);

    // A server that does not exist cannot be reloaded either: restart (here: start) it.
    match reload_server(
        &wire,
        "demo-9",
        &expected,
        ReloadTiming {
            request: Duration::from_millis(500),
            ..timing
        },
    )
    .await
    {
        ReloadDecision::Restart { reason } => assert!(reason.contains("demo-9"), "{reason}"),
        other => panic!("expected a restart, got {other:?}"),
    }
    drop(rig);
}
