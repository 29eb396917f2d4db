//! The `sim` CLI: `sim install`, `sim list`, `sim scenario NAME`, `sim report PATH`, `sim up`,
//! `sim down`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use sim::backend::{Backend, LocalBackend};
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
    /// The sim's real node with the chart installed: run by the e2e crate, which installs it.
    Node,
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
    /// Run one scenario and write its report (one with controllers needs the sim built with
    /// `--features kube`).
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
    /// Run a kube-apiserver with the CRDs and the three controllers (NatsClusters as local
    /// nats-server processes) to drive with kubectl, until Ctrl-C (the sim built with
    /// `--features kube`).
    Up {
        /// Where everything lives (pid file, kubeconfig, etcd data, servers); default
        /// target/sim-up of the checkout.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The auth controller's system connection, namespace/name (story 02's).
        #[arg(long, default_value = "nats-system/auth")]
        system_connection: String,
    },
    /// Stop a `sim up` running in the background and remove its directory.
    Down {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Render report.html again from a report.json (the file or its folder); prints its path.
    Report { path: PathBuf },
    /// Run COMMAND (a test run) with a pool of kube-apiservers its API tests borrow one at a
    /// time, reset between them (SIM_APISERVER_POOL names its socket); every server is stopped
    /// when COMMAND ends, and the exit status is COMMAND's (the sim built with `--features kube`).
    ApiserverPool {
        /// Where the pool's directory is made (default: the temp directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The command and its arguments (after `--`).
        #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

/// Prints `line` and a newline; a closed stdout (`sim list | head`) is not an error of the sim's.
fn say(line: &str) {
    show(&format!("{line}\n"));
}

/// Prints `text` as it is, a closed stdout ignored as in [`say`].
fn show(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// `sim up` and `sim down` run the Kubernetes harnesses, which this sim was built without.
#[cfg(not(feature = "kube"))]
fn without_harnesses(command: &str) -> ExitCode {
    eprintln!(
        "sim {command}: this sim was built without the Kubernetes harnesses (kube-apiserver and the \
         controllers); build it with them: `cargo run -p sim --features kube -- {command}` \
         (`just {command}`)"
    );
    ExitCode::FAILURE
}

#[cfg(not(feature = "kube"))]
fn up(_dir: Option<PathBuf>, _system_connection: String) -> ExitCode {
    without_harnesses("up")
}

#[cfg(not(feature = "kube"))]
fn down(_dir: Option<PathBuf>) -> ExitCode {
    without_harnesses("down")
}

fn runtime(what: &str) -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Runtime::new() {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("sim {what}: cannot start the async runtime: {e}");
            None
        }
    }
}

#[cfg(feature = "kube")]
fn up(dir: Option<PathBuf>, system_connection: String) -> ExitCode {
    let mut progress = |line: &str| say(&format!("[install] {line}"));
    let ready = sim::ensure::nats_server(&mut progress)
        .and_then(|_| sim::ensure::apiserver(&mut progress))
        .and_then(|_| sim::ensure::kubectl(&mut progress));
    if let Err(e) = ready {
        eprintln!("sim up: {e}");
        return ExitCode::FAILURE;
    }
    let Some(runtime) = runtime("up") else {
        return ExitCode::FAILURE;
    };
    let opts = sim::up::UpOptions {
        dir: dir.unwrap_or_else(sim::up::default_dir),
        system_connection,
    };
    match runtime.block_on(sim::up::run(&opts, &mut say)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sim up: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "kube"))]
fn apiserver_pool(_dir: Option<PathBuf>, _command: Vec<String>) -> ExitCode {
    without_harnesses("apiserver-pool")
}

