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
        let mut child = Command::new(env!("CARGO_BIN_EXE_sim"))
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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    root.join("docs/stories/01-quickstart")
        .join(file)
        .display()
        .to_string()
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
    let export = up
        .wait_line(
            "sim up prints the kubeconfig",
            Duration::from_secs(180),
            |l| l.contains("export KUBECONFIG="),
        )
        .await;
    let kubeconfig = export
        .split_once("KUBECONFIG=")
        .map(|(_, p)| p.trim().to_string())
        .expect("a path");

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

    // Ctrl-C: the process stops everything it started and exits 0.
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
    let left = sim::up::left_behind(&dir);
    assert!(left.is_empty(), "processes left behind: {left:?}");
    assert!(!dir.exists(), "{} is removed", dir.display());
}
