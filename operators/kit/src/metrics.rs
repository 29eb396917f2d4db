//! The controllers' Prometheus metrics: reconcile count, duration and errors per controller, and
//! the condition gauge {kind, namespace, name, type, reason}, rendered in the text exposition
//! format and served on /metrics. A binary's registry also renders the process's own figures
//! ([`process_figures`], read from /proc at each scrape), its build and whether it leads
//! ([`Metrics::set_build_info`], [`LEADER`]).

mod condition_series;
pub mod process_figures;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use tokio::net::TcpListener;

/// Reconciles run, by controller.
pub const RECONCILE_TOTAL: &str = "nats_operator_reconcile_total";
/// Reconciles that failed, by controller and error.
pub const RECONCILE_ERRORS: &str = "nats_operator_reconcile_errors_total";
/// Reconcile duration histogram, by controller.
pub const RECONCILE_DURATION: &str = "nats_operator_reconcile_duration_seconds";
/// 1 when the condition is True, 0 otherwise, by kind, namespace, name, type and reason.
pub const CONDITION: &str = "nats_operator_condition";

/// When an account's JWT expires (Unix seconds), by namespace and name; absent for one that never does.
pub const ACCOUNT_JWT_EXPIRY: &str = "nats_operator_account_jwt_expiry_timestamp_seconds";
/// How many times this process pushed an account's JWT (CLAIMS.UPDATE), by account public key.
pub const ACCOUNT_JWT_PUSHES: &str = "nats_operator_account_jwt_pushes";
/// Servers of a NatsCluster not yet on the target revision, by namespace and name.
pub const ROLLOUT_PENDING: &str = "nats_operator_rollout_pending_servers";
/// 1 while a NatsCluster's rollout gate is closed, by namespace, name and what it waits for.
pub const ROLLOUT_GATE: &str = "nats_operator_rollout_gate";

/// Requests this process sent to the apiserver, by HTTP verb (GET, POST, PUT, PATCH, DELETE).
pub const KUBE_REQUESTS: &str = "nats_operator_kube_requests_total";
/// Requests that waited for the client-side rate limit's token (`--kube-api-qps`).
pub const KUBE_RATE_LIMITED: &str = "nats_operator_kube_rate_limited_requests_total";
/// Seconds requests spent waiting for the client-side rate limit, summed.
pub const KUBE_RATE_LIMIT_WAIT: &str = "nats_operator_kube_rate_limit_wait_seconds_total";

/// 1 while this replica holds its controller's Lease (always 1 without leader election), by
/// controller.
pub const LEADER: &str = "nats_operator_leader";

/// Upper bounds (seconds) of the duration histogram's buckets.
pub const BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

#[derive(Debug, Default)]
struct Inner {
    reconciles: BTreeMap<String, u64>,
    errors: BTreeMap<(String, String), u64>,
    durations: BTreeMap<String, Histogram>,
    /// Per object: its conditions' series.
    conditions: condition_series::ConditionSeries,
    /// Named gauges: name → (help, label set → value).
    gauges: BTreeMap<String, Gauge>,
    /// Named counters, kept as the gauges are and rendered as `counter`.
    counters: BTreeMap<String, Gauge>,
    /// Whether [`process_figures`]'s figures are rendered too (a binary's registry, not an in-process one).
    process: bool,
}

/// Label pairs in the order they were given.
type Labels = Vec<(String, String)>;

#[derive(Debug, Default)]
struct Gauge {
    help: String,
    series: BTreeMap<Labels, f64>,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

/// The registry, shared by every controller of a process.
#[derive(Debug, Default, Clone)]
pub struct Metrics {
    inner: Arc<Mutex<Inner>>,
}

/// `v` as a label value: backslash, quote and newline escaped (a copy only where one is).
fn escape(v: &str) -> std::borrow::Cow<'_, str> {
    if v.contains(['\\', '"', '\n']) {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
            .into()
    } else {
        v.into()
    }
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one reconcile of `controller` that took `elapsed`.
    pub fn reconciled(&self, controller: &str, elapsed: Duration) {
        let mut m = self.lock();
        *m.reconciles.entry(controller.to_string()).or_default() += 1;
        let h = m.durations.entry(controller.to_string()).or_default();
        if h.counts.is_empty() {
            h.counts = vec![0; BUCKETS.len()];
        }
        let secs = elapsed.as_secs_f64();
        for (i, le) in BUCKETS.iter().enumerate() {
            if secs <= *le {
                h.counts[i] += 1;
            }
        }
        h.sum += secs;
        h.count += 1;
    }

