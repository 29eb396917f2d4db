//! `sim up` driven as a user drives it: the binary started, story 01 applied and waited on with
//! the real kubectl, a publish through the endpoint the status shows, a change that restarts one
//! server at a time, Ctrl-C, and nothing left behind.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim::wait::poll;

/// `sim up` in the background, its stdout read line by line; killed (and whatever it started
/// swept) if the test ends before it stops.
struct Up {
    child: Child,
    dir: PathBuf,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Up {
    fn start(dir: &Path) -> Self {
        let mut child = Command::new(sim::bin_exe!("sim"))
            // `sim up` boots its own kube-apiserver, as a user's does, never the run's pool's:
            // what it leaves behind when it stops is what these tests check.
            .env_remove(sim::apiserver::pool::ENV_POOL)
            .arg("up")
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting sim up");
        let stdout = child.stdout.take().expect("sim up's stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                println!("sim up | {line}");
                sink.lock().expect("lines").push(line);
            }
        });
        Up {
            child,
            dir: dir.to_path_buf(),
            lines,
        }
    }

    /// The kubeconfig path of the `export KUBECONFIG=` line, once `sim up` prints it.
    async fn kubeconfig(&self) -> String {
        let export = self
            .wait_line(
                "sim up prints the kubeconfig",
                Duration::from_secs(180),
                |l| l.contains("export KUBECONFIG="),
            )
            .await;
        export
            .split_once("KUBECONFIG=")
            .map(|(_, p)| p.trim().to_string())
            .expect("a path")
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }

    async fn wait_line(&self, what: &str, within: Duration, pick: impl Fn(&str) -> bool) -> String {
        let pick = &pick;
        poll(what, within, || async move {
            Ok(self.lines().into_iter().find(|l| pick(l)))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}; sim up said:\n{}", self.lines().join("\n")))
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        sim::up::sweep(&self.dir);
    }
}

fn kubectl(kubeconfig: &str, args: &[&str]) -> String {
    let kubectl = sim::apiserver::kubectl().expect(
        "kubectl 1.20 in the cache (sim up installs it; so does scripts/install-apiserver.sh)",
    );
    let out = Command::new(&kubectl)
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .output()
        .expect("running kubectl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {args:?} failed: {text}");
    text
}

fn story(file: &str) -> String {
    let root = sim::checkout::path("docs/stories");
    let file = if file.contains('/') {
        file.to_string()
    } else {
        format!("01-quickstart/{file}")
    };
    root.join(file).display().to_string()
}

/// The servers restarted, in order, from the log's `server <name> lame duck` / `restarted`
/// lines; panics unless each one went down only after the one before it was back.
fn restarts_one_at_a_time(lines: &[String]) -> Vec<String> {
    let mut order = Vec::new();
    let mut down: Option<String> = None;
    for l in lines {
        let Some(rest) = l.split_once(" server ").map(|(_, r)| r) else {
            continue;
        };
        if let Some(name) = rest.strip_suffix(" lame duck (restarting)") {
            assert!(
                down.is_none(),
                "{name} went into lame duck while {down:?} was not back:\n{}",
                lines.join("\n")
            );
            down = Some(name.to_string());
        } else if let Some(name) = rest.strip_suffix(" restarted") {
            assert_eq!(down.as_deref(), Some(name), "{}", lines.join("\n"));
            down = None;
            order.push(name.to_string());
        }
    }
    order
}

async fn publish(url: &str, subject: &str, count: usize) {
    let client = async_nats::connect(url)
        .await
        .expect("connecting to the endpoint in status");
    let js = async_nats::jetstream::new(client);
    for i in 0..count {
        sim::testkit::publish_acked(
            &js,
            subject,
            format!("m{i}").into(),
            Duration::from_secs(30),
        )
        .await;
    }
}

