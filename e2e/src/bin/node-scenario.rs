//! `just scenario NAME --backend node`: a scripted scenario on the sim's real node, the chart
//! Helm-installed with the controllers as pods (docs/node.md). With `--local` it runs the same
//! scenario on the local backend first and prints the per-step times side by side. Reports are
//! written under `target/sim-reports/` as the sim's are. Root and `just node-install` needed.
//!
//! usage: node-scenario NAME [--local]

use std::process::ExitCode;

fn say(line: &str) {
    println!("{line}");
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let with_local = args.iter().any(|a| a == "--local");
    let names: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let [name] = names.as_slice() else {
        eprintln!("usage: node-scenario NAME [--local]");
        return ExitCode::FAILURE;
    };
    let (runtime, dir) = match e2e::on_node::prepare("node-scenario") {
        Ok(ready) => ready,
        Err(e) => {
            eprintln!("node-scenario {name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    sim::scenario::set_judge_timings(true);
    let mut progress = say;
    let run = match runtime.block_on(e2e::on_node::scenario(
        name,
        dir.path(),
        with_local,
        &mut progress,
    )) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("node-scenario {name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let reports = e2e::chart::workspace_root()
        .join("target")
        .join("sim-reports");
    let mut passed = run.node.passed && run.host_left.is_empty();
    for r in run.local.iter().chain([&run.node]) {
        print!("{}", r.summary());
        match r.write(&reports) {
            Ok(path) => println!(
                "report ({}): {}",
                r.backend,
                path.join("report.html").display()
            ),
            Err(e) => {
                eprintln!("node-scenario {name}: {e}");
                passed = false;
            }
        }
    }
    if let Some(local) = &run.local {
        print!("{}", sim::scenario::side_by_side(local, &run.node));
        passed &= local.passed;
    }
    if !run.host_left.is_empty() {
        eprintln!(
            "node-scenario {name}: the host differs from its baseline after down: {:#?}",
            run.host_left
        );
    }
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
