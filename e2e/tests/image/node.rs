//! How a node without a registry takes the image: a containerd of this test's own (root, state
//! and socket in a temp dir) imports the archive with `ctr -n k8s.io images import`, names it
//! from the archive's own annotation as the chart's default repository and appVersion name it,
//! with the digest `just image` printed, and runs it (`ctr run`, through runc).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sim::wait::poll;

use crate::{BINARY, VERSION, build, have, is_root};

/// A containerd started by this test, its running containers removed and it killed by PID when
/// this drops.
struct Containerd {
    socket: PathBuf,
    child: Child,
    containers: Vec<String>,
}

impl Containerd {
    fn start(dir: &Path) -> Containerd {
        let socket = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "version = 2\nroot = \"{root}\"\nstate = \"{state}\"\n\
                 disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
                 [grpc]\n  address = \"{sock}\"\n[ttrpc]\n  address = \"{sock}.ttrpc\"\n\
                 [debug]\n  address = \"\"\n[metrics]\n  address = \"\"\n",
                root = dir.join("root").display(),
                state = dir.join("state").display(),
                sock = socket.display(),
            ),
        )
        .expect("containerd's config");
        let log = std::fs::File::create(dir.join("containerd.log")).expect("containerd's log");
        let child = Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log"))
            .stderr(log)
            .spawn()
            .expect("starting containerd");
        Containerd {
            socket,
            child,
            containers: vec![],
        }
    }

    fn ctr(&self) -> Command {
        let mut cmd = Command::new("ctr");
        cmd.arg("--address")
            .arg(&self.socket)
            .args(["-n", "k8s.io"]);
        cmd
    }

    /// `ctr ARGS`: stdout, or Err with what it said.
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .ctr()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("ctr {args:?}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ctr {args:?}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        for id in &self.containers {
            let _ = self.run(&["tasks", "kill", "-s", "SIGKILL", id]);
            let _ = self.run(&["tasks", "rm", "-f", id]);
            let _ = self.run(&["containers", "rm", id]);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn containerd_imports_it_under_its_name_and_runs_it() {
    for tool in ["containerd", "ctr", "runc"] {
        if !have(tool) {
            eprintln!(
                "SKIP: no {tool} (apt-get install containerd runc) to import the image as a node does"
            );
            return;
        }
    }
    if !is_root() {
        eprintln!("SKIP: containerd needs root");
        return;
    }
    let Some(built) = build(false) else { return };
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut containerd = Containerd::start(dir.path());
    let up = poll("containerd to answer", Duration::from_secs(30), || {
        let answer = containerd.run(&["version"]);
        async move { answer.map(Some) }
    })
    .await;
    up.unwrap_or_else(|e| panic!("{e}"));

    let archive = built.archive.to_string_lossy().into_owned();
    let said = containerd
        .run(&["images", "import", &archive])
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{said}");
    let name = format!("localhost/nats-operators/{BINARY}:{VERSION}");
    let listed = containerd
        .run(&["images", "ls"])
        .unwrap_or_else(|e| panic!("{e}"));
    let row: Vec<&str> = listed
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in:\n{listed}"))
        .split_whitespace()
        .collect();
    assert_eq!(row.get(2), Some(&built.digest.as_str()), "{listed}");

    let id = format!("nats-image-{}", std::process::id());
    containerd.containers.push(id.clone());
    let version = containerd
        .run(&[
            "run",
            "--rm",
            &name,
            &id,
            &format!("/{BINARY}"),
            "--version",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(version, format!("{BINARY} {VERSION}\n"));
}
