//! Writes one YAML file per CRD (`<plural>.<group>.yaml`), generated from the types in `nats-api`,
//! into both places they are committed: `deploy/crds/` (for `kubectl apply`) and the Helm chart's
//! `deploy/helm/nats-operators/files/crds/` (which the chart renders as templates, so that
//! `helm upgrade` upgrades them). The two copies are byte for byte the same.
//!
//! `crdgen` writes both; `crdgen --check` writes nothing and exits 1 listing every file of either
//! directory that differs from what the types generate (CI's drift check). `--dir DIR` writes or
//! checks DIR alone instead.

use std::path::PathBuf;
use std::process::ExitCode;

use nats_api::crds;

const USAGE: &str = "usage: crdgen [--check] [--dir DIR]";

/// Where the chart keeps its copy, beside `deploy/crds/`.
fn chart_dir() -> PathBuf {
    let deploy = crds::default_dir();
    deploy
        .parent()
        .map(|d| d.join("helm/nats-operators/files/crds"))
        .unwrap_or_else(|| PathBuf::from("deploy/helm/nats-operators/files/crds"))
}

fn main() -> ExitCode {
    let mut check = false;
    let mut dirs = vec![crds::default_dir(), chart_dir()];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--dir" => match args.next() {
                Some(d) => dirs = vec![PathBuf::from(d)],
                None => {
                    eprintln!("--dir needs a directory\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let mut worst = ExitCode::SUCCESS;
    for dir in &dirs {
        let code = if check {
            check_dir(dir)
        } else {
            write_dir(dir)
        };
        if code != ExitCode::SUCCESS {
            worst = code;
        }
    }
    worst
}

fn check_dir(dir: &std::path::Path) -> ExitCode {
    match crds::drift(dir) {
        Ok(drift) if drift.is_empty() => {
            println!("{}: every CRD matches the types", dir.display());
            ExitCode::SUCCESS
        }
        Ok(drift) => {
            eprintln!(
                "{}: {} CRD file(s) out of date; run `cargo run -p nats-api --bin crdgen`:",
                dir.display(),
                drift.len()
            );
            for d in drift {
                eprintln!("  {d}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("crdgen --check: {e}");
            ExitCode::from(2)
        }
    }
}

fn write_dir(dir: &std::path::Path) -> ExitCode {
    match crds::write(dir) {
        Ok(names) => {
            for name in names {
                println!("wrote {}", dir.join(name).display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crdgen: {e}");
            ExitCode::from(2)
        }
    }
}
