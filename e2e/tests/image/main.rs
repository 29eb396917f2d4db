//! The controller images (docs/install.md, "Images"): deploy/image/Dockerfile's final stages,
//! assembled offline by `just image` (scripts/image.py), read back here on their own: a valid
//! OCI layout whose blobs match their digests, the config the Dockerfile declares (a numeric
//! non-root user, the binary as entrypoint, Cargo.toml's labels and the build's provenance, the
//! same keys as the manifest's OCI annotations), a layer holding the CA bundle and one holding the
//! static binary, nothing else, the same digest from the same files, and the CycloneDX SBOM beside
//! it (sbom.rs). Then
//! real OCI tools take it: umoci unpacks it into a runtime bundle, runc runs it as uid 65532,
//! where the static binary resolves a name through the resolv.conf it is given (as a kubelet
//! gives one) and serves its probes, skopeo reads the archive, and a containerd of the test's own
//! imports it, as a node without a registry does, and runs it. Each test that needs a tool, or
//! root for runc, skips saying so.
//!
//! The tests package one image, `cluster-controller`'s, built with the `image-test` profile
//! (Cargo.toml): the release image's static link without release's optimisation, because a cold
//! release build of the three took 14 min on 2 cores and one of `image-test` 4 min
//! (scripts/image.py always builds the three together, as the Dockerfile does: cargo unifies
//! dependency features over what it builds). `IMAGE_TEST_PROFILE=release` tests the release image
//! instead (cargo reuses a binary already built).

mod build_env;
mod dockerfile;
mod node;
mod oci;
mod run;
mod sbom;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;
use tempfile::TempDir;

/// The binary the tests build and package.
pub const BINARY: &str = "cluster-controller";
pub const BINARIES: [&str; 3] = [
    "cluster-controller",
    "auth-controller",
    "jetstream-controller",
];
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The provenance the tests give scripts/image.py (`--revision`, `--source`, SOURCE_DATE_EPOCH), so two
/// builds in one test are the same image even when a commit lands between them.
pub const REVISION: &str = "0123456789abcdef0123456789abcdef01234567";
pub const SOURCE: &str = "https://example.invalid/nats-operators";
pub const EPOCH: &str = "1764892800";
pub const CREATED: &str = "2025-12-05T00:00:00Z";

/// The cargo profile the tests build the binary with: `IMAGE_TEST_PROFILE`, else `image-test`.
pub fn profile() -> String {
    std::env::var("IMAGE_TEST_PROFILE").unwrap_or_else(|_| "image-test".to_string())
}

pub fn workspace_root() -> PathBuf {
    sim::checkout::root()
}

/// Whether `program --version` runs.
pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether this process runs as root (runc needs it).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            == Some("0")
    })
}

/// An image `scripts/image.py` wrote into a directory of this test's own.
pub struct Built {
    pub dir: TempDir,
    pub archive: PathBuf,
    /// What the script printed: the name and the manifest digest.
    pub name: String,
    pub digest: String,
}

/// Runs `python3 scripts/image.py [--no-build] --profile <profile()> --out <temp> BINARY`; None
/// (saying why) without python3.
pub fn build(no_build: bool) -> Option<Built> {
    if !have("python3") {
        eprintln!("SKIP: no python3 to run scripts/image.py");
        return None;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut cmd = Command::new("python3");
    cmd.current_dir(workspace_root()).arg("scripts/image.py");
    if no_build {
        cmd.arg("--no-build");
    }
    cmd.args(["--profile", &profile()]);
    cmd.args(["--revision", REVISION, "--source", SOURCE]);
    cmd.env("SOURCE_DATE_EPOCH", EPOCH);
    cmd.arg("--out").arg(dir.path()).arg(BINARY);
    let start = Instant::now();
    let out = cmd.output().expect("running python3 scripts/image.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "scripts/image.py {BINARY}: {}\n{stdout}\n{stderr}",
        out.status
    );
    eprintln!(
        "figure: scripts/image.py --profile {} {BINARY} took {:.1} s (a build, or cargo's no-op, then packaging)",
        profile(),
        start.elapsed().as_secs_f64()
    );
    let line = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("scripts/image.py printed nothing:\n{stderr}"));
    eprintln!("{line}");
    let words: Vec<&str> = line.split_whitespace().collect();
    let (Some(name), Some(digest), Some(path)) = (words.first(), words.get(1), words.last()) else {
        panic!("scripts/image.py's last line is not `name digest ... path`: {line}");
    };
    Some(Built {
        archive: PathBuf::from(path),
        name: name.to_string(),
        digest: digest.to_string(),
        dir,
    })
}

