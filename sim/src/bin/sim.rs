//! The `sim` CLI: `sim install`, `sim list`, `sim scenario NAME`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "sim",
    about = "The simulation rig: real nats-server topologies and scenarios"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install (download, verify, cache) every pinned nats-server version.
    Install,
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
    }
}
