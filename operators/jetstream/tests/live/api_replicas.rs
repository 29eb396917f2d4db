//! API tier: two replicas of the `jetstream-controller` binary under leader election on a real
//! kube-apiserver 1.20 — exactly one reconciles (its passes counted from each one's /metrics), a
//! SIGKILLed leader is replaced once its Lease expires, a SIGTERMed one releases the Lease on its
//! way out and exits 0 (`sim::testkit::replicas::prove_takeover`). No nats-server is needed: a
//! NatsConnection to a port nobody listens on is passed over all the same (Ready False), and
//! what the controller keeps only in memory (the move lease) goes with each process that stops
//! leading.

use kube::api::{Api, PostParams};
use nats_api::nats::NatsConnection;
use serde_json::json;
use sim::testkit::replicas::{Takeover, prove_takeover};

const NS: &str = "apps";
const RELEASE: &str = "ops";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_replicas_one_reconciles_and_the_other_takes_over_on_kill_and_on_term() {
    let api = sim::testkit::apiserver_with_crds(&[NS, RELEASE]).await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let client = api.client();
    let figures = prove_takeover(
        api.kubeconfig(),
        client.clone(),
        &Takeover {
            program: &sim::bin_exe!("jetstream-controller"),
            kind: "NatsConnection",
            args: &["--resync", "10s"],
            namespace: RELEASE,
        },
        dir.path(),
        || async {
            let conn: NatsConnection = serde_json::from_value(json!({
                "apiVersion": "nats.mikluko.io/v1beta1",
                "kind": "NatsConnection",
                "metadata": {"name": "nowhere", "namespace": NS},
                "spec": {"servers": [format!("nats://127.0.0.1:{}", sim::ports::free_port())]},
            }))
            .expect("a NatsConnection");
            Api::<NatsConnection>::namespaced(client.clone(), NS)
                .create(&PostParams::default(), &conn)
                .await
                .expect("the NatsConnection is created");
        },
    )
    .await;
    println!(
        "jetstream-controller takeover: {} ms after SIGKILL (lease 8 s), {} ms after SIGTERM",
        figures.after_kill.as_millis(),
        figures.after_term.as_millis()
    );
}
