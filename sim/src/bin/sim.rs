//! The `sim` CLI: `sim install`, `sim list`, `sim scenario NAME`, `sim report PATH`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use sim::backend::{Backend, LocalBackend};
use sim::k3s::K3sBackend;
use sim::scenario;

#[derive(Parser)]
#[command(
    name = "sim",
    about = "The simulation rig: real nats-server topologies and scenarios"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendChoice {
    Local,
    K3s,
}

#[derive(Subcommand)]
enum Command {
    /// Install (download, verify, cache) every pinned nats-server version.
    Install,
    /// List the scenarios.
    List {
        #[arg(long, env = "SIM_SCENARIOS")]
        dir: Option<PathBuf>,
    },
    /// Run one scenario and write its report.
    Scenario {
        name: String,
        #[arg(long, env = "SIM_SCENARIOS")]
        dir: Option<PathBuf>,
        /// Where reports go (a folder per run).
        #[arg(long, env = "SIM_REPORTS")]
        reports_dir: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "local")]
        backend: BackendChoice,
    },
    /// Render report.html again from a report.json (the file or its folder); prints its path.
    Report { path: PathBuf },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Install => match sim::install::install_all() {
            Ok(done) => {
                for (v, p) in done {
                    println!("nats-server {v}: {}", p.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("sim install: {e}");
                ExitCode::FAILURE
            }
        },
        Command::List { dir } => {
            let dir = dir.unwrap_or_else(scenario::scenarios_dir);
            match scenario::list(&dir) {
                Ok(all) => {
                    for (name, s) in all {
                        println!("{name:<20} {}", s.description);
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sim list: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Report { path } => match scenario::html::rerender(&path) {
            Ok(page) => {
                println!("{}", page.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("sim report: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Scenario {
            name,
            dir,
            reports_dir,
            backend,
        } => {
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("sim scenario: cannot start the async runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            // A person running one scenario has it judged on its timings too (SIM_TIMINGS=report
            // says not to).
            scenario::set_judge_timings(true);
            let dir = dir.unwrap_or_else(scenario::scenarios_dir);
            let reports = reports_dir.unwrap_or_else(|| {
                let sim_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
                sim_dir
                    .parent()
                    .unwrap_or(sim_dir)
                    .join("target")
                    .join("sim-reports")
            });
            runtime.block_on(run_scenario(&name, &dir, &reports, backend))
        }
    }
}

async fn run_scenario(
    name: &str,
    dir: &std::path::Path,
    reports: &std::path::Path,
    backend: BackendChoice,
) -> ExitCode {
    let s = match scenario::find(dir, name) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sim scenario: {e}");
            return ExitCode::FAILURE;
        }
    };
    let backend: Box<dyn Backend> = match backend {
        BackendChoice::Local => Box::new(LocalBackend),
        BackendChoice::K3s => Box::new(K3sBackend::default()),
    };
    let mut progress = |line: &str| println!("{line}");
    let report = match scenario::run(&s, backend.as_ref(), &mut progress).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sim scenario {name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", report.summary());
    match report.write(reports) {
        Ok(path) => {
            println!("report: {}", path.join("report.json").display());
            println!("page: {}", path.join("report.html").display());
        }
        Err(e) => {
            eprintln!("sim scenario {name}: {e}");
            return ExitCode::FAILURE;
        }
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
