//! API tier: two replicas of the `auth-controller` binary under leader election on a real
//! kube-apiserver 1.20 — exactly one signs (its passes counted from each one's /metrics), a
//! SIGKILLed leader is replaced once its Lease expires, a SIGTERMed one releases the Lease on its
//! way out and exits 0 (`sim::testkit::replicas::prove_takeover`). What the auth controller keeps
//! only in memory (the never-push-older floor) goes with each process that stops leading.

use crate::apirig::Rig;
use sim::testkit::replicas::{Takeover, prove_takeover};

const NS: &str = "nats-system";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_replicas_one_signs_and_the_other_takes_over_on_kill_and_on_term() {
    let rig = Rig::bare(&[NS]).await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let figures = prove_takeover(
        rig.api.kubeconfig(),
        rig.api.client(),
        &Takeover {
            program: &sim::bin_exe!("auth-controller"),
            kind: "NatsOperator",
            args: &["--system-connection", "nats-system/auth"],
            namespace: NS,
        },
        dir.path(),
        || rig.apply_story("02-auth-plane", "01-trust-roots.yaml", &[]),
    )
    .await;
    println!(
        "auth-controller takeover: {} ms after SIGKILL (lease 8 s), {} ms after SIGTERM",
        figures.after_kill.as_millis(),
        figures.after_term.as_millis()
    );
}
