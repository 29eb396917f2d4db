//! `auth-controller`: runs the NatsOperator, NatsSystemAccount, NatsAccount, NatsUser and trust
//! object controllers against the cluster the environment's kubeconfig names, pushes JWTs over
//! `--system-connection`, and serves the metrics.

use std::net::SocketAddr;
use std::process::ExitCode;

use auth_controller::controller::{self, Settings, SystemConnection};
use clap::Parser;
use controller_kit::metrics::Metrics;
use nats_api::jetstream::GoDuration;

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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let flags = Flags::parse();
    let resync = match GoDuration::new(&flags.resync).parse() {
        Ok(d) if !d.is_zero() => d,
        Ok(_) => {
            eprintln!("--resync must be more than 0");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("--resync {}: {e}", flags.resync);
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
    let client = match kube::Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("no Kubernetes client from the environment: {e}");
            return ExitCode::FAILURE;
        }
    };
    let metrics = Metrics::default();
    match metrics.clone().spawn_server(flags.metrics_addr).await {
        Ok(addr) => tracing::info!(%addr, "serving /metrics"),
        Err(e) => {
            eprintln!("binding {}: {e}", flags.metrics_addr);
            return ExitCode::FAILURE;
        }
    }
    let settings = Settings {
        resync,
        system_connection,
    };
    controller::run(controller::context(client, settings, metrics)).await;
    ExitCode::SUCCESS
}
