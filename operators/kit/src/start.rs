//! What every controller binary does before its controllers run: logs (`RUST_LOG`, `info` by
//! default), a Kubernetes client from the environment, /metrics served, and the `--resync` flag
//! read. Each failure says what failed and with which input, for the binary to print and exit.

use std::net::SocketAddr;
use std::time::Duration;

use crate::metrics::Metrics;

/// Why a binary could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No kubeconfig or in-cluster configuration worked.
    #[error("no Kubernetes client from the environment: {0}")]
    Client(#[source] kube::Error),
    /// The metrics address could not be bound.
    #[error("binding {addr}: {source}")]
    Metrics {
        /// The address asked for.
        addr: SocketAddr,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

/// Logs to stdout, filtered by `RUST_LOG` (`info` when unset).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
}

/// A client from the environment and a registry served on `metrics_addr`.
pub async fn client_and_metrics(
    metrics_addr: SocketAddr,
) -> Result<(kube::Client, Metrics), StartError> {
    let client = kube::Client::try_default()
        .await
        .map_err(StartError::Client)?;
    let metrics = Metrics::default();
    let addr = metrics
        .clone()
        .spawn_server(metrics_addr)
        .await
        .map_err(|source| StartError::Metrics {
            addr: metrics_addr,
            source,
        })?;
    tracing::info!(%addr, "serving /metrics");
    Ok((client, metrics))
}

/// `--resync` as a Go duration of more than zero.
pub fn resync(text: &str) -> Result<Duration, String> {
    match nats_api::jetstream::GoDuration::new(text).parse() {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("--resync must be more than 0".into()),
        Err(e) => Err(format!("--resync {text}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::minutes("5m", Ok(Duration::from_secs(300)))]
    #[case::seconds("30s", Ok(Duration::from_secs(30)))]
    #[case::zero("0s", Err("--resync must be more than 0".to_string()))]
    fn resync_is_a_positive_go_duration(
        #[case] text: &str,
        #[case] want: Result<Duration, String>,
    ) {
        assert_eq!(resync(text), want);
    }

    #[test]
    fn a_bad_resync_names_the_flag_and_the_value() {
        let e = resync("soon").expect_err("refused");
        assert!(e.starts_with("--resync soon: "), "{e}");
    }
}
