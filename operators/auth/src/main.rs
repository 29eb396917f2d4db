//! `auth-controller`: runs the NatsOperator, NatsSystemAccount, NatsAccount, NatsUser and trust
//! object controllers against the cluster the environment's kubeconfig names, pushes JWTs over
//! `--system-connection`, and serves the metrics and the probes, under leader election when asked
//! (`controller_kit::start::run`).

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
    /// Probes, logs and leader election.
    #[command(flatten)]
    process: start::ProcessFlags,
    /// How often every resource is re-read and re-checked (Go duration).
    #[arg(long, env = "RESYNC", default_value = "5m")]
    resync: String,
    /// The NatsConnection (`namespace/name`) of a system user with the auth-controller preset,
    /// over which account JWTs are pushed; without it nothing is pushed.
    #[arg(long, env = "SYSTEM_CONNECTION")]
    system_connection: Option<String>,
}

/// The Lease's name, the build_info's prefix.
const BINARY: start::Binary = start::Binary {
    name: "auth-controller",
    version: env!("CARGO_PKG_VERSION"),
};

#[tokio::main]
async fn main() -> ExitCode {
    // The chart's pre-delete hook (controller_kit::uninstall), in every controller image.
    if std::env::args().nth(1).as_deref() == Some(controller_kit::uninstall::SUBCOMMAND) {
        return controller_kit::uninstall::main().await;
    }
    let flags = Flags::parse();
    start::init_tracing(flags.process.log_format);
    let resync = match start::resync(&flags.resync) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let scope = match flags.process.scope() {
        Ok(s) => s,
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
    if let Some(sc) = &system_connection
        && !scope.namespaces.watches(&sc.namespace)
    {
        eprintln!(
            "--system-connection {}/{}: namespace {} is not in --watch-namespaces",
            sc.namespace, sc.name, sc.namespace
        );
        return ExitCode::from(2);
    }
    let (client, metrics) =
        match start::client_and_metrics(flags.metrics_addr, &flags.process).await {
            Ok(started) => started,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
    let settings = Settings {
        resync,
        system_connection,
        scope,
    };
    let ctx = controller::context(client.clone(), settings, metrics.clone());
    start::run(
        BINARY,
        &flags.process,
        client,
        metrics,
        controller::run(ctx),
    )
    .await
}
