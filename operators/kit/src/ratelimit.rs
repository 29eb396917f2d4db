//! The client-side rate limit toward the apiserver (`--kube-api-qps`, `--kube-api-burst`), as
//! client-go's: a token bucket holding `burst` requests, refilled at `qps` a second; a request
//! that finds it empty waits for its token. Every request of the binary's client shares one
//! bucket, so a storm of passes (a relist of 1,000 objects) reaches the apiserver at `qps`.
//!
//! A tower layer on the kube Client ([`RateLimitLayer`]), whose wait is taken in `poll_ready`
//! (kube drives its service from one buffer worker, so waiting requests queue in order). Written
//! here rather than taken from a crate: tower's own `RateLimit` is a fixed window (`n` requests
//! per period, no burst, and up to `2n` across a window edge), and `governor`, the token bucket
//! crate most use, would add its dependency tree (and a clock of its own) for the twenty lines
//! of arithmetic in [`Bucket`], which the tests below pin.
//!
//! The layer also counts what it sees, into the binary's registry when it has one
//! ([`Limiter::observed`]): every request by verb ([`crate::metrics::KUBE_REQUESTS`]), the requests
//! that waited for a token and the seconds they waited ([`crate::metrics::KUBE_RATE_LIMITED`],
//! [`crate::metrics::KUBE_RATE_LIMIT_WAIT`]), so an operator sees when the limit, not the
//! apiserver, is what slows the passes down.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

use crate::metrics::{KUBE_RATE_LIMIT_WAIT, KUBE_RATE_LIMITED, KUBE_REQUESTS, Metrics};

/// Requests a second when `--kube-api-qps` is not given: none, no client-side limit. The
/// apiserver's API Priority and Fairness (on by default since Kubernetes 1.20, the oldest this
/// project serves) queues a client's requests fairly against everyone else's, and
/// controller-runtime turns client-go's own limit off for that reason. A limit in the client
/// does the opposite of what a shared cluster needs: its one bucket is shared by every object
/// the binary serves, so one tenant's burst (1,000 NatsUsers applied at once: 8,700 requests)
/// held every other tenant's passes back for minutes at 50 a second. Set it to cap a binary
/// where the apiserver has no such fairness.
pub const DEFAULT_QPS: f64 = 0.0;
/// Requests at once when `--kube-api-burst` is not given (and `--kube-api-qps` is).
pub const DEFAULT_BURST: u32 = 100;

/// A token bucket: the pure core of the limit.
#[derive(Debug, Clone)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    /// Tokens in hand at `at`; below zero, tokens already promised to waiting requests.
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket of `burst` tokens at `now`, refilled at `qps` a second (both at least
    /// one; `qps` zero or less means no limit).
    pub fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// Takes one token at `now`: how long the request waits for it (zero when one is in hand).
    pub fn take(&mut self, now: Instant) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.at = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// One bucket shared by every clone of the layer's service, its count of waits, and the
/// registry it reports to.
#[derive(Debug)]
pub struct Limiter {
    bucket: Mutex<Bucket>,
    waited: AtomicU64,
    metrics: Option<Metrics>,
}

impl Limiter {
    /// A limiter of `qps` and `burst` (see [`Bucket::new`]).
    pub fn new(qps: f64, burst: u32) -> Arc<Self> {
        Arc::new(Self {
            bucket: Mutex::new(Bucket::new(qps, burst, Instant::now())),
            waited: AtomicU64::new(0),
            metrics: None,
        })
    }

    /// A limiter that also counts into `metrics` (see the module doc).
    pub fn observed(qps: f64, burst: u32, metrics: Metrics) -> Arc<Self> {
        Arc::new(Self {
            bucket: Mutex::new(Bucket::new(qps, burst, Instant::now())),
            waited: AtomicU64::new(0),
            metrics: Some(metrics),
        })
    }

    fn sent(&self, verb: &str) {
        if let Some(m) = &self.metrics {
            m.add_counter(
                KUBE_REQUESTS,
                "Requests this process sent to the apiserver, by HTTP verb.",
                &[("verb", verb)],
                1.0,
            );
        }
    }

    /// How many requests have waited for a token.
    pub fn waited(&self) -> u64 {
        self.waited.load(Ordering::Relaxed)
    }

    fn take(&self) -> Duration {
        let wait = self
            .bucket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(Instant::now());
        if !wait.is_zero() {
            self.waited.fetch_add(1, Ordering::Relaxed);
            if let Some(m) = &self.metrics {
                m.add_counter(
                    KUBE_RATE_LIMITED,
                    "Requests that waited for the client-side rate limit (--kube-api-qps).",
                    &[],
                    1.0,
                );
                m.add_counter(
                    KUBE_RATE_LIMIT_WAIT,
                    "Seconds requests waited for the client-side rate limit, summed.",
                    &[],
                    wait.as_secs_f64(),
                );
            }
        }
        wait
    }
}

/// The tower layer: `ClientBuilder::with_layer(&RateLimitLayer::new(limiter))`.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    limiter: Arc<Limiter>,
}

