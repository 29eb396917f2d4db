//! Live tier of the cluster controller (issue #5) on the local backend: NatsClusters applied to
//! a real kube-apiserver become nats-server processes through the cluster controller running
//! in-process on the local server lifecycle, and their status tells the truth.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cluster_controller::lifecycle::ServerLifecycle;
use sim::controlled::{read_cluster, wait_servers};
use sim::host::{Host, ObjectRef};

const WAIT: Duration = Duration::from_secs(120);

fn story(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

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
            &story("docs/stories/01-quickstart/01-natscluster.yaml"),
            &BTreeMap::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        applied,
        vec!["Namespace/default/nats", "NatsCluster/nats/demo"]
    );
    let demo = ObjectRef::parse("NatsCluster/nats/demo").expect("ref");
    let settled = match host.wait_condition(&demo, "Settled", WAIT).await {
        Ok(v) => v,
        Err(e) => {
            let now = host.get(&demo).await.unwrap_or_default();
            panic!("{e}\nconditions: {}", conditions(&now));
        }
    };
    wait_servers(&host, "nats", "demo", WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let cluster = read_cluster(&host, "nats", "demo").await.expect("cluster");
    let observed = host.lifecycle().observe(&cluster).await.expect("observe");
    assert_eq!(observed.len(), 3);
    for o in &observed {
        assert!(o.present && o.ready, "{o:?}");
        let a = host.lifecycle().address(&cluster, o.ordinal);
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
