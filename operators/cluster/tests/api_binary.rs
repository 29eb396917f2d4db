//! API tier: the `cluster-controller` binary against a real kube-apiserver 1.20 — its flags
//! reach what it renders (`--controller-namespace` in the NetworkPolicy,
//! `--allow-gateway-without-tls`), it reconciles, and it serves /metrics.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, PostParams};
use nats_api::cluster::NatsCluster;
use serde::Deserialize;
use serde_json::json;
use sim::apiserver::ApiServer;

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "nats";

/// The binary, killed and reaped when the test ends, pass or fail.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn quickstart() -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/stories/01-quickstart/01-natscluster.yaml");
    let text = std::fs::read_to_string(path).expect("quickstart manifest");
    serde_yaml::Deserializer::from_str(&text)
        .map(serde_yaml::Value::deserialize)
        .map_while(Result::ok)
        .map(|v| serde_json::to_value(v).expect("json"))
        .find(|v| v["kind"] == "NatsCluster")
        .expect("a NatsCluster")
}

async fn metrics(port: u16) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut body = String::new();
    s.read_to_string(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    Ok(body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reconciles_with_its_flags_and_serves_metrics() {
    let api = ApiServer::kube_1_20()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    api.install_crds(&nats_api::crds::all())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    api.create_namespace(NS)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let port = sim::ports::free_port();
    let _child = Child(
        std::process::Command::new(env!("CARGO_BIN_EXE_cluster-controller"))
            .env("KUBECONFIG", api.kubeconfig())
            .args([
                "--metrics-addr",
                &format!("127.0.0.1:{port}"),
                "--controller-namespace",
                "ops",
                "--cluster-domain",
                "example.internal",
                "--allow-gateway-without-tls",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the binary starts"),
    );
    let clusters: Api<NatsCluster> = Api::namespaced(api.client(), NS);
    let mut doc = quickstart();
    doc["spec"]["gateway"] = json!({
        "discovery": "Explicit",
        "remotes": [{"name": "west", "url": "nats://west.example:7222"}],
    });
    let c: NatsCluster = serde_json::from_value(doc).expect("a NatsCluster");
    clusters
        .create(&PostParams::default(), &c)
        .await
        .expect("created");

    let sets: Api<StatefulSet> = Api::namespaced(api.client(), NS);
    sim::wait::poll("the three StatefulSets", WAIT, || {
        let sets = sets.clone();
        async move {
            let mut n = 0;
            for i in 0..3 {
                n += usize::from(
                    sets.get_opt(&format!("demo-{i}"))
                        .await
                        .map_err(|e| e.to_string())?
                        .is_some(),
                );
            }
            Ok((n == 3).then_some(()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // --controller-namespace: the only namespace admitted to the monitoring port.
    let np = Api::<NetworkPolicy>::namespaced(api.client(), NS)
        .get("demo")
        .await
        .expect("the NetworkPolicy");
    let text = serde_json::to_string(&np).expect("json");
    assert!(text.contains("\"ops\""), "{text}");
    assert!(!text.contains("nats-system"), "{text}");
    // --cluster-domain: the routes dial the pods under it.
    let cm = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(api.client(), NS)
        .get("demo-0-config")
        .await
        .expect("ConfigMap");
    let conf = &cm.data.expect("data")["nats.conf"];
    assert!(
        conf.contains("demo-1-0.demo-headless.nats.svc.example.internal"),
        "{conf}"
    );
    // --allow-gateway-without-tls: the gateway is rendered instead of refused.
    assert!(conf.contains("gateway"), "{conf}");

    let body = sim::wait::poll("/metrics with demo's conditions", WAIT, || async move {
        let body = metrics(port).await?;
        // The pass counter is bumped once the pass returns, just after its status is written.
        Ok((body.contains("name=\"demo\"")
            && body.contains("type=\"Ready\"")
            && body.contains("nats_operator_reconcile_total{controller=\"NatsCluster\"}"))
        .then_some(body))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    assert!(!body.contains("GatewayWithoutTLS"), "{body}");
}
