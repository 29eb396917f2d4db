//! API tier: two replicas of the `cluster-controller` binary under leader election on a real
//! kube-apiserver 1.20 — exactly one reconciles (counted from each one's /metrics), a SIGKILLed
//! leader is replaced once its Lease expires, a SIGTERMed one releases the Lease on its way out
//! and exits 0 (`sim::testkit::replicas::prove_takeover`).

use kube::api::{Api, PostParams};
use nats_api::cluster::NatsCluster;
use sim::testkit::replicas::{Takeover, prove_takeover};

const NS: &str = "nats";
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
            program: &sim::bin_exe!("cluster-controller"),
            kind: "NatsCluster",
            args: &["--controller-namespace", RELEASE],
            namespace: RELEASE,
        },
        dir.path(),
        || async {
            let c: NatsCluster = sim::testkit::story_object(
                "docs/stories/01-quickstart/01-natscluster.yaml",
                "NatsCluster",
            );
            Api::<NatsCluster>::namespaced(client.clone(), NS)
                .create(&PostParams::default(), &c)
                .await
                .expect("the NatsCluster is created");
        },
    )
    .await;
    println!(
        "cluster-controller takeover: {} ms after SIGKILL (lease 8 s), {} ms after SIGTERM",
        figures.after_kill.as_millis(),
        figures.after_term.as_millis()
    );
}
