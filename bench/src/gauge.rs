//! Waiting for many objects to reach a condition as the controller's condition gauge reports it
//! (`nats_operator_condition`, set once the apiserver answered the status write that holds it),
//! read off its /metrics, then checked once against the apiserver.
//!
//! A watch of the 1,000 users beside their burst had the apiserver send the bench every event of
//! the burst (about 4,000) and list all 1,000 again whenever the watch broke: load on the
//! apiserver the figure measures, which the work floor, timed by its own answers, does not carry
//! (1.67 times the work floor with it, 1.31 without it in the next run; docs/performance.md).
//! A scrape of the controller costs the apiserver nothing.

use std::time::{Duration, Instant};

/// Polls the /metrics of the binary on `port` every `every` from now, on a task of its own, until
/// `reached` takes a scrape; the instant it first did. Fails after `timeout`, with the last
/// scrape's `count`.
pub fn reaching(
    port: u16,
    what: &'static str,
    every: Duration,
    timeout: Duration,
    reached: impl Fn(&str) -> bool + Send + 'static,
    count: impl Fn(&str) -> String + Send + 'static,
) -> impl std::future::Future<Output = anyhow::Result<Instant>> {
    let task = tokio::spawn(async move {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match sim::testkit::metrics(port).await {
                Ok(body) if reached(&body) => return Ok(Instant::now()),
                Ok(body) => count(&body),
                Err(e) => format!("/metrics unread: {e}"),
            };
            if Instant::now() >= deadline {
                anyhow::bail!("{what}: not after {} s ({last})", timeout.as_secs());
            }
            tokio::time::sleep(every).await;
        }
    });
    async move { task.await.map_err(|e| anyhow::anyhow!("{what}: {e}"))? }
}