    /// How many passes of `controller` have ended (the reconcile counter), so a caller can wait
    /// for passes that happened after a moment instead of sleeping.
    pub fn reconciles(&self, controller: &str) -> u64 {
        self.lock().reconciles.get(controller).copied().unwrap_or(0)
    }

    /// Counts one failed reconcile of `controller` with `error` (the error's metric label).
    pub fn failed(&self, controller: &str, error: &str) {
        let mut m = self.lock();
        *m.errors
            .entry((controller.to_string(), error.to_string()))
            .or_default() += 1;
    }

    /// Replaces the condition series of one object with its current conditions.
    pub fn set_conditions(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        conditions: &[Condition],
    ) {
        self.lock()
            .conditions
            .set(kind, namespace, name, conditions);
    }

    /// Drops every condition series of one object (it was deleted).
    pub fn forget(&self, kind: &str, namespace: &str, name: &str) {
        self.lock().conditions.forget(kind, namespace, name);
    }

    /// Sets one series of the gauge `name` (created with `help` on first use).
    pub fn set_gauge(&self, name: &str, help: &str, pairs: &[(&str, &str)], value: f64) {
        let mut m = self.lock();
        let gauge = m.gauges.entry(name.to_string()).or_default();
        gauge.help = help.to_string();
        gauge.series.insert(labels(pairs), value);
    }

    /// Adds `by` to one series of the counter `name` (created with `help` on first use). Its
    /// labels must be bounded: a verb, a reason, never an object's name.
    pub fn add_counter(&self, name: &str, help: &str, pairs: &[(&str, &str)], by: f64) {
        let mut m = self.lock();
        let counter = m.counters.entry(name.to_string()).or_default();
        if counter.help.is_empty() {
            counter.help = help.to_string();
        }
        *counter.series.entry(labels(pairs)).or_default() += by;
    }

    /// Drops every series of the gauge `name` whose labels include all of `pairs` (an object
    /// was deleted, or a rollout ended: its series must not linger at an old value).
    pub fn remove_gauge(&self, name: &str, pairs: &[(&str, &str)]) {
        let wanted = labels(pairs);
        if let Some(gauge) = self.lock().gauges.get_mut(name) {
            gauge
                .series
                .retain(|l, _| !wanted.iter().all(|p| l.contains(p)));
        }
    }

    /// Renders the process's own figures ([`process_figures`]) with the rest from now on: the registry of
    /// a binary, the only user of its process.
    pub fn include_process(&self) {
        self.lock().process = true;
    }

    /// Sets `<controller>_build_info{version} 1` (`controller` with `-` as `_`, e.g.
    /// `jetstream_controller_build_info`).
    pub fn set_build_info(&self, controller: &str, version: &str) {
        let name = format!("{}_build_info", controller.replace('-', "_"));
        self.set_gauge(
            &name,
            "The controller's build: 1, labelled with its version.",
            &[("version", version)],
            1.0,
        );
    }

