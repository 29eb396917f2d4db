//! Writes one YAML file per CRD into `deploy/crds/` (`<plural>.<group>.yaml`), generated from the
//! types in `nats-api`.
//!
//! `crdgen` writes; `crdgen --check` writes nothing and exits 1 listing every file that differs
//! from what the types generate (CI's drift check). `--dir DIR` points at another directory.

use std::path::PathBuf;
use std::process::ExitCode;

use nats_api::crds;

const USAGE: &str = "usage: crdgen [--check] [--dir DIR]";

fn main() -> ExitCode {
    let mut check = false;
    let mut dir = crds::default_dir();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--dir" => match args.next() {
                Some(d) => dir = PathBuf::from(d),
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

    if check {
        match crds::drift(&dir) {
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
    } else {
        match crds::write(&dir) {
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
}
