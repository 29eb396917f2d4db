//! `jetstream-controller`: runs the NatsConnection, NatsStream, NatsConsumer, NatsKeyValue and
//! NatsObjectStore controllers against the cluster the environment's kubeconfig names, and serves
//! the metrics.

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
    /// How often every resource is re-read and compared with the server (Go duration).
    #[arg(long, env = "RESYNC", default_value = "5m")]
    resync: String,
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
    let (client, metrics) = match start::client_and_metrics(flags.metrics_addr).await {
        Ok(started) => started,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    controller::run(controller::context(client, Settings { resync }, metrics)).await;
    ExitCode::SUCCESS
}