/// The archive read back, every digest checked.
pub fn read(built: &Built) -> oci::Oci {
    let bytes = std::fs::read(&built.archive)
        .unwrap_or_else(|e| panic!("reading {}: {e}", built.archive.display()));
    oci::read_oci(&bytes).unwrap_or_else(|e| panic!("{}: {e}", built.archive.display()))
}

/// The Dockerfile's declaration of `binary`'s final stage.
pub fn declared(binary: &str) -> dockerfile::Declared {
    let path = workspace_root().join("deploy/image/Dockerfile");
    let text = std::fs::read_to_string(&path).expect("reading deploy/image/Dockerfile");
    dockerfile::declared(&dockerfile::stages(&text), binary)
}

/// The declaration with the provenance the tests' builds are given, as `--build-arg`s would set it.
pub fn declared_as_built(binary: &str) -> dockerfile::Declared {
    let path = workspace_root().join("deploy/image/Dockerfile");
    let text = std::fs::read_to_string(&path).expect("reading deploy/image/Dockerfile");
    let args = [
        ("REVISION", REVISION),
        ("SOURCE", SOURCE),
        ("CREATED", CREATED),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .into();
    dockerfile::declared_with(&dockerfile::stages(&text), binary, &args)
}

/// The host's binary the image was assembled from.
fn host_binary() -> PathBuf {
    let out = Command::new("cargo")
        .current_dir(workspace_root())
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .expect("cargo metadata");
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let triple = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV");
    let triple = String::from_utf8_lossy(&triple.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host");
    Path::new(meta["target_directory"].as_str().expect("target_directory"))
        .join(triple)
        .join(match profile().as_str() {
            "dev" | "test" => "debug".to_string(),
            "bench" => "release".to_string(),
            p => p.to_string(),
        })
        .join(BINARY)
}

#[test]
fn every_binary_has_a_final_stage_with_cargo_toml_s_values() {
    let text = std::fs::read_to_string(workspace_root().join("deploy/image/Dockerfile"))
        .expect("reading deploy/image/Dockerfile");
    let stages = dockerfile::stages(&text);
    let build = &stages["build"];
    let image = build.base.split('/').next().unwrap_or_default();
    assert!(
        build.base.starts_with("rust:") && !image.contains('.'),
        "the build stage's base names no registry host: {}",
        build.base
    );
    let run = build
        .instructions
        .iter()
        .find(|(w, _)| w == "RUN")
        .map(|(_, r)| r.clone())
        .expect("the build stage's RUN");
    assert!(run.contains("target-feature=+crt-static"), "{run}");
    for binary in BINARIES {
        assert!(
            run.contains(&format!("-p {binary}")),
            "{run} does not build {binary}"
        );
        let d = declared(binary);
        assert_eq!(d.entrypoint, [format!("/{binary}")], "{binary}");
        let ca = "/etc/ssl/certs/ca-certificates.crt".to_string();
        assert_eq!(
            d.copies,
            [
                (ca.clone(), ca),
                (format!("/out/{binary}"), format!("/{binary}"))
            ],
            "{binary}"
        );
        assert_eq!(d.user, "65532:65532", "{binary}");
        assert_eq!(
            d.args["VERSION"], VERSION,
            "ARG VERSION is Cargo.toml's version"
        );
        assert_eq!(d.args["LICENSES"], env!("CARGO_PKG_LICENSE"));
        assert_eq!(d.args["SOURCE"], env!("CARGO_PKG_REPOSITORY"));
        assert_eq!(d.labels["org.opencontainers.image.title"], binary);
        assert_eq!(d.labels["org.opencontainers.image.version"], VERSION);
    }
}

#[test]
fn the_archive_is_the_dockerfile_stage_holding_the_ca_bundle_and_the_static_binary() {
    let Some(built) = build(false) else { return };
    let image = read(&built);
    let d = declared_as_built(BINARY);

    // Named as the chart's default repository and appVersion name it.
    let annotations = &image.index["manifests"][0]["annotations"];
    let name = format!("localhost/nats-operators/{BINARY}:{VERSION}");
    assert_eq!(annotations["io.containerd.image.name"], name.as_str());
    assert_eq!(annotations["org.opencontainers.image.ref.name"], VERSION);
    assert_eq!(built.name, name);
    assert_eq!(built.digest, image.manifest_digest, "the digest printed");
    let values =
        std::fs::read_to_string(workspace_root().join("deploy/helm/nats-operators/values.yaml"))
            .expect("reading values.yaml");
    let values: serde_yaml::Value = serde_yaml::from_str(&values).expect("values.yaml");
    assert_eq!(
        values["controllers"]["cluster"]["image"]["repository"].as_str(),
        name.split(':').next(),
        "the chart's default repository is the image's name"
    );

    // The config: what the Dockerfile declares, a numeric non-root user.
    let config = &image.config["config"];
    assert_eq!(config["User"], d.user.as_str());
    let (uid, gid) = d.user.split_once(':').expect("USER uid:gid");
    let (uid, gid): (u32, u32) = (
        uid.parse().expect("numeric uid"),
        gid.parse().expect("numeric gid"),
    );
    assert!(uid != 0 && gid != 0, "USER {uid}:{gid} is not root");
    assert_eq!(config["Entrypoint"], serde_json::json!(d.entrypoint));
    let labels: std::collections::BTreeMap<String, String> =
        serde_json::from_value(config["Labels"].clone()).expect("Labels");
    assert_eq!(
        labels, d.labels,
        "the labels are the Dockerfile's at Cargo.toml's values and the build's provenance"
    );
    for (key, value) in [
        ("version", VERSION),
        ("revision", REVISION),
        ("source", SOURCE),
        ("created", CREATED),
    ] {
        assert_eq!(labels[&format!("org.opencontainers.image.{key}")], value);
    }
    // The manifest carries the same keys as OCI annotations.
    let annotations: std::collections::BTreeMap<String, String> =
        serde_json::from_value(image.manifest["annotations"].clone()).expect("annotations");
    let oci_labels: std::collections::BTreeMap<String, String> = labels
        .iter()
        .filter(|(k, v)| k.starts_with("org.opencontainers.image.") && !v.is_empty())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(annotations, oci_labels);
    assert_eq!(image.config["created"], CREATED);
    assert_eq!(image.config["os"], "linux");
    assert_eq!(image.config["architecture"], "amd64");

    // Two layers, as the Dockerfile's two COPYs make them: the CA bundle (0644) under its parent
    // directories, then the binary (0755); root-owned, and nothing else.
    let ca = "/etc/ssl/certs/ca-certificates.crt";
    let binary_at = format!("/{BINARY}");
    assert_eq!(
        d.copies,
        [
            (ca.to_string(), ca.to_string()),
            (format!("/out/{BINARY}"), binary_at.clone())
        ]
    );
    let [ca_layer, binary_layer] = image.layers.as_slice() else {
        panic!("{} layers, not two", image.layers.len());
    };
    let shape = |layer: &[u8]| -> Vec<(String, u8, u32, u64, u64)> {
        oci::read_tar(layer)
            .unwrap_or_else(|e| panic!("a layer: {e}"))
            .iter()
            .map(|e| (e.name.clone(), e.kind, e.mode, e.uid, e.gid))
            .collect()
    };
    let dir = |name: &str| (name.to_string(), b'5', 0o755, 0, 0);
    assert_eq!(
        shape(ca_layer),
        [
            dir("etc/"),
            dir("etc/ssl/"),
            dir("etc/ssl/certs/"),
            (ca.trim_start_matches('/').to_string(), b'0', 0o644, 0, 0)
        ]
    );
    assert_eq!(
        shape(binary_layer),
        [(BINARY.to_string(), b'0', 0o755, 0, 0)]
    );
    let bundle = &oci::read_tar(ca_layer).expect("the CA layer")[3].data;
    assert!(
        *bundle == std::fs::read(ca).expect("the host's CA bundle"),
        "the CA layer's file is the host's {ca}"
    );
    let certificates = String::from_utf8_lossy(bundle)
        .matches("-----BEGIN CERTIFICATE-----")
        .count();
    assert!(certificates > 0, "{ca} holds no certificate");
    let binary = &oci::read_tar(binary_layer).expect("the binary layer")[0].data;
    let host = std::fs::read(host_binary()).expect("the binary cargo built");
    assert!(
        *binary == host,
        "the layer's file is the binary cargo built"
    );
    assert_eq!(config["Entrypoint"][0], binary_at.as_str());
    oci::require_static(binary).unwrap_or_else(|e| panic!("{BINARY} is not static: {e}"));
    if have("file") {
        let out = Command::new("file")
            .arg(host_binary())
            .output()
            .expect("file");
        let said = String::from_utf8_lossy(&out.stdout);
        eprintln!("file: {said}");
        assert!(said.contains("static"), "file(1) says: {said}");
    }
    eprintln!(
        "figure: {BINARY} image ({} profile): binary {:.1} MiB, {certificates} CA certificates, archive {:.1} MiB",
        profile(),
        binary.len() as f64 / 1048576.0,
        std::fs::metadata(&built.archive)
            .map(|m| m.len())
            .unwrap_or(0) as f64
            / 1048576.0
    );
    eprintln!("archive members: {:?}", image.members);
}

#[test]
fn the_same_binary_gives_the_same_archive() {
    let Some(first) = build(false) else { return };
    let Some(second) = build(true) else { return };
    let a = std::fs::read(&first.archive).expect("the first archive");
    let b = std::fs::read(&second.archive).expect("the second archive");
    assert_eq!(first.digest, second.digest);
    assert!(a == b, "two archives of one binary differ");
}

/// The stage of `binary` as `stage` gives it, behind a build stage.
fn dockerfile_with(stage: &str) -> String {
    format!("FROM rust:1-bookworm AS build\nRUN true\n\nFROM scratch AS {BINARY}\n{stage}")
}

#[rstest::rstest]
#[case::a_run_in_a_final_stage(
    "COPY --from=build /out/x /x\nRUN chmod 0755 /x\nUSER 1:1\nENTRYPOINT [\"/x\"]\n",
    "Dockerfile:6: RUN in stage cluster-controller"
)]
#[case::a_shell_form_entrypoint(
    "COPY --from=build /out/x /x\nUSER 1:1\nENTRYPOINT /x\n",
    "Dockerfile:7: ENTRYPOINT must be the exec form"
)]
#[case::a_copy_from_the_context(
    "COPY x /x\nUSER 1:1\nENTRYPOINT [\"/x\"]\n",
    "Dockerfile:5: COPY must be `COPY --from=build <file> <path>`"
)]
#[case::an_entrypoint_nothing_copies(
    "COPY --from=build /out/x /x\nUSER 1:1\nENTRYPOINT [\"/y\"]\n",
    "ENTRYPOINT /y is no file a COPY puts there"
)]
#[case::a_variable_no_arg_declares(
    "LABEL v=${VERSION}\nCOPY --from=build /out/x /x\nUSER 1:1\nENTRYPOINT [\"/x\"]\n",
    "Dockerfile:5: $VERSION is not an ARG of this stage"
)]
#[case::no_user(
    "COPY --from=build /out/x /x\nENTRYPOINT [\"/x\"]\n",
    "stage cluster-controller needs a COPY, an ENTRYPOINT and a USER"
)]
fn scripts_image_refuses_what_it_cannot_assemble_naming_the_line(
    #[case] stage: &str,
    #[case] says: &str,
) {
    if !have("python3") {
        eprintln!("SKIP: no python3 to run scripts/image.py");
        return;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("Dockerfile");
    std::fs::write(&path, dockerfile_with(stage)).expect("writing the Dockerfile");
    // Refused before anything is built or read: --no-build, and no binary /out/x exists.
    let out = Command::new("python3")
        .current_dir(workspace_root())
        .args(["scripts/image.py", "--no-build", "--dockerfile"])
        .arg(&path)
        .arg("--out")
        .arg(dir.path())
        .arg(BINARY)
        .output()
        .expect("running scripts/image.py");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted:\n{stage}");
    assert!(stderr.contains(says), "{stderr}");
}
