//! One polling helper with a deadline; every wait in the rig is a verb built on it.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How often a wait re-checks its condition.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
#[error("timed out after {after:?} waiting for {what}; last seen: {last}")]
pub struct WaitError {
    pub what: String,
    pub after: Duration,
    pub last: String,
}

/// Calls `check` every [`POLL_INTERVAL`] until it yields `Ok(Some(v))` or `timeout` passes.
/// `Ok(None)` and `Err(text)` both mean "not yet"; the last text is reported on timeout.
pub async fn poll<T, F, Fut>(what: &str, timeout: Duration, check: F) -> Result<T, WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    poll_every(what, timeout, POLL_INTERVAL, check).await
}

/// [`poll`] every `interval`: for a check that costs the servers something (a JSZ ping).
pub async fn poll_every<T, F, Fut>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut check: F,
) -> Result<T, WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => String::from("condition not met"),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(WaitError {
                what: what.to_string(),
                after: timeout,
                last,
            });
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_value_once_the_condition_holds() {
        let mut n = 0;
        let v = poll("n reaches 3", Duration::from_secs(5), || {
            n += 1;
            let n = n;
            async move { Ok(if n >= 3 { Some(n) } else { None }) }
        })
        .await
        .unwrap();
        assert_eq!(v, 3);
    }

    #[tokio::test]
    async fn times_out_with_the_last_state() {
        let err = poll::<(), _, _>("never", Duration::from_millis(250), || async {
            Err("still broken".to_string())
        })
        .await
        .unwrap_err();
        assert_eq!(err.last, "still broken");
        assert!(err.to_string().contains("never"));
    }
}
