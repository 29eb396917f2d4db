//! The image in real OCI tools: umoci unpacks it into a runtime bundle whose config runs the
//! entrypoint as 65532:65532; runc runs that bundle (root only: runc needs it for namespaces and
//! mounts here), first `--version`, then the controller itself, sharing the host's loopback and
//! given a resolv.conf and a kubeconfig the way a kubelet mounts them, where the static binary
//! resolves the kubeconfig's server name through a DNS server on loopback that this test runs,
//! connects to the address it answered and serves /healthz. skopeo reads the archive.

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sim::wait::poll;

use crate::{BINARY, Built, VERSION, build, have, is_root};

/// How long one runc or umoci command may take.
const COMMAND_DEADLINE: Duration = Duration::from_secs(60);

/// `cmd`'s output, or a panic naming it when it fails or outlives [`COMMAND_DEADLINE`] (then it
/// is killed by its PID).
fn run(cmd: &mut Command) -> Output {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let start = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        if start.elapsed() > COMMAND_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {COMMAND_DEADLINE:?}, killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The image unpacked by umoci: `<dir>/bundle` with `config.json` and `rootfs/`.
struct Bundle {
    path: PathBuf,
    config: Value,
}

impl Bundle {
    fn config_path(&self) -> PathBuf {
        self.path.join("config.json")
    }

    fn write(&self) {
        let text = serde_json::to_vec_pretty(&self.config).expect("config.json");
        std::fs::write(self.config_path(), text).expect("writing config.json");
    }
}

/// The archive extracted (by tar) into an OCI layout and unpacked by umoci; None without umoci.
fn unpack(built: &Built) -> Option<Bundle> {
    if !have("umoci") {
        eprintln!(
            "SKIP: no umoci (apt-get install umoci) to unpack the image into a runtime bundle"
        );
        return None;
    }
    let layout = built.dir.path().join("layout");
    std::fs::create_dir(&layout).expect("creating the layout dir");
    run(Command::new("tar")
        .arg("-xf")
        .arg(&built.archive)
        .arg("-C")
        .arg(&layout));
    let path = built.dir.path().join("bundle");
    let mut cmd = Command::new("umoci");
    cmd.arg("unpack");
    if !is_root() {
        cmd.arg("--rootless");
    }
    cmd.arg("--image")
        .arg(format!("{}:{VERSION}", layout.display()))
        .arg(&path);
    run(&mut cmd);
    let text = std::fs::read(path.join("config.json")).expect("the bundle's config.json");
    let config = serde_json::from_slice(&text).expect("config.json is JSON");
    Some(Bundle { path, config })
}

/// A runc container, killed and deleted when this drops, pass or fail; its runc by PID.
struct Container {
    state: PathBuf,
    id: String,
    runc: Option<Child>,
}

impl Container {
    fn runc(&self) -> Command {
        let mut cmd = Command::new("runc");
        cmd.arg("--root").arg(&self.state);
        cmd
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.runc().args(["kill", &self.id, "KILL"]).output();
        let _ = self.runc().args(["delete", "--force", &self.id]).output();
        if let Some(child) = self.runc.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A runc state directory and container id of this test's own; None (saying why) unless root
/// with runc.
fn container(built: &Built) -> Option<Container> {
    if !have("runc") {
        eprintln!("SKIP: no runc (apt-get install runc) to run the image");
        return None;
    }
    if !is_root() {
        eprintln!("SKIP: runc needs root here (namespaces, mounts)");
        return None;
    }
    Some(Container {
        state: built.dir.path().join("runc"),
        id: format!("nats-image-{}", std::process::id()),
        runc: None,
    })
}

#[test]
fn umoci_unpacks_a_bundle_that_runs_the_binary_as_65532() {
    let Some(built) = build(false) else { return };
    let Some(mut bundle) = unpack(&built) else {
        return;
    };
    let process = &bundle.config["process"];
    assert_eq!(process["user"]["uid"], 65532, "{process}");
    assert_eq!(process["user"]["gid"], 65532, "{process}");
    assert_eq!(process["args"], json!([format!("/{BINARY}")]));
    let mut rootfs: Vec<String> = std::fs::read_dir(bundle.path.join("rootfs"))
        .expect("the rootfs")
        .map(|e| {
            e.expect("a rootfs entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    rootfs.sort();
    assert_eq!(
        rootfs,
        [BINARY, "etc"],
        "the rootfs holds the binary and etc/ssl/certs"
    );

    let expected = format!("{BINARY} {VERSION}\n");
    let Some(c) = container(&built) else {
        // Not root: the user is already not root; run the unpacked binary directly.
        let out = run(Command::new(bundle.path.join("rootfs").join(BINARY)).arg("--version"));
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
        eprintln!("ran rootfs/{BINARY} --version directly, as this (non-root) user");
        return;
    };
    bundle.config["process"]["terminal"] = json!(false);
    bundle.config["process"]["args"] = json!([format!("/{BINARY}"), "--version"]);
    bundle.write();
    let out = run(c
        .runc()
        .arg("run")
        .arg("--bundle")
        .arg(&bundle.path)
        .arg(&c.id));
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

/// A DNS server on a loopback address of its own, port 53: every A question is answered
/// 127.0.0.1, every other with no answer; the names asked are kept.
struct Dns {
    addr: Ipv4Addr,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dns {
    fn start() -> Dns {
        // 127.0.0.0/8 is loopback: a random address in it, port 53 (root).
        let seed = std::process::id();
        let socket = (0..64u32)
            .find_map(|i| {
                let n = seed.wrapping_mul(2_654_435_761).wrapping_add(i * 7919);
                let addr = Ipv4Addr::new(127, 53, (n >> 8) as u8, (n as u8).max(2));
                UdpSocket::bind((addr, 53)).ok().map(|s| (addr, s))
            })
            .expect("a loopback address with port 53 free");
        let (addr, socket) = socket;
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("a read timeout");
        let asked = Arc::new(Mutex::new(vec![]));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (asked, stop) = (asked.clone(), stop.clone());
            std::thread::spawn(move || serve_dns(&socket, &asked, &stop))
        };
        Dns {
            addr,
            asked,
            stop,
            thread: Some(thread),
        }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_dns(socket: &UdpSocket, asked: &Mutex<Vec<String>>, stop: &AtomicBool) {
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::SeqCst) {
        let Ok((len, from)) = socket.recv_from(&mut buf) else {
            continue;
        };
        let q = &buf[..len];
        // The question: labels from byte 12, then QTYPE and QCLASS.
        let mut at = 12;
        let mut labels = vec![];
        while let Some(&n) = q.get(at) {
            if n == 0 {
                break;
            }
            let label = q.get(at + 1..at + 1 + usize::from(n)).unwrap_or_default();
            labels.push(String::from_utf8_lossy(label).into_owned());
            at += 1 + usize::from(n);
        }
        let Some(qtype) = q.get(at + 1..at + 3) else {
            continue;
        };
        let is_a = qtype == [0, 1];
        if let Ok(mut a) = asked.lock() {
            a.push(labels.join("."));
        }
        let mut answer = q[..2].to_vec();
        answer.extend_from_slice(&[0x81, 0x80, 0, 1, 0, u8::from(is_a), 0, 0, 0, 0]);
        answer.extend_from_slice(&q[12..at + 5]);
        if is_a {
            answer.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 127, 0, 0, 1]);
        }
        let _ = socket.send_to(&answer, from);
    }
}

fn http_status(port: u16, path: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    Ok(text.lines().next().unwrap_or_default().to_string())
}

fn uid_of(pid: u64) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .map(str::to_string)
}

/// The controller in runc, as a kubelet would start it (resolv.conf and the kubeconfig mounted,
/// the host's network for the loopback DNS server): it asks our DNS server for the
/// kubeconfig's server name and connects to the address given. The kubeconfig names no CA, so
/// kube's rustls client loads the image's CA bundle (without it: "No CA certificates were
/// loaded from the system", and no client).
#[tokio::test(flavor = "multi_thread")]
async fn in_a_container_the_static_binary_resolves_through_the_resolv_conf_it_is_given() {
    let Some(built) = build(false) else { return };
    let Some(mut c) = container(&built) else {
        return;
    };
    let Some(mut bundle) = unpack(&built) else {
        return;
    };
    let dns = Dns::start();
    let apiserver = TcpListener::bind("127.0.0.1:0").expect("a listener");
    apiserver.set_nonblocking(true).expect("non-blocking");
    let port = apiserver.local_addr().expect("its address").port();
    let server_name = "kube-apiserver.image-test.internal";
    let files = built.dir.path();
    let resolv = files.join("resolv.conf");
    std::fs::write(
        &resolv,
        format!("nameserver {}\noptions timeout:1\n", dns.addr),
    )
    .expect("resolv.conf");
    let kubeconfig = files.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"https://{server_name}:{port}\", insecure-skip-tls-verify: true}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
        ),
    )
    .expect("kubeconfig");
    let (metrics, probes) = (sim::ports::free_port(), sim::ports::free_port());
    let cfg = &mut bundle.config;
    cfg["process"]["terminal"] = json!(false);
    cfg["process"]["args"] = json!([
        format!("/{BINARY}"),
        format!("--metrics-addr=127.0.0.1:{metrics}"),
        format!("--probe-addr=127.0.0.1:{probes}"),
    ]);
    cfg["process"]["env"]
        .as_array_mut()
        .expect("process.env")
        .push(json!("KUBECONFIG=/etc/kubeconfig"));
    cfg["linux"]["namespaces"]
        .as_array_mut()
        .expect("linux.namespaces")
        .retain(|n| n["type"] != "network");
    let mounts = cfg["mounts"].as_array_mut().expect("mounts");
    for (file, at) in [
        (&resolv, "/etc/resolv.conf"),
        (&kubeconfig, "/etc/kubeconfig"),
    ] {
        mounts.push(
            json!({"destination": at, "type": "bind", "source": file, "options": ["rbind", "ro"]}),
        );
    }
    bundle.write();
    let log = |name: &str| std::fs::File::create(files.join(name)).expect("a log file");
    let start = Instant::now();
    c.runc = Some(
        c.runc()
            .arg("run")
            .arg("--bundle")
            .arg(&bundle.path)
            .arg(&c.id)
            .stdin(Stdio::null())
            .stdout(log("stdout"))
            .stderr(log("stderr"))
            .spawn()
            .expect("runc run"),
    );
    let output = |files: &Path| {
        let read = |n: &str| std::fs::read_to_string(files.join(n)).unwrap_or_default();
        format!("{}{}", read("stdout"), read("stderr"))
    };
    let connected = poll(
        "the controller to resolve the name and connect",
        Duration::from_secs(60),
        || {
            let asked = dns.asked();
            let accepted = apiserver.accept().is_ok();
            async move {
                match (asked.iter().any(|n| n == server_name), accepted) {
                    (true, true) => Ok(Some(())),
                    _ => Err(format!("asked {asked:?}, connected: {accepted}")),
                }
            }
        },
    )
    .await;
    connected.unwrap_or_else(|e| panic!("{e}\n{}", output(files)));
    let mut asked = dns.asked();
    let questions = asked.len();
    asked.dedup();
    eprintln!(
        "figure: runc run to a connection by name: {:.2} s; {questions} questions for {asked:?}",
        start.elapsed().as_secs_f64(),
    );
    let healthz = poll("GET /healthz", Duration::from_secs(30), || async move {
        http_status(probes, "/healthz").map(|l| l.contains(" 200").then_some(l))
    })
    .await;
    healthz.unwrap_or_else(|e| panic!("{e}\n{}", output(files)));
    let state = run(c.runc().args(["state", &c.id]));
    let state: Value = serde_json::from_slice(&state.stdout).expect("runc state's JSON");
    let pid = state["pid"].as_u64().expect("the container's pid");
    let uid = uid_of(pid).expect("the container process's status");
    assert_eq!(
        uid.split_whitespace().collect::<Vec<_>>(),
        ["Uid:", "65532", "65532", "65532", "65532"]
    );
}

#[test]
fn skopeo_reads_the_archive_as_written() {
    if !have("skopeo") {
        eprintln!("SKIP: no skopeo (apt-get install skopeo) to read the archive");
        return;
    }
    let Some(built) = build(false) else { return };
    let out = run(Command::new("skopeo")
        .arg("inspect")
        .arg(format!("oci-archive:{}:{VERSION}", built.archive.display())));
    let seen: Value = serde_json::from_slice(&out.stdout).expect("skopeo inspect's JSON");
    assert_eq!(seen["Digest"], built.digest.as_str(), "{seen}");
    assert_eq!(seen["Architecture"], "amd64");
    assert_eq!(seen["Os"], "linux");
    assert_eq!(seen["Labels"]["org.opencontainers.image.title"], BINARY);
    assert_eq!(seen["Labels"]["org.opencontainers.image.version"], VERSION);
}
