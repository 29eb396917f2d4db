//! `auth-controller`: runs the NatsOperator, NatsSystemAccount, NatsAccount, NatsUser and trust
//! object controllers against the cluster the environment's kubeconfig names, pushes JWTs over
//! `--system-connection`, and serves the metrics.

use std::net::SocketAddr;
use std::process::ExitCode;

use auth_controller::controller::{self, Settings, SystemConnection};
use clap::Parser;
use controller_kit::start;

/// The auth controller.
#[derive(Debug, Parser)]
#[command(name = "auth-controller", version)]
struct Flags {
    /// Where /metrics is served.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// How often every resource is re-read and re-checked (Go duration).
    #[arg(long, env = "RESYNC", default_value = "5m")]
    resync: String,
    /// The NatsConnection (`namespace/name`) of a system user with the auth-controller preset,
    /// over which account JWTs are pushed; without it nothing is pushed.
    #[arg(long, env = "SYSTEM_CONNECTION")]
    system_connection: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    start::init_tracing();
    let flags = Flags::parse();
    let resync = match start::resync(&flags.resync) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let system_connection = match flags.system_connection.as_deref() {
        None => None,
        Some(text) => match SystemConnection::parse(text) {
            Some(sc) => Some(sc),
            None => {
                eprintln!("--system-connection {text}: expected namespace/name");
                return ExitCode::from(2);
            }
        },
    };
    let (client, metrics) = match start::client_and_metrics(flags.metrics_addr).await {
        Ok(started) => started,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let settings = Settings {
        resync,
        system_connection,
    };
    controller::run(controller::context(client, settings, metrics)).await;
    ExitCode::SUCCESS
}