    /// Sets [`LEADER`] for `controller`: whether this replica leads (its passes run).
    pub fn set_leader(&self, controller: &str, leads: bool) {
        self.set_gauge(
            LEADER,
            "1 while this replica holds the controller's Lease (its passes run).",
            &[("controller", controller)],
            f64::from(u8::from(leads)),
        );
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let m = self.lock();
        let mut out = String::new();
        let _ = writeln!(out, "# HELP {RECONCILE_TOTAL} Reconciles run.");
        let _ = writeln!(out, "# TYPE {RECONCILE_TOTAL} counter");
        for (c, n) in &m.reconciles {
            let _ = writeln!(out, "{RECONCILE_TOTAL}{{controller=\"{}\"}} {n}", escape(c));
        }
        let _ = writeln!(out, "# HELP {RECONCILE_ERRORS} Reconciles that failed.");
        let _ = writeln!(out, "# TYPE {RECONCILE_ERRORS} counter");
        for ((c, e), n) in &m.errors {
            let _ = writeln!(
                out,
                "{RECONCILE_ERRORS}{{controller=\"{}\",error=\"{}\"}} {n}",
                escape(c),
                escape(e)
            );
        }
        let _ = writeln!(out, "# HELP {RECONCILE_DURATION} Reconcile duration.");
        let _ = writeln!(out, "# TYPE {RECONCILE_DURATION} histogram");
        for (c, h) in &m.durations {
            let c = escape(c);
            for (le, n) in BUCKETS.iter().zip(&h.counts) {
                let _ = writeln!(
                    out,
                    "{RECONCILE_DURATION}_bucket{{controller=\"{c}\",le=\"{le}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "{RECONCILE_DURATION}_bucket{{controller=\"{c}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "{RECONCILE_DURATION}_sum{{controller=\"{c}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "{RECONCILE_DURATION}_count{{controller=\"{c}\"}} {}",
                h.count
            );
        }
        let _ = writeln!(out, "# HELP {CONDITION} 1 when the condition is True.");
        let _ = writeln!(out, "# TYPE {CONDITION} gauge");
        for (kind, ns, name, t, r, v) in m.conditions.each() {
            let _ = writeln!(
                out,
                "{CONDITION}{{kind=\"{}\",namespace=\"{}\",name=\"{}\",type=\"{}\",reason=\"{}\"}} {v}",
                escape(kind),
                escape(ns),
                escape(name),
                escape(t),
                escape(r)
            );
        }
        for (kind, family) in [("gauge", &m.gauges), ("counter", &m.counters)] {
            for (name, series) in family {
                let _ = writeln!(out, "# HELP {name} {}", series.help);
                let _ = writeln!(out, "# TYPE {name} {kind}");
                for (l, v) in &series.series {
                    let l = l
                        .iter()
                        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                        .collect::<Vec<_>>()
                        .join(",");
                    let _ = writeln!(out, "{name}{{{l}}} {v}");
                }
            }
        }
        if m.process {
            out.push_str(&process_figures::render(&process_figures::Figures::read()));
        }
        out
    }

    /// Serves the registry on `listener` (over TLS with `tls`): GET /metrics answers the text
    /// format, anything else 404.
    pub async fn serve(self, listener: TcpListener, tls: Option<tokio_rustls::TlsAcceptor>) {
        crate::http::serve(listener, tls, move |path| {
            if path == "/metrics" {
                crate::http::Response {
                    status: "200 OK",
                    content_type: "text/plain; version=0.0.4",
                    body: self.render(),
                }
            } else {
                crate::http::Response::not_found()
            }
        })
        .await;
    }

    /// Binds `addr` and serves in the background (over TLS with `tls`); returns the bound
    /// address.
    pub async fn spawn_server(
        self,
        addr: SocketAddr,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        tokio::spawn(self.serve(listener, tls));
        Ok(bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    pub(super) fn cond(t: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: t.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: crate::conditions::now(),
        }
    }

    #[rstest]
    #[case::count(RECONCILE_TOTAL.to_string() + "{controller=\"NatsStream\"} 2")]
    #[case::error(RECONCILE_ERRORS.to_string() + "{controller=\"NatsStream\",error=\"nats\"} 1")]
    #[case::bucket_below(RECONCILE_DURATION.to_string() + "_bucket{controller=\"NatsStream\",le=\"0.01\"} 0")]
    #[case::bucket_above(RECONCILE_DURATION.to_string() + "_bucket{controller=\"NatsStream\",le=\"1\"} 2")]
    #[case::inf(RECONCILE_DURATION.to_string() + "_bucket{controller=\"NatsStream\",le=\"+Inf\"} 2")]
    #[case::ready(CONDITION.to_string() + "{kind=\"NatsStream\",namespace=\"nats\",name=\"orders\",type=\"Ready\",reason=\"MatchesSpec\"} 1")]
    #[case::synced(CONDITION.to_string() + "{kind=\"NatsStream\",namespace=\"nats\",name=\"orders\",type=\"Synced\",reason=\"DriftCorrected\"} 0")]
    fn render_holds_each_series(#[case] line: String) {
        let m = Metrics::default();
        assert_eq!(m.reconciles("NatsStream"), 0);
        m.reconciled("NatsStream", Duration::from_millis(20));
        m.reconciled("NatsStream", Duration::from_millis(700));
        assert_eq!(m.reconciles("NatsStream"), 2);
        m.failed("NatsStream", "nats");
        m.set_conditions(
            "NatsStream",
            "nats",
            "orders",
            &[
                cond("Ready", "True", "MatchesSpec"),
                cond("Synced", "False", "DriftCorrected"),
            ],
        );
        let text = m.render();
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }

    #[test]
    fn gauges_render_their_series_and_removal_drops_only_the_matching_ones() {
        let m = Metrics::default();
        let help = "When the JWT expires.";
        m.set_gauge(
            ACCOUNT_JWT_EXPIRY,
            help,
            &[("namespace", "a"), ("name", "x")],
            1.5e9,
        );
        m.set_gauge(
            ACCOUNT_JWT_EXPIRY,
            help,
            &[("namespace", "a"), ("name", "y")],
            7.0,
        );
        m.set_gauge(
            ACCOUNT_JWT_EXPIRY,
            help,
            &[("namespace", "a"), ("name", "y")],
            8.0,
        );
        let text = m.render();
        for line in [
            format!("# TYPE {ACCOUNT_JWT_EXPIRY} gauge"),
            format!("{ACCOUNT_JWT_EXPIRY}{{namespace=\"a\",name=\"x\"}} 1500000000"),
            format!("{ACCOUNT_JWT_EXPIRY}{{namespace=\"a\",name=\"y\"}} 8"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        m.remove_gauge(ACCOUNT_JWT_EXPIRY, &[("name", "y")]);
        let text = m.render();
        assert!(text.contains("name=\"x\""), "{text}");
        assert!(!text.contains("name=\"y\""), "{text}");
    }

    #[test]
    fn counters_add_up_per_series_and_render_as_counters() {
        let m = Metrics::default();
        let help = "Requests sent.";
        m.add_counter(KUBE_REQUESTS, help, &[("verb", "GET")], 1.0);
        m.add_counter(KUBE_REQUESTS, help, &[("verb", "GET")], 2.0);
        m.add_counter(KUBE_REQUESTS, help, &[("verb", "PUT")], 1.0);
        let text = m.render();
        for line in [
            format!("# TYPE {KUBE_REQUESTS} counter"),
            format!("{KUBE_REQUESTS}{{verb=\"GET\"}} 3"),
            format!("{KUBE_REQUESTS}{{verb=\"PUT\"}} 1"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }

    #[rstest]
    #[case::plain("orders", "orders", true)]
    #[case::quote("a\"b", "a\\\"b", false)]
    #[case::backslash("a\\b", "a\\\\b", false)]
    #[case::newline("a\nb", "a\\nb", false)]
    fn a_label_value_is_escaped_and_copied_only_when_it_must_be(
        #[case] value: &str,
        #[case] escaped: &str,
        #[case] borrowed: bool,
    ) {
        let e = escape(value);
        assert_eq!(e, escaped);
        assert_eq!(matches!(e, std::borrow::Cow::Borrowed(_)), borrowed);
    }

    #[test]
    fn new_conditions_replace_an_objects_old_series_and_forget_drops_them() {
        let m = Metrics::default();
        m.set_conditions(
            "NatsStream",
            "n",
            "a",
            &[cond("Synced", "False", "DriftCorrected")],
        );
        m.set_conditions(
            "NatsStream",
            "n",
            "a",
            &[cond("Synced", "True", "MatchesSpec")],
        );
        let text = m.render();
        assert!(!text.contains("DriftCorrected"), "{text}");
        assert!(text.contains("reason=\"MatchesSpec\"} 1"), "{text}");
        m.forget("NatsStream", "n", "a");
        assert!(!m.render().contains("name=\"a\""));
    }

    #[tokio::test]
    async fn serves_the_text_on_metrics() {
        let m = Metrics::default();
        m.reconciled("NatsConnection", Duration::from_millis(5));
        let addr = m
            .spawn_server("127.0.0.1:0".parse().expect("an address"), None)
            .await
            .expect("binds");
        let mut s = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connects");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("writes");
        let mut body = String::new();
        s.read_to_string(&mut body).await.expect("reads");
        assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
        assert!(body.contains("nats_operator_reconcile_total{controller=\"NatsConnection\"} 1"));
    }
}
