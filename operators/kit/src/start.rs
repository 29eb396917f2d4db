//! What every controller binary does around its controllers: logs (`--log-format`, `RUST_LOG`,
//! `info` by default), a Kubernetes client from the environment (rate-limited,
//! [`crate::ratelimit`]), /metrics served (with the
//! process's own figures, its build and whether it leads), the probes served (`--probe-addr`,
//! [`crate::probes`]), leader election when asked (`--leader-elect`, [`crate::leader`]), and the
//! graceful shutdown on SIGTERM or SIGINT: no new pass starts, the running ones finish, the
//! Lease is released, exit 0. Each failure to start says what failed and with which input, for
//! the binary to print and exit.
//!
//! A binary's `main` parses its flags (its own and [`ProcessFlags`], flattened), builds its
//! Context and hands its controllers' future to [`run`], which runs it under the binary's
//! [`Process`]: the one point where a binary is wired to all of this.

use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::leader::{self, Elector, Timings};
use crate::metrics::Metrics;
use crate::process_state::{Process, Role};

/// How long a stopping process waits for its running passes before it exits without them (and
/// without releasing the Lease, which then expires: a standby must not start while one runs).
/// Under the pod's default 30 s grace period.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(20);

/// Why a binary could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No kubeconfig or in-cluster configuration worked.
    #[error("no Kubernetes configuration from the environment: {0}")]
    Config(#[source] kube::config::InferConfigError),
    /// The configuration found gave no client.
    #[error("no Kubernetes client from the environment: {0}")]
    Client(#[source] kube::Error),
    /// The metrics' serving certificate does not load.
    #[error("--metrics-tls-cert/--metrics-tls-key: {0}")]
    Tls(#[from] crate::tls::TlsError),
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

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line (fields, span, level, timestamp).
    Json,
}

/// The flags every binary has besides its own (`#[command(flatten)]`).
#[derive(Debug, Clone, clap::Args)]
pub struct ProcessFlags {
    /// Where /healthz and /readyz are served.
    #[arg(long, env = "PROBE_ADDR", default_value = "0.0.0.0:8081")]
    pub probe_addr: SocketAddr,
    /// How log lines are written.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Reconcile only while holding this controller's Lease (more than one replica).
    #[arg(long, env = "LEADER_ELECT")]
    pub leader_elect: bool,
    /// The namespace of the Lease (named after the binary); without it, the client's default
    /// namespace (in a pod, its own).
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_elect_namespace: Option<String>,
    /// The PEM certificate chain /metrics is served with over TLS (with --metrics-tls-key); read
    /// again when the file changes. Without it /metrics is plain HTTP.
    #[arg(long, env = "METRICS_TLS_CERT", requires = "metrics_tls_key")]
    pub metrics_tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --metrics-tls-cert.
    #[arg(long, env = "METRICS_TLS_KEY", requires = "metrics_tls_cert")]
    pub metrics_tls_key: Option<std::path::PathBuf>,
    /// How long a standby waits, from when it saw the Lease last change, before taking it (Go
    /// duration, whole seconds).
    #[arg(long, default_value = "15s", value_parser = go_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader goes on without renewing before it stops reconciling and exits (Go
    /// duration; shorter than the lease duration).
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often every replica reads, and the leader renews, the Lease (Go duration).
    #[arg(long, default_value = "2s", value_parser = go_duration)]
    pub leader_elect_retry_period: Duration,
    /// The namespaces watched, comma-separated: every watch, list and read of the controllers
    /// stays in them. Empty: every namespace.
    #[arg(long, env = "WATCH_NAMESPACES", default_value = "")]
    pub watch_namespaces: String,
    /// At most this many reconciles of one controller run at once (one object never has two).
    #[arg(long, env = "CONCURRENCY", default_value_t = crate::scope::DEFAULT_CONCURRENCY,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// Requests a second toward the apiserver, past the burst (client-go's QPS); 0, the default:
    /// no client-side limit (the apiserver's API Priority and Fairness queues fairly).
    #[arg(long, env = "KUBE_API_QPS", default_value_t = crate::ratelimit::DEFAULT_QPS)]
    pub kube_api_qps: f64,
    /// Requests toward the apiserver at once before --kube-api-qps holds them back.
    #[arg(long, env = "KUBE_API_BURST", default_value_t = crate::ratelimit::DEFAULT_BURST,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_api_burst: u32,
}

impl ProcessFlags {
    /// The election's timings, if they are in order (see [`Timings::new`]).
    pub fn timings(&self) -> Result<Timings, String> {
        Timings::new(
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        )
        .map_err(|e| format!("--leader-elect-*: {e}"))
    }
}

impl ProcessFlags {
    /// `--watch-namespaces` and `--concurrency`, if the namespaces are names.
    pub fn scope(&self) -> Result<crate::scope::Scope, String> {
        Ok(crate::scope::Scope {
            namespaces: crate::scope::Namespaces::parse(&self.watch_namespaces)?,
            concurrency: self.concurrency,
        })
    }
}

/// A Go duration (`15s`, `1m30s`, `500ms`).
pub fn go_duration(text: &str) -> Result<Duration, String> {
    nats_api::jetstream::GoDuration::new(text)
        .parse()
        .map_err(|e| format!("{text}: {e}"))
}

/// What is logged when `RUST_LOG` is unset: `info`, less kube-runtime's own span per pass
/// ("reconciling object"), which says again what the kit's span of the pass says (kind,
/// namespace, name: [`crate::trace::reconcile_span`]) and is held by every pass waiting its turn
/// (2.9 MB with 10,000 NatsStreams applied at once, kept by the span registry once the burst is
/// over: docs/performance.md). kube-runtime's warnings and errors are still told.
pub const DEFAULT_LOG_FILTER: &str = "info,kube_runtime::controller=warn";

/// Logs to stdout as `format` says, filtered by `RUST_LOG` ([`DEFAULT_LOG_FILTER`] when unset).
pub fn init_tracing(format: LogFormat) {
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER))
    };
    let _ = match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter())
            .try_init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter())
            .try_init(),
    };
}

