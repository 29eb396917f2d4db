//! `just conformance`: every story of docs/stories applied in story order on one of the sim's
//! Kubernetes backends, the chart Helm-installed with the controllers as pods, each step's status
//! examples reached (`e2e::conformance`). Prints a line per story: pass, FAIL and why, NOT RUN YET
//! and what it lacks, or not applicable here and why.
//!
//! usage: conformance [--backend node|k3s] [STORY...]   (a story by its folder name or number
//! prefix, e.g. 01). `node` (the default): the sim's real node, root and `just node-install`
//! needed. `k3s`: a k3s container, built with `--features k3s`, a Docker engine needed. A backend
//! that cannot run here is a failure (exit 1) with the reason, not a skip: a conformance run that
//! ran nothing must not read as a pass.

use std::process::ExitCode;
use std::time::Duration;

use e2e::on_cluster::Backend;

/// How long one example may take to be reached: a rolling restart of three servers on the node.
const WITHIN: Duration = Duration::from_secs(420);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (backend, only) = match e2e::on_cluster::parse_args(&args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("conformance: {e}");
            return ExitCode::FAILURE;
        }
    };
    let prepared = match backend {
        Backend::Node => e2e::on_node::prepare("conformance"),
        Backend::K3s => runtime_and_dir(),
    };
    let (runtime, dir) = match prepared {
        Ok(ready) => ready,
        Err(e) => {
            eprintln!("conformance: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut say = |line: &str| println!("{line}");
    let run = match backend {
        Backend::Node => runtime.block_on(e2e::conformance::run::on_node(
            dir.path(),
            &only,
            WITHIN,
            &mut say,
        )),
        Backend::K3s => runtime.block_on(on_k3s(dir.path(), &only, &mut say)),
    };
    let run = match run {
        Ok(r) => r,
        Err(e) => {
            eprintln!("conformance: {e}");
            return ExitCode::FAILURE;
        }
    };
    let name = match backend {
        Backend::Node => "the node",
        Backend::K3s => "k3s",
    };
    println!("conformance on {name}:");
    for s in &run.stories {
        println!("  {}", s.line());
    }
    if !run.host_left.is_empty() {
        eprintln!(
            "conformance: the host differs from its baseline after down: {:#?}",
            run.host_left
        );
    }
    if run.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A runtime and a temp dir for a backend that needs no root (k3s).
fn runtime_and_dir() -> Result<(tokio::runtime::Runtime, tempfile::TempDir), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .map_err(|e| format!("a runtime: {e}"))?;
    let dir = tempfile::Builder::new()
        .prefix("conformance-k3s-")
        .tempdir()
        .map_err(|e| format!("a temp dir: {e}"))?;
    Ok((runtime, dir))
}

#[cfg(feature = "k3s")]
async fn on_k3s(
    dir: &std::path::Path,
    only: &[String],
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<e2e::conformance::run::Conformance, String> {
    e2e::on_cluster::conformance(&sim::k3s_cluster::K3sKube, dir, only, WITHIN, say).await
}

#[cfg(not(feature = "k3s"))]
async fn on_k3s(
    _dir: &std::path::Path,
    _only: &[String],
    _say: &mut (dyn FnMut(&str) + Send),
) -> Result<e2e::conformance::run::Conformance, String> {
    Err(
        "this conformance binary was built without the k3s backend: \
         cargo run -p e2e --features node,k3s --bin conformance -- --backend k3s"
            .into(),
    )
}