#[cfg(feature = "kube")]
fn apiserver_pool(dir: Option<PathBuf>, command: Vec<String>) -> ExitCode {
    let Some(runtime) = runtime("apiserver-pool") else {
        return ExitCode::FAILURE;
    };
    let dir = dir.unwrap_or_else(std::env::temp_dir);
    match runtime.block_on(sim::apiserver::pool::run(&dir, &command)) {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => {
            let code = status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(1);
            ExitCode::from(code.max(1))
        }
        Err(e) => {
            eprintln!("sim apiserver-pool: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "kube")]
fn down(dir: Option<PathBuf>) -> ExitCode {
    let dir = dir.unwrap_or_else(sim::up::default_dir);
    match sim::up::down(&dir) {
        Ok(d) => {
            match (d.stopped, d.killed) {
                (Some(pid), false) => say(&format!("sim down: stopped the sim up of pid {pid}")),
                (Some(pid), true) => say(&format!(
                    "sim down: the sim up of pid {pid} did not stop in time and was killed"
                )),
                (None, _) => say(&format!(
                    "sim down: no sim up was running in {}",
                    dir.display()
                )),
            }
            if !d.swept.is_empty() {
                say(&format!(
                    "sim down: killed {} processes it had left: {:?}",
                    d.swept.len(),
                    d.swept
                ));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sim down: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Install => match sim::install::install_all() {
            Ok(done) => {
                for (v, p) in done {
                    say(&format!("nats-server {v}: {}", p.display()));
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
                        say(&format!("{name:<20} {}", s.description));
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sim list: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Up {
            dir,
            system_connection,
        } => up(dir, system_connection),
        Command::Down { dir } => down(dir),
        Command::ApiserverPool { dir, command } => apiserver_pool(dir, command),
        Command::Report { path } => match scenario::html::rerender(&path) {
            Ok(page) => {
                say(&page.display().to_string());
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
            let Some(runtime) = runtime("scenario") else {
                return ExitCode::FAILURE;
            };
            // A person running one scenario has it judged on its timings too (SIM_TIMINGS=report
            // says not to).
            scenario::set_judge_timings(true);
            let dir = dir.unwrap_or_else(scenario::scenarios_dir);
            let reports = reports_dir.unwrap_or_else(|| sim::checkout::path("target/sim-reports"));
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
    #[cfg(not(feature = "kube"))]
    if s.needs_harnesses() {
        eprintln!(
            "sim scenario {name}: this scenario needs the Kubernetes harnesses (kube-apiserver and \
             the controllers), which this sim was built without; run it with them: `cargo run -p \
             sim --features kube -- scenario {name}` (or `just scenario {name}`)"
        );
        return ExitCode::FAILURE;
    }
    // What the scenario needs, installed on first use with a line each.
    let mut install = |line: &str| say(&format!("[install] {line}"));
    let ready = sim::ensure::nats_server(&mut install).map(|_| ());
    #[cfg(feature = "kube")]
    let ready = match ready {
        Ok(()) if s.needs_host() => sim::ensure::apiserver(&mut install),
        other => other,
    };
    if let Err(e) = ready {
        eprintln!("sim scenario {name}: {e}");
        return ExitCode::FAILURE;
    }
    let backend: Box<dyn Backend> = match backend {
        BackendChoice::Local => Box::new(LocalBackend),
        BackendChoice::Node => {
            eprintln!(
                "sim scenario {name}: the node backend needs the chart and the controllers' images, \
                 which the e2e crate installs: `just scenario {name} --backend node` \
                 (`cargo run -p e2e --features node --bin node-scenario -- {name}`)"
            );
            return ExitCode::FAILURE;
        }
        #[cfg(feature = "k3s")]
        BackendChoice::K3s => Box::new(sim::k3s::K3sBackend::default()),
        #[cfg(not(feature = "k3s"))]
        BackendChoice::K3s => {
            eprintln!(
                "sim scenario {name}: this sim was built without the k3s backend; \
                 build it with `cargo run -p sim --features k3s -- scenario {name} --backend k3s`"
            );
            return ExitCode::FAILURE;
        }
    };
    let mut progress = say;
    let report = match scenario::run(&s, backend.as_ref(), &mut progress).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sim scenario {name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    show(&report.summary());
    match report.write(reports) {
        Ok(path) => {
            say(&format!("report: {}", path.join("report.json").display()));
            say(&format!("page: {}", path.join("report.html").display()));
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