#[tokio::test]
async fn sim_up_runs_story_01_under_kubectl_and_stops_clean() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("up");
    let mut up = Up::start(&dir);
    let kubeconfig = up.kubeconfig().await;

    kubectl(&kubeconfig, &["apply", "-f", &story("01-natscluster.yaml")]);
    kubectl(&kubeconfig, &["apply", "-f", &story("03-stream.yaml")]);
    for object in ["natscluster/demo", "natsstream/orders"] {
        kubectl(
            &kubeconfig,
            &[
                "wait",
                "--for=condition=Ready",
                object,
                "-n",
                "nats",
                "--timeout=180s",
            ],
        );
    }
    let url = kubectl(
        &kubeconfig,
        &[
            "get",
            "natscluster/demo",
            "-n",
            "nats",
            "-o",
            "jsonpath={.status.endpoints.client}",
        ],
    );
    assert!(
        url.starts_with("nats://127.0.0.1:"),
        "status.endpoints.client: {url}"
    );
    publish(&url, "orders.before", 10).await;

    // A restart-only change (the memory limit): every server once, one at a time.
    kubectl(
        &kubeconfig,
        &["apply", "-f", &story("02-natscluster-demo-8gi.yaml")],
    );
    let kc = kubeconfig.as_str();
    let seen = &up;
    poll(
        "the rollout to finish",
        Duration::from_secs(300),
        || async move {
            let got = kubectl(kc, &["get", "natscluster/demo", "-n", "nats", "-o", "json"]);
            let v: serde_json::Value = serde_json::from_str(&got).map_err(|e| e.to_string())?;
            let observed = v["status"]["observedGeneration"] == v["metadata"]["generation"];
            let done = v["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Progressing" && c["status"] == "False");
            let restarted = seen
                .lines()
                .iter()
                .filter(|l| l.ends_with(" restarted"))
                .count();
            Ok((observed && done && restarted >= 3).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; sim up said:\n{}", up.lines().join("\n")));
    let mut order = restarts_one_at_a_time(&up.lines());
    println!("restart order: {order:?}");
    order.sort();
    assert_eq!(
        order,
        ["demo-0", "demo-1", "demo-2"],
        "each server restarted exactly once"
    );
    publish(&url, "orders.after", 10).await;
    let client = async_nats::connect(url.as_str()).await.expect("connecting");
    let mut stream = async_nats::jetstream::new(client)
        .get_stream("orders")
        .await
        .expect("the stream");
    let messages = stream.info().await.expect("stream info").state.messages;
    assert_eq!(messages, 20, "every acknowledged message is in the stream");

    ctrl_c(&mut up, &dir).await;
}

/// Ctrl-C: the process stops everything it started, exits 0 and removes its directory.
async fn ctrl_c(up: &mut Up, dir: &Path) {
    let pid = nix::unistd::Pid::from_raw(up.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let child = &mut up.child;
    let status = poll("sim up exits after Ctrl-C", Duration::from_secs(60), || {
        let exited = child.try_wait().map_err(|e| e.to_string());
        async move { exited }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "sim up exited with {status}");
    let left = sim::up::left_behind(dir);
    assert!(left.is_empty(), "processes left behind: {left:?}");
    assert!(!dir.exists(), "{} is removed", dir.display());
}

/// A key of a Secret, decoded.
fn secret_key(kubeconfig: &str, ns: &str, name: &str, key: &str) -> Vec<u8> {
    use base64::Engine;
    let path = format!("jsonpath={{.data.{}}}", key.replace('.', "\\."));
    let b64 = kubectl(kubeconfig, &["get", "secret", name, "-n", ns, "-o", &path]);
    base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .unwrap_or_else(|e| panic!("Secret {ns}/{name} key {key}: {e}"))
}

#[tokio::test]
async fn sim_up_runs_story_02s_auth_plane_under_tls_it_issues() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("up");
    let mut up = Up::start(&dir);
    let kubeconfig = up.kubeconfig().await;
    for file in [
        "01-trust-roots.yaml",
        "02-system-users.yaml",
        "03-natscluster.yaml",
        "04-orders.yaml",
        "05-stream.yaml",
        "06-scoped-and-external-users.yaml",
    ] {
        kubectl(
            &kubeconfig,
            &["apply", "-f", &story(&format!("02-auth-plane/{file}"))],
        );
    }
    // The listener's Secret, "from the platform's PKI", is issued by sim up's stand-in.
    up.wait_line(
        "sim up issues demo-client-tls",
        Duration::from_secs(60),
        |l| l.contains("Secret nats-system/demo-client-tls issued"),
    )
    .await;
    for (object, condition) in [
        ("natscluster/demo", "Ready"),
        ("natscluster/demo", "Settled"),
        ("natsaccount/orders", "Distributed"),
        ("natsstream/orders", "Ready"),
    ] {
        kubectl(
            &kubeconfig,
            &[
                "wait",
                &format!("--for=condition={condition}"),
                object,
                "-n",
                "nats-system",
                "--timeout=180s",
            ],
        );
    }
    // orders-app's creds over TLS, trusting the issued CA: the account the auth controller pushed.
    let url = kubectl(
        &kubeconfig,
        &[
            "get",
            "natscluster/demo",
            "-n",
            "nats-system",
            "-o",
            "jsonpath={.status.endpoints.client}",
        ],
    );
    assert!(
        url.starts_with("tls://127.0.0.1:"),
        "status.endpoints.client: {url}"
    );
    let ca = tmp.path().join("ca.crt");
    std::fs::write(
        &ca,
        secret_key(&kubeconfig, "nats-system", "demo-client-tls", "ca.crt"),
    )
    .expect("writing ca.crt");
    let creds = String::from_utf8(secret_key(
        &kubeconfig,
        "nats-system",
        "orders-app-creds",
        "user.creds",
    ))
    .expect("creds are text");
    let client = async_nats::ConnectOptions::new()
        .credentials(&creds)
        .expect("orders-app's creds")
        .add_root_certificates(ca)
        .require_tls(true)
        .connect(url.as_str())
        .await
        .expect("orders-app connects over TLS");
    let js = async_nats::jetstream::new(client);
    for i in 0..10 {
        sim::testkit::publish_acked(
            &js,
            "orders.new",
            format!("m{i}").into(),
            Duration::from_secs(30),
        )
        .await;
    }
    let messages = js
        .get_stream("orders")
        .await
        .expect("the stream")
        .info()
        .await
        .expect("stream info")
        .state
        .messages;
    assert_eq!(messages, 10);
    ctrl_c(&mut up, &dir).await;
}

#[tokio::test]
async fn sim_up_joins_two_natsclusters_into_a_supercluster_by_service_names() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("up");
    let mut up = Up::start(&dir);
    let kubeconfig = up.kubeconfig().await;
    let manifest = sim::checkout::path("docs/try-it/supercluster.yaml");
    kubectl(
        &kubeconfig,
        &["apply", "-f", &manifest.display().to_string()],
    );
    // Each gateway remote names the other's gateway Service; each side's TLS Secret comes from
    // the PKI stand-in, one CA for both.
    for (object, ns) in [
        ("natscluster/east", "nats-east"),
        ("natscluster/west", "nats-west"),
    ] {
        kubectl(
            &kubeconfig,
            &[
                "wait",
                "--for=condition=GatewaysConnected",
                object,
                "-n",
                ns,
                "--timeout=180s",
            ],
        );
    }
    let issued = up
        .lines()
        .iter()
        .filter(|l| l.contains("-gateway-tls issued"))
        .count();
    assert_eq!(
        issued,
        2,
        "both gateway Secrets issued:\n{}",
        up.lines().join("\n")
    );
    ctrl_c(&mut up, &dir).await;
}