impl RateLimitLayer {
    /// A layer taking every request's token from `limiter`.
    pub fn new(limiter: Arc<Limiter>) -> Self {
        Self { limiter }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            limiter: self.limiter.clone(),
            state: State::Empty,
        }
    }
}

/// Where the next request stands: no token yet, waiting for it, or holding it.
enum State {
    Empty,
    Waiting(Pin<Box<Sleep>>),
    Ready,
}

/// The service of [`RateLimitLayer`].
pub struct RateLimit<S> {
    inner: S,
    limiter: Arc<Limiter>,
    state: State,
}

impl<S, B> Service<hyper::Request<B>> for RateLimit<S>
where
    S: Service<hyper::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            match &mut self.state {
                State::Empty => {
                    let wait = self.limiter.take();
                    self.state = if wait.is_zero() {
                        State::Ready
                    } else {
                        State::Waiting(Box::pin(tokio::time::sleep(wait)))
                    };
                }
                State::Waiting(sleep) => {
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.state = State::Ready;
                }
                State::Ready => return self.inner.poll_ready(cx),
            }
        }
    }

    fn call(&mut self, request: hyper::Request<B>) -> Self::Future {
        // The token is spent: the next request takes its own.
        self.state = State::Empty;
        self.limiter.sent(request.method().as_str());
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// The waits of requests taken at the given offsets (ms) from a fresh bucket.
    fn waits(qps: f64, burst: u32, at_ms: &[u64]) -> Vec<u64> {
        let t0 = Instant::now();
        let mut b = Bucket::new(qps, burst, t0);
        at_ms
            .iter()
            .map(|ms| b.take(t0 + Duration::from_millis(*ms)).as_millis() as u64)
            .collect()
    }

    #[rstest]
    #[case::within_the_burst(10.0, 3, &[0, 0, 0], &[0, 0, 0])]
    #[case::past_the_burst_each_waits_its_turn(10.0, 2, &[0, 0, 0, 0], &[0, 0, 100, 200])]
    #[case::refilled_while_idle(10.0, 1, &[0, 100, 200], &[0, 0, 0])]
    #[case::never_more_than_the_burst_saved(10.0, 2, &[0, 10_000, 10_000, 10_000], &[0, 0, 0, 100])]
    #[case::half_a_token_waits_half_a_period(2.0, 1, &[0, 250], &[0, 250])]
    #[case::no_limit(0.0, 1, &[0, 0, 0], &[0, 0, 0])]
    fn a_bucket_holds_burst_and_refills_at_qps(
        #[case] qps: f64,
        #[case] burst: u32,
        #[case] at_ms: &[u64],
        #[case] want: &[u64],
    ) {
        assert_eq!(waits(qps, burst, at_ms), want);
    }

    /// `n` requests through the layer over a service answering at once, in paused time (it
    /// moves only while every task waits on a timer).
    async fn send(limiter: &Arc<Limiter>, n: usize) {
        use tower::ServiceExt;
        let inner = tower::service_fn(|r: hyper::Request<usize>| async move {
            Ok::<_, std::convert::Infallible>(*r.body())
        });
        let mut svc = RateLimitLayer::new(limiter.clone()).layer(inner);
        for i in 0..n {
            let method = if i % 2 == 0 { "GET" } else { "PUT" };
            let request = hyper::Request::builder()
                .method(method)
                .body(i)
                .expect("a request");
            let got = svc
                .ready()
                .await
                .expect("ready")
                .call(request)
                .await
                .expect("answered");
            assert_eq!(got, i);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn requests_past_the_burst_each_wait_for_a_refill() {
        let limiter = Limiter::new(5.0, 10);
        let started = Instant::now();
        send(&limiter, 30).await;
        // Ten go at once, each of the twenty others waits for its token.
        assert_eq!(limiter.waited(), 20);
        // Twenty tokens at five a second: at least four seconds (a lower bound only).
        assert!(
            started.elapsed() >= Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_observed_limiter_counts_requests_by_verb_and_the_waits() {
        let metrics = Metrics::default();
        let limiter = Limiter::observed(5.0, 10, metrics.clone());
        send(&limiter, 30).await;
        let text = metrics.render();
        for line in [
            format!("{KUBE_REQUESTS}{{verb=\"GET\"}} 15"),
            format!("{KUBE_REQUESTS}{{verb=\"PUT\"}} 15"),
            format!("{KUBE_RATE_LIMITED}{{}} 20"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        // Sent one after another, each of the twenty waited one refill, 0.2 s: 4 s in all.
        let waited = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{KUBE_RATE_LIMIT_WAIT}{{}} ")))
            .and_then(|v| v.parse::<f64>().ok())
            .expect("the wait series");
        assert!((waited - 4.0).abs() < 0.01, "{waited}");
    }

    #[tokio::test(start_paused = true)]
    async fn requests_within_the_burst_never_wait() {
        let limiter = Limiter::new(5.0, 10);
        send(&limiter, 10).await;
        assert_eq!(limiter.waited(), 0);
    }
}
