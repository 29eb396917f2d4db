//! Live tier of the cluster controller (issue #5) on the local backend: NatsClusters applied to
//! a real kube-apiserver become nats-server processes through the cluster controller running
//! in-process on the local server lifecycle, and their status tells the truth.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use cluster_controller::server_lifecycle::ServerLifecycle;
use sim::control_plane::{Host, ObjectRef};
use sim::controlled::{read_cluster, wait_servers};
use sim::testkit::{wait_condition, workspace_path};

const WAIT: Duration = Duration::from_secs(120);

async fn http_json(url: String) -> Option<serde_json::Value> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    client.get(url).send().await.ok()?.json().await.ok()
}

async fn host(controllers: &[&str]) -> Host {
    Host::start(&["nats"], controllers)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Prints the condition list of an object (on failure, the evidence).
fn conditions(v: &serde_json::Value) -> String {
    v.pointer("/status/conditions")
        .map(|c| c.to_string())
        .unwrap_or_else(|| "no status".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_becomes_three_jetstream_servers_and_settles() {
    let host = host(&["cluster"]).await;
    let applied = host
        .apply_manifest(
            &workspace_path("docs/stories/01-quickstart/01-natscluster.yaml"),
            &BTreeMap::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        applied,
        vec!["Namespace/default/nats", "NatsCluster/nats/demo"]
    );
    let demo = ObjectRef::parse("NatsCluster/nats/demo").expect("ref");
    let settled = wait_condition(&host, &demo, "Settled", WAIT).await;
    wait_servers(&host, "nats", "demo", WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let cluster = read_cluster(&host, "nats", "demo").await.expect("cluster");
    let observed = host
        .server_lifecycle()
        .observe(&cluster)
        .await
        .expect("observe");
    assert_eq!(observed.len(), 3);
    for o in &observed {
        assert!(o.present && o.ready, "{o:?}");
        let a = host.server_lifecycle().address(&cluster, o.ordinal);
        let jsz = http_json(format!("{}/jsz", a.monitor_url))
            .await
            .expect("jsz");
        assert_eq!(jsz["meta_cluster"]["cluster_size"], 3, "{jsz}");
        assert!(
            jsz["config"]["max_memory"].as_i64() == Some(3 << 30),
            "{jsz}"
        );
        let varz = http_json(format!("{}/varz", a.monitor_url))
            .await
            .expect("varz");
        assert_eq!(varz["server_name"], o.server_name);
        assert_eq!(varz["cluster"]["tls_required"], true, "routes run TLS");
    }
    assert!(
        host.wait_condition(&demo, "Ready", Duration::from_secs(10))
            .await
            .is_ok(),
        "{}",
        conditions(&settled)
    );
    println!("status: {}", settled["status"]);
}

/// Applies `text` after substituting the ports of every NatsCluster in it, so the manifest's
/// gateway remotes and connections can name `${<name>.gateway}`, `${<name>.leafnodes}`.
async fn apply_reserved(host: &Host, dir: &Path, file: &str, text: &str) -> Vec<(String, String)> {
    let path = dir.join(file);
    std::fs::write(&path, text).expect("manifest");
    let mut vars = BTreeMap::new();
    let mut clusters = Vec::new();
    for (cluster, v) in sim::controlled::reserve(host, &path).expect("reserve") {
        vars.extend(v);
        clusters.push(cluster);
    }
    host.apply_manifest(&path, &vars)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    clusters
}

async fn wait_condition_or_dump(host: &Host, object: &str, condition: &str) -> serde_json::Value {
    wait_condition(
        host,
        &ObjectRef::parse(object).expect("ref"),
        condition,
        WAIT,
    )
    .await
}

/// A Secret holding a certificate for 127.0.0.1 under `ca`, as a gateway listener reads it.
fn tls_secret(name: &str, ca: &cluster_controller::route_ca::RouteCa) -> String {
    let cert = sim::testkit::localhost_cert(ca);
    let q = |s: &str| serde_json::to_string(s).expect("json");
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{ name: {name}, namespace: nats }}\nstringData:\n  tls.crt: {}\n  tls.key: {}\n  ca.crt: {}\n",
        q(&cert.cert_pem),
        q(&cert.key_pem),
        q(&cert.ca_pem)
    )
}

fn gateway_cluster(name: &str) -> String {
    format!(
        r#"apiVersion: cluster.nats.mikluko.io/v1beta1
kind: NatsCluster
metadata: {{ name: {name}, namespace: nats }}
spec:
  version: 2.15.1
  replicas: 2
  resources: {{ limits: {{ memory: 512Mi }} }}
  jetstream: {{}}
  gateway:
    discovery: Explicit
    remotes:
      - {{ name: east, url: "${{east.gateway}}" }}
      - {{ name: west, url: "${{west.gateway}}" }}
    tls:
      secretRef: {{ name: {name}-gateway-tls }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nats_clusters_with_gateway_remotes_form_a_supercluster() {
    let host = host(&["cluster"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = cluster_controller::route_ca::RouteCa::generate(
        "gateways",
        time::OffsetDateTime::now_utc(),
    )
    .expect("CA");
    let text = format!(
        "{}---\n{}---\n{}---\n{}",
        tls_secret("east-gateway-tls", &ca),
        tls_secret("west-gateway-tls", &ca),
        gateway_cluster("east"),
        gateway_cluster("west"),
    );
    let clusters = apply_reserved(&host, dir.path(), "supercluster.yaml", &text).await;
    assert_eq!(clusters.len(), 2);
    for name in ["east", "west"] {
        let v = wait_condition_or_dump(&host, &format!("NatsCluster/{name}"), "GatewaysConnected")
            .await;
        println!("{name}: {}", conditions(&v));
    }
    // Every server holds one outbound gateway to the other cluster, and each lands as an
    // inbound one on some server there (a server picks one remote server to dial, so not
    // every server has an inbound gateway).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut missing = Vec::new();
        for name in ["east", "west"] {
            let other = if name == "east" { "west" } else { "east" };
            let cluster = read_cluster(&host, "nats", name).await.expect("cluster");
            let mut inbound = 0;
            for i in 0..2 {
                let a = host.server_lifecycle().address(&cluster, i);
                let g = http_json(format!("{}/gatewayz", a.monitor_url))
                    .await
                    .unwrap_or_default();
                if !g["outbound_gateways"][other].is_object() {
                    missing.push(format!("{name}-{i} -> {other}"));
                }
                inbound += g["inbound_gateways"][other]
                    .as_array()
                    .map(Vec::len)
                    .unwrap_or(0);
            }
            if inbound != 2 {
                missing.push(format!(
                    "{name} holds {inbound} inbound gateways from {other}"
                ));
            }
        }
        if missing.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gateways missing: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A remote added that nothing answers (the Go reference's tests do the same): east's status
    // lists it unconnected and GatewaysConnected reads False naming it; removed again, status and
    // condition follow back. The endpoints, which name east's own listener, never move.
    let east = ObjectRef::parse("NatsCluster/nats/east").expect("ref");
    let endpoints = host.get(&east).await.expect("east")["status"]["endpoints"].clone();
    assert!(endpoints["gateway"].is_string(), "{endpoints}");
    let north = sim::ports::free_port();
    let with_north = gateway_cluster("east").replace(
        "      - { name: west, url: \"${west.gateway}\" }\n",
        &format!(
            "      - {{ name: west, url: \"${{west.gateway}}\" }}\n      - {{ name: north, url: \"nats://127.0.0.1:{north}\" }}\n"
        ),
    );
    assert!(with_north.contains("north"), "{with_north}");
    let secrets = format!(
        "{}---\n{}---\n",
        tls_secret("east-gateway-tls", &ca),
        tls_secret("west-gateway-tls", &ca)
    );
    let apply = |east_text: String| {
        let text = format!("{secrets}{east_text}---\n{}", gateway_cluster("west"));
        let (host, dir) = (&host, dir.path());
        async move { apply_reserved(host, dir, "supercluster.yaml", &text).await }
    };
    apply(with_north).await;
    let unreachable = gateways_read(&host, &east, "north added", |v| {
        let listed = v["status"]["gateways"].as_array().is_some_and(|g| {
            g.iter()
                .any(|g| g["name"] == "north" && g["connected"] == false)
        });
        listed
            && sim::control_plane::condition_of(v, "GatewaysConnected").is_some_and(|(s, r, m)| {
                s == "False" && r == "MembersUnreachable" && m.contains("north")
            })
    })
    .await;
    assert_eq!(unreachable["status"]["endpoints"], endpoints);
    apply(gateway_cluster("east")).await;
    let back = gateways_read(&host, &east, "north removed", |v| {
        let names: Vec<&str> = v["status"]["gateways"]
            .as_array()
            .map(|g| g.iter().filter_map(|g| g["name"].as_str()).collect())
            .unwrap_or_default();
        !names.contains(&"north")
            && sim::control_plane::condition_of(v, "GatewaysConnected")
                .is_some_and(|(s, _, _)| s == "True")
    })
    .await;
    assert_eq!(back["status"]["endpoints"], endpoints);
}

/// East's object once `done` holds of it (its status at the current generation), or a panic
/// naming `what` and the last status read.
async fn gateways_read(
    host: &Host,
    east: &ObjectRef,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Ok(v) = host.get(east).await {
            let current = v["status"]["observedGeneration"] == v["metadata"]["generation"];
            if current && done(&v) {
                return v;
            }
            last = v["status"].clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: east's status never followed within {WAIT:?}: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_nats_cluster_connects_to_its_hub() {
    let host = host(&["cluster"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    // A leafnode listener needs an auth plane (a CEL rule of the CRD): the hub runs under trust
    // roots the sim signs, and the edge's remote authenticates as the workload account's user.
    let trust = sim::trust::generate().unwrap_or_else(|e| panic!("{e}"));
    let creds = serde_json::to_string(&trust.workload_creds).expect("a quoted scalar");
    let text = r#"apiVersion: nats.mikluko.io/v1beta1
kind: NatsOperatorTrust
metadata: { name: sim, namespace: nats }
spec:
  operatorJWT: ${trust.operator_jwt}
  systemAccountJWT: ${trust.system_account_jwt}
---
apiVersion: nats.mikluko.io/v1beta1
kind: NatsAccountTrust
metadata: { name: app, namespace: nats }
spec:
  publicKey: ${trust.account}
  jwt: ${trust.account_jwt}
---
apiVersion: v1
kind: Secret
metadata: { name: hub-leaf-creds, namespace: nats }
stringData:
  user.creds: ${leaf_creds}
---
apiVersion: cluster.nats.mikluko.io/v1beta1
kind: NatsCluster
metadata: { name: hub, namespace: nats }
spec:
  version: 2.15.1
  replicas: 2
  resources: { limits: { memory: 512Mi } }
  jetstream: {}
  auth:
    trustRef: { name: sim }
    accountTrustRefs: [{ name: app }]
  leafnodes: {}
---
apiVersion: nats.mikluko.io/v1beta1
kind: NatsConnection
metadata: { name: hub-leaf, namespace: nats }
spec:
  servers: ["${hub.leafnodes}"]
  credentials:
    secretKeyRef: { name: hub-leaf-creds }
---
apiVersion: cluster.nats.mikluko.io/v1beta1
kind: NatsCluster
metadata: { name: edge, namespace: nats }
spec:
  version: 2.15.1
  replicas: 2
  resources: { limits: { memory: 512Mi } }
  jetstream: { domain: edge }
  leafRemotes:
    - connectionRef: { name: hub-leaf }
"#;
    let mut vars = trust.vars.clone();
    vars.insert("leaf_creds".into(), creds);
    apply_reserved(
        &host,
        dir.path(),
        "leaf.yaml",
        &sim::control_plane::substitute(text, &vars),
    )
    .await;
    let edge = ObjectRef::parse("NatsCluster/edge").expect("ref");
    let v = match host.wait_condition(&edge, "LeafnodesConnected", WAIT).await {
        Ok(v) => v,
        Err(e) => {
            dump_leaf_pair(&host).await;
            panic!("{e}");
        }
    };
    println!("edge: {}", conditions(&v));
    let hub = read_cluster(&host, "nats", "hub").await.expect("hub");
    let mut leafs = 0;
    for i in 0..2 {
        let a = host.server_lifecycle().address(&hub, i);
        let l = http_json(format!("{}/leafz", a.monitor_url))
            .await
            .expect("leafz");
        leafs += l["leafnodes"].as_u64().unwrap_or(0);
    }
    assert!(
        leafs >= 2,
        "both edge servers are leaf connections of the hub"
    );
}

/// What a leaf pair that never connected looked like: each NatsCluster's and the
/// NatsConnection's status, and each server's leafz, rendered config and log tail.
async fn dump_leaf_pair(host: &Host) {
    for object in [
        "NatsCluster/hub",
        "NatsCluster/edge",
        "NatsConnection/hub-leaf",
    ] {
        let r = ObjectRef::parse(object).expect("ref");
        match host.get(&r).await {
            Ok(v) => eprintln!("{object}: status {}", v["status"]),
            Err(e) => eprintln!("{object}: {e}"),
        }
    }
    let lifecycle = host.server_lifecycle();
    for name in ["hub", "edge"] {
        if let Ok(cluster) = read_cluster(host, "nats", name).await {
            for i in 0..2 {
                let a = lifecycle.address(&cluster, i);
                let leafz = http_json(format!("{}/leafz", a.monitor_url)).await;
                eprintln!("{name}-{i} leafz: {leafz:?}");
            }
        }
        let root = lifecycle.cluster_root("nats", name);
        let mut dirs: Vec<_> = std::fs::read_dir(&root)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        dirs.sort();
        for dir in dirs.into_iter().filter(|d| d.is_dir()) {
            let config =
                std::fs::read_to_string(dir.join(sim::server::server_process::CONFIG_FILE))
                    .unwrap_or_default();
            let log = sim::server::server_process::log_tail(
                &dir.join(sim::server::server_process::LOG_FILE),
                0,
                60,
            );
            eprintln!("{}: config:\n{config}\nlog tail:\n{log}", dir.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_cluster_under_an_operator_trust_boots_with_the_system_account() {
    let roots = sim::trust::Roots::sign("live").expect("trust roots");
    let (operator_jwt, sys_jwt, sys) = (&roots.operator_jwt, &roots.system_jwt, &roots.system);
    let creds = sim::trust::user_creds(sys, "cluster-controller").expect("creds");
    let q = |s: &str| serde_json::to_string(s).expect("json");

    let host = host(&["cluster"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let text = format!(
        r#"apiVersion: nats.mikluko.io/v1beta1
kind: NatsOperatorTrust
metadata: {{ name: live, namespace: nats }}
spec:
  operatorJWT: {op}
  systemAccountJWT: {sys}
---
apiVersion: v1
kind: Secret
metadata: {{ name: controller-creds, namespace: nats }}
stringData:
  user.creds: {creds}
---
apiVersion: cluster.nats.mikluko.io/v1beta1
kind: NatsCluster
metadata: {{ name: trusted, namespace: nats }}
spec:
  version: 2.15.1
  replicas: 3
  resources: {{ limits: {{ memory: 512Mi }} }}
  jetstream: {{}}
  auth:
    trustRef: {{ name: live }}
    systemCredentials:
      secretKeyRef: {{ name: controller-creds }}
"#,
        op = q(operator_jwt),
        sys = q(sys_jwt),
        creds = q(&creds),
    );
    apply_reserved(&host, dir.path(), "trusted.yaml", &text).await;
    let v = wait_condition_or_dump(&host, "NatsCluster/trusted", "Settled").await;
    println!("trusted: {}", conditions(&v));
    wait_condition_or_dump(&host, "NatsCluster/trusted", "Ready").await;

    let cluster = read_cluster(&host, "nats", "trusted")
        .await
        .expect("cluster");
    let urls: Vec<async_nats::ServerAddr> = (0..3)
        .map(|i| {
            host.server_lifecycle()
                .address(&cluster, i)
                .client_url
                .parse()
                .expect("url")
        })
        .collect();
    for i in 0..3 {
        let a = host.server_lifecycle().address(&cluster, i);
        let varz = http_json(format!("{}/varz", a.monitor_url))
            .await
            .expect("varz");
        assert_eq!(varz["system_account"], sys.public_key(), "{varz}");
    }
    // A user of the preloaded system account is admitted and every server answers it.
    let client = async_nats::ConnectOptions::with_credentials(&creds)
        .expect("creds parse")
        .connect(urls)
        .await
        .expect("a system user connects");
    let reply = client.new_inbox();
    let mut inbox = client.subscribe(reply.clone()).await.expect("subscribe");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut servers = std::collections::BTreeSet::new();
    while servers.len() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {servers:?} answered STATSZ"
        );
        client
            .publish_with_reply("$SYS.REQ.SERVER.PING.STATSZ", reply.clone(), "".into())
            .await
            .expect("publish");
        while let Ok(Some(m)) = tokio::time::timeout(
            Duration::from_millis(500),
            futures::StreamExt::next(&mut inbox),
        )
        .await
        {
            let v: serde_json::Value = serde_json::from_slice(&m.payload).unwrap_or_default();
            if let Some(n) = v["server"]["name"].as_str() {
                servers.insert(n.to_string());
            }
        }
    }
    assert_eq!(
        servers.into_iter().collect::<Vec<_>>(),
        vec!["trusted-0", "trusted-1", "trusted-2"]
    );
}

/// Story 02's auth plane through all three controllers: the auth controller signs the trust roots
/// and the cluster controller's system user, the cluster controller boots the NatsCluster under
/// them with client TLS, and observes it over that system user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auth_plane_story_boots_under_the_auth_controllers_trust() {
    let host = host(&["auth", "cluster", "jetstream"]).await;
    let none = BTreeMap::new();
    for m in ["01-trust-roots.yaml", "02-system-users.yaml"] {
        host.apply_manifest(
            &workspace_path(format!("docs/stories/02-auth-plane/{m}")),
            &none,
        )
        .await
        .unwrap_or_else(|e| panic!("{m}: {e}"));
    }
    let trust = wait_condition_or_dump(&host, "NatsOperatorTrust/nats-system/demo", "Ready").await;
    let operator_jwt = trust["status"]["operatorJWT"]
        .as_str()
        .expect("operator JWT");
    let operator: nats_claims::OperatorClaims =
        nats_claims::decode(operator_jwt).expect("operator claims");
    let system_account = operator.nats.system_account.clone();
    assert!(!system_account.is_empty());

    // The client TLS Secret the story's NatsCluster names (cert-manager's shape).
    let ca =
        cluster_controller::route_ca::RouteCa::generate("client", time::OffsetDateTime::now_utc())
            .expect("CA");
    let secret =
        tls_secret("demo-client-tls", &ca).replace("namespace: nats", "namespace: nats-system");
    host.apply_text(Path::new("client-tls"), &secret)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    host.apply_manifest(
        &workspace_path("docs/stories/02-auth-plane/03-natscluster.yaml"),
        &none,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let v = wait_condition_or_dump(&host, "NatsCluster/nats-system/demo", "Ready").await;
    println!("demo: {}", conditions(&v));
    let cluster = read_cluster(&host, "nats-system", "demo")
        .await
        .expect("cluster");
    for i in 0..3 {
        let a = host.server_lifecycle().address(&cluster, i);
        let varz = http_json(format!("{}/varz", a.monitor_url))
            .await
            .expect("varz");
        assert_eq!(varz["system_account"], system_account.as_str(), "{varz}");
        assert_eq!(varz["tls_required"], true, "client TLS: {varz}");
    }

    // The cluster-controller user the auth controller signed is admitted over client TLS, and
    // every server answers its JSZ ping when replies come back under the preset's inbox prefix.
    let creds_secret = host
        .get(&ObjectRef::parse("Secret/nats-system/cluster-controller-creds").expect("ref"))
        .await
        .expect("creds Secret");
    let creds = creds_secret["data"]["user.creds"]
        .as_str()
        .map(|b| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .expect("base64")
        })
        .map(|b| String::from_utf8(b).expect("utf8"))
        .expect("user.creds");
    let ca_path = dir_for_ca(&ca);
    let urls: Vec<async_nats::ServerAddr> = (0..3)
        .map(|i| {
            host.server_lifecycle()
                .address(&cluster, i)
                .client_url
                .replace("nats://", "tls://")
                .parse()
                .expect("url")
        })
        .collect();
    let answered = |prefix: Option<&'static str>| {
        let creds = creds.clone();
        let urls = urls.clone();
        let ca_path = ca_path.path().join("ca.crt");
        async move {
            let mut opts = async_nats::ConnectOptions::with_credentials(&creds)
                .expect("creds parse")
                .add_root_certificates(ca_path)
                .require_tls(true);
            if let Some(p) = prefix {
                opts = opts.custom_inbox_prefix(p);
            }
            let client = opts.connect(urls).await.expect("the system user connects");
            let reply = client.new_inbox();
            let mut inbox = client.subscribe(reply.clone()).await.expect("subscribe");
            client
                .publish_with_reply("$SYS.REQ.SERVER.PING.JSZ", reply, "".into())
                .await
                .expect("publish");
            client.flush().await.expect("flush");
            let mut n = 0;
            while let Ok(Some(_)) =
                tokio::time::timeout(Duration::from_secs(2), futures::StreamExt::next(&mut inbox))
                    .await
            {
                n += 1;
            }
            n
        }
    };
    assert_eq!(answered(Some("_INBOX.cluster-controller")).await, 3);
    assert_eq!(
        answered(None).await,
        0,
        "the preset admits replies only under _INBOX.cluster-controller.>"
    );
}

/// The CA certificate written to a directory, for a client to trust.
fn dir_for_ca(ca: &cluster_controller::route_ca::RouteCa) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("ca.crt"), &ca.cert_pem).expect("ca");
    dir
}
