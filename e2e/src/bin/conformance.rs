//! `just conformance`: every story of docs/stories applied in story order on the sim's real node,
//! the chart Helm-installed with the controllers as pods, each step's status examples reached
//! (`e2e::conformance`). Prints a line per story: pass, FAIL and why, NOT RUN YET and what it
//! lacks, or not applicable here and why. Root and `just node-install` needed.
//!
//! usage: conformance [STORY...]   (a story by its folder name or number prefix, e.g. 01)

use std::process::ExitCode;
use std::time::Duration;

/// How long one example may take to be reached: a rolling restart of three servers on the node.
const WITHIN: Duration = Duration::from_secs(420);

fn main() -> ExitCode {
    let only: Vec<String> = std::env::args().skip(1).collect();
    let (runtime, dir) = match e2e::on_node::prepare("conformance") {
        Ok(ready) => ready,
        Err(e) => {
            eprintln!("conformance: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut say = |line: &str| println!("{line}");
    let run = match runtime.block_on(e2e::conformance::run::on_node(
        dir.path(),
        &only,
        WITHIN,
        &mut say,
    )) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("conformance: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("conformance on the node:");
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
