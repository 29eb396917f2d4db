//! The `auth-controller` binary against a real kube-apiserver 1.20: kubeconfig from the
//! environment, --resync, --metrics-addr and --system-connection; it signs story 02's trust roots
//! and serves /metrics with their conditions. A malformed --system-connection exits 2. Killed on
//! drop.

use crate::apirig;

use apirig::{Rig, wait_ready};
use nats_api::auth::{NatsOperator, NatsSystemAccount};
use sim::testkit::{WAIT, is, spawn_binary, wait_for, wait_metrics};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_signs_and_serves_metrics() {
    let rig = Rig::bare(&["nats-system"]).await;
    let port = sim::ports::free_port();
    let _child = spawn_binary(
        env!("CARGO_BIN_EXE_auth-controller"),
        rig.api.kubeconfig(),
        &[
            "--resync",
            "10s",
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            // Any free port: the default 8081 would clash between tests run at once.
            "--probe-addr",
            "127.0.0.1:0",
            "--system-connection",
            "nats-system/auth",
        ],
    );
    rig.apply_story("02-auth-plane", "01-trust-roots.yaml", &[])
        .await;
    wait_ready(
        &rig.api::<NatsOperator>("nats-system"),
        "demo",
        "True",
        "Signed",
    )
    .await;
    // The NatsConnection it names does not exist: nothing can be pushed, and it says why.
    wait_for(
        &rig.api::<NatsSystemAccount>("nats-system"),
        "system",
        "system Unreachable",
        |o| is(o, "Ready", "True", "Signed") && is(o, "Distributed", "False", "Unreachable"),
    )
    .await;
    let text = wait_metrics(port, "/metrics answers", WAIT, |body| {
        body.contains("name=\"demo\",type=\"Ready\",reason=\"Signed\"} 1")
    })
    .await;
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
}

#[test]
fn a_malformed_system_connection_exits_2() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_auth-controller"))
        .args(["--system-connection", "no-namespace"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("namespace/name"));
}
