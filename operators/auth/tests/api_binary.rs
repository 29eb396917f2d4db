//! The `auth-controller` binary against a real kube-apiserver 1.20: kubeconfig from the
//! environment, --resync, --metrics-addr and --system-connection; it signs story 02's trust roots
//! and serves /metrics with their conditions. A malformed --system-connection exits 2. Killed on
//! drop.

mod apirig;

use apirig::{Rig, WAIT, is, wait_for, wait_ready};
use nats_api::auth::{NatsOperator, NatsSystemAccount};

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_signs_and_serves_metrics() {
    let rig = Rig::bare(&["nats-system"]).await;
    let port = sim::ports::free_port();
    let _child = Child(
        std::process::Command::new(env!("CARGO_BIN_EXE_auth-controller"))
            .env("KUBECONFIG", rig.api.kubeconfig())
            .args([
                "--resync",
                "10s",
                "--metrics-addr",
                &format!("127.0.0.1:{port}"),
                "--system-connection",
                "nats-system/auth",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the binary starts"),
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
    let text = sim::wait::poll("/metrics answers", WAIT, || async move {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .map_err(|e| e.to_string())?;
        let mut body = String::new();
        s.read_to_string(&mut body)
            .await
            .map_err(|e| e.to_string())?;
        Ok(body
            .contains("name=\"demo\",type=\"Ready\",reason=\"Signed\"} 1")
            .then_some(body))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
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
