//! `cluster-controller`: runs the NatsCluster controller against the cluster the environment's
//! kubeconfig names, with the Kubernetes server lifecycle, and serves the metrics and the probes,
//! under leader election when asked (`controller_kit::start::run`).

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use cluster_controller::controller::{self, Settings};
use cluster_controller::server_lifecycle::kubernetes::{KubernetesServerLifecycle, SiteSettings};
use controller_kit::start;

/// The cluster controller.
#[derive(Debug, Parser)]
#[command(name = "cluster-controller", version)]
struct Flags {
    /// Where /metrics is served.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Probes, logs and leader election.
    #[command(flatten)]
    process: start::ProcessFlags,
    /// Render gateways without TLS instead of refusing them (GatewayWithoutTLS).
    #[arg(long, env = "ALLOW_GATEWAY_WITHOUT_TLS")]
    allow_gateway_without_tls: bool,
    /// The namespace this controller runs in: the only one the NetworkPolicy admits to the
    /// servers' monitoring and exporter ports.
    #[arg(long, env = "CONTROLLER_NAMESPACE", default_value = "nats-system")]
    controller_namespace: String,
    /// The cluster DNS domain the servers' route URLs and certificates name.
    #[arg(long, env = "CLUSTER_DOMAIN", default_value = "cluster.local")]
    cluster_domain: String,
}

/// The Lease's name, the build_info's prefix.
const BINARY: start::Binary = start::Binary {
    name: "cluster-controller",
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
    let (client, metrics) =
        match start::client_and_metrics(flags.metrics_addr, &flags.process).await {
            Ok(started) => started,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
    let server_lifecycle = KubernetesServerLifecycle::new(
        client.clone(),
        SiteSettings {
            controller_namespace: flags.controller_namespace.clone(),
            cluster_domain: flags.cluster_domain.clone(),
        },
    );
    let settings = Settings {
        allow_gateway_without_tls: flags.allow_gateway_without_tls,
        controller_namespace: flags.controller_namespace,
        cluster_domain: flags.cluster_domain,
        scope,
        ..Settings::default()
    };
    let ctx = controller::context(client.clone(), server_lifecycle, settings, metrics.clone());
    start::run(
        BINARY,
        &flags.process,
        client,
        metrics,
        controller::run(ctx),
    )
    .await
}
