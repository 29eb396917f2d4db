//! `jetstream-controller`: runs the NatsConnection, NatsStream, NatsConsumer, NatsKeyValue and
//! NatsObjectStore controllers against the cluster the environment's kubeconfig names, and serves
//! the metrics and the probes, under leader election when asked (`controller_kit::start::run`).

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use controller_kit::start;
use jetstream_controller::controller::{self, Settings};

/// The JetStream controller.
#[derive(Debug, Parser)]
#[command(name = "jetstream-controller", version)]
struct Flags {
    /// Where /metrics is served.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Probes, logs and leader election.
    #[command(flatten)]
    process: start::ProcessFlags,
    /// How often every resource is re-read and compared with the server (Go duration).
    #[arg(long, env = "RESYNC", default_value = "5m")]
    resync: String,
}

/// The Lease's name, the build_info's prefix.
const BINARY: start::Binary = start::Binary {
    name: "jetstream-controller",
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
    let scope = match flags.process.scope() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let resync = match start::resync(&flags.resync) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let (client, metrics) =
        match start::client_and_metrics(flags.metrics_addr, &flags.process).await {
            Ok(started) => started,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
    let ctx = controller::context(client.clone(), Settings { resync, scope }, metrics.clone());
    start::run(
        BINARY,
        &flags.process,
        client,
        metrics,
        controller::run(ctx),
    )
    .await
}