/// A client from the environment and a registry served on `metrics_addr`, over TLS when `flags`
/// name a serving certificate.
pub async fn client_and_metrics(
    metrics_addr: SocketAddr,
    flags: &ProcessFlags,
) -> Result<(kube::Client, Metrics), StartError> {
    let tls = match (&flags.metrics_tls_cert, &flags.metrics_tls_key) {
        (Some(cert), Some(key)) => {
            let serving = std::sync::Arc::new(crate::tls::ServingCert::open(cert, key)?);
            Some(serving.acceptor()?)
        }
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let config = kube::Config::infer().await.map_err(StartError::Config)?;
    let metrics = Metrics::default();
    let limiter = crate::ratelimit::Limiter::observed(
        flags.kube_api_qps,
        flags.kube_api_burst,
        metrics.clone(),
    );
    let client = kube::client::ClientBuilder::try_from(config)
        .map_err(StartError::Client)?
        .with_layer(&crate::ratelimit::RateLimitLayer::new(limiter))
        .build();
    let addr = metrics
        .clone()
        .spawn_server(metrics_addr, tls)
        .await
        .map_err(|source| StartError::Metrics {
            addr: metrics_addr,
            source,
        })?;
    tracing::info!(%addr, scheme, "serving /metrics");
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

/// A controller binary: its name (its Lease's name, its `build_info`'s prefix, the `controller`
/// label of its leader gauge) and its version.
#[derive(Debug, Clone, Copy)]
pub struct Binary {
    /// e.g. `jetstream-controller`.
    pub name: &'static str,
    /// The crate's version.
    pub version: &'static str,
}

/// SIGTERM and SIGINT, installed before anything runs so none is missed.
struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    fn install() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// Mirrors the process's role into the leader gauge, forever.
async fn mirror_leader(process: Process, metrics: Metrics, name: &'static str) {
    let mut role = process.role();
    loop {
        metrics.set_leader(name, role == Role::Leading);
        role = process.role_changed(role).await;
    }
}

/// Runs `controllers` (the binary's controllers' future) under the binary's [`Process`] until
/// a signal or a lost Lease; returns the exit code. With `--leader-elect` this replica stands by
/// until it holds the Lease `<namespace>/<binary name>`, and exits 1 the moment it loses it
/// (the rules in [`crate::leader`] make that strictly before another may take it), so what it
/// kept in memory for its objects goes with the process. On SIGTERM or SIGINT: no new pass
/// starts, the running ones finish (at most [`DRAIN_LIMIT`]; a second signal stops waiting),
/// the Lease is released, exit 0.
pub async fn run(
    binary: Binary,
    flags: &ProcessFlags,
    client: kube::Client,
    metrics: Metrics,
    controllers: impl Future<Output = ()>,
) -> ExitCode {
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("installing the SIGTERM and SIGINT handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let timings = match flags.timings() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    metrics.include_process();
    metrics.set_build_info(binary.name, binary.version);
    let process = if flags.leader_elect {
        Process::standby()
    } else {
        Process::leading()
    };
    match crate::probes::spawn(flags.probe_addr, process.clone()).await {
        Ok(addr) => tracing::info!(%addr, "serving /healthz and /readyz"),
        Err(e) => {
            eprintln!("binding {}: {e}", flags.probe_addr);
            return ExitCode::FAILURE;
        }
    }
    let mut elector = flags.leader_elect.then(|| {
        let namespace = flags
            .leader_elect_namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| client.default_namespace().to_string());
        let identity = leader::identity();
        tracing::info!(lease = %format!("{namespace}/{}", binary.name), %identity, "leader election");
        Elector::new(
            client.clone(),
            &namespace,
            binary.name,
            identity,
            timings,
            process.clone(),
        )
    });
    let mut controllers = Box::pin(process.scope(controllers));
    let mut gauge = Box::pin(mirror_leader(process.clone(), metrics, binary.name));

    let signalled = tokio::select! {
        () = &mut controllers => {
            tracing::error!("every controller ended");
            return ExitCode::FAILURE;
        }
        lost = campaign(elector.as_mut()) => {
            tracing::error!(reason = %lost, "exiting: the Lease is lost");
            return ExitCode::FAILURE;
        }
        s = signals.next() => s,
        () = &mut gauge => unreachable!("the gauge mirror runs forever"),
    };
    tracing::info!(
        signal = signalled,
        "stopping: no new pass starts; waiting for the running ones"
    );
    process.stop();
    let drained = tokio::select! {
        () = process.drained() => true,
        () = &mut controllers => true,
        lost = campaign(elector.as_mut()) => {
            tracing::error!(reason = %lost, "exiting: the Lease is lost");
            return ExitCode::FAILURE;
        }
        s = signals.next() => {
            tracing::warn!(signal = s, "exiting without waiting for the running passes");
            false
        }
        () = tokio::time::sleep(DRAIN_LIMIT) => {
            let left = process.unfinished();
            tracing::warn!(
                limit = ?DRAIN_LIMIT,
                loops = ?left.loops,
                passes = ?left.passes,
                "passes still running: exiting without them"
            );
            false
        }
        () = &mut gauge => unreachable!("the gauge mirror runs forever"),
    };
    drop(controllers);
    if !drained {
        // A pass may still be writing: leave the Lease to expire rather than hand it over now.
        return ExitCode::FAILURE;
    }
    if let Some(elector) = elector.as_mut() {
        match elector.release().await {
            Ok(true) => {}
            Ok(false) => tracing::info!("no Lease to release"),
            Err(e) => tracing::warn!(error = %e, "releasing the Lease; it expires instead"),
        }
    }
    tracing::info!("stopped");
    ExitCode::SUCCESS
}

/// The elector's campaign; without one, never ends.
async fn campaign(elector: Option<&mut Elector>) -> leader::Lost {
    match elector {
        Some(e) => e.run().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
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

    /// The spans the default filter lets through, by name, of those made inside `f`.
    fn spans_kept(f: impl FnOnce()) -> Vec<String> {
        use std::sync::{Arc, Mutex};
        use tracing_subscriber::layer::SubscriberExt;
        struct Names(Arc<Mutex<Vec<String>>>);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Names {
            fn on_new_span(
                &self,
                attrs: &tracing::span::Attributes<'_>,
                _: &tracing::span::Id,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                if let Ok(mut n) = self.0.lock() {
                    n.push(attrs.metadata().name().to_string());
                }
            }
        }
        let names = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER))
            .with(Names(names.clone()));
        tracing::subscriber::with_default(subscriber, f);
        names.lock().map(|n| n.clone()).unwrap_or_default()
    }

    #[test]
    fn the_default_filter_keeps_the_kits_span_of_a_pass_and_not_kube_runtimes() {
        let kept = spans_kept(|| {
            let _kube =
                tracing::info_span!(target: "kube_runtime::controller", "reconciling object");
            let _warned = tracing::warn_span!(target: "kube_runtime::controller", "failing");
            let _ours = crate::trace::reconcile_span("NatsStream", "ns", "orders");
        });
        assert_eq!(kept, ["failing", "reconcile"]);
    }

    #[test]
    fn a_bad_resync_names_the_flag_and_the_value() {
        let e = resync("soon").expect_err("refused");
        assert!(e.starts_with("--resync soon: "), "{e}");
    }

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        process: ProcessFlags,
    }

    #[test]
    fn the_process_flags_default_to_no_election_text_logs_and_probes_on_8081() {
        let f = Flags::try_parse_from(["x"]).expect("parses").process;
        assert!(!f.leader_elect);
        assert_eq!(f.log_format, LogFormat::Text);
        assert_eq!(f.probe_addr, "0.0.0.0:8081".parse().expect("an address"));
        assert_eq!(f.timings(), Ok(Timings::DEFAULT));
        assert_eq!(f.scope(), Ok(crate::scope::Scope::default()));
        assert_eq!(f.kube_api_qps, crate::ratelimit::DEFAULT_QPS);
        assert_eq!(f.kube_api_burst, crate::ratelimit::DEFAULT_BURST);
    }

    #[test]
    fn the_scope_flags_parse_and_refuse_nonsense() {
        let f = Flags::try_parse_from(["x", "--watch-namespaces", "b,a", "--concurrency", "4"])
            .expect("parses")
            .process;
        let scope = f.scope().expect("a scope");
        assert_eq!(scope.concurrency, 4);
        assert!(scope.namespaces.watches("a") && !scope.namespaces.watches("c"));
        let bad = Flags::try_parse_from(["x", "--watch-namespaces", "A/b"])
            .expect("parses")
            .process;
        assert!(
            bad.scope()
                .expect_err("refused")
                .contains("--watch-namespaces")
        );
        assert!(Flags::try_parse_from(["x", "--concurrency", "0"]).is_err());
        assert!(Flags::try_parse_from(["x", "--kube-api-burst", "0"]).is_err());
    }

    #[test]
    fn the_process_flags_parse_go_durations_and_refuse_timings_out_of_order() {
        let f = Flags::try_parse_from([
            "x",
            "--leader-elect",
            "--log-format",
            "json",
            "--leader-elect-namespace",
            "nats-system",
            "--leader-elect-lease-duration",
            "4s",
            "--leader-elect-renew-deadline",
            "3s",
            "--leader-elect-retry-period",
            "500ms",
        ])
        .expect("parses")
        .process;
        assert!(f.leader_elect);
        assert_eq!(f.log_format, LogFormat::Json);
        assert_eq!(f.leader_elect_namespace.as_deref(), Some("nats-system"));
        assert_eq!(
            f.timings().map(|t| t.retry_period),
            Ok(Duration::from_millis(500))
        );
        let bad = Flags::try_parse_from(["x", "--leader-elect-renew-deadline", "20s"])
            .expect("parses")
            .process;
        assert!(
            bad.timings()
                .expect_err("refused")
                .contains("renew deadline"),
            "{:?}",
            bad.timings()
        );
    }
}
