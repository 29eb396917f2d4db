//! Waiting for many objects to reach a state, from one watch rather than repeated lists: a list
//! of 10,000 objects every 100 ms would load the apiserver the figure measures (issue 40's scale
//! figures), while a watch costs it one event per write the controller makes anyway.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};

/// Waits until `count` objects of `api` whose name passes `named` satisfy `done`, as a watch sees
/// them (its initial list included), or fails after `timeout` saying how many did.
pub async fn until_count(
    api: &Api<DynamicObject>,
    what: &str,
    count: usize,
    timeout: Duration,
    named: impl Fn(&str) -> bool,
    done: impl Fn(&DynamicObject) -> bool,
) -> anyhow::Result<()> {
    let mut seen: HashSet<String> = HashSet::new();
    // The names of the initial list's objects that are done, until its end replaces `seen`.
    let mut listing: HashSet<String> = HashSet::new();
    let mut events = std::pin::pin!(watcher::watcher(api.clone(), watcher::Config::default()));
    let watching = async {
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Init) => listing.clear(),
                Ok(Event::InitApply(o)) => {
                    if named(&o.name_any()) && done(&o) {
                        listing.insert(o.name_any());
                    }
                }
                Ok(Event::InitDone) => seen = std::mem::take(&mut listing),
                Ok(Event::Apply(o)) => {
                    if named(&o.name_any()) {
                        if done(&o) {
                            seen.insert(o.name_any());
                        } else {
                            seen.remove(&o.name_any());
                        }
                    }
                }
                Ok(Event::Delete(o)) => {
                    seen.remove(&o.name_any());
                }
                // The watcher relists on its own after an error; the count carries on.
                Err(_) => {}
            }
            if seen.len() >= count {
                return true;
            }
        }
        false
    };
    let result = tokio::time::timeout(timeout, watching).await;
    match result {
        Ok(true) => Ok(()),
        Ok(false) => anyhow::bail!("{what}: the watch ended at {} of {count}", seen.len()),
        Err(_) => anyhow::bail!(
            "{what}: {} of {count} after {} s",
            seen.len(),
            timeout.as_secs()
        ),
    }
}

/// [`until_count`] started now on a task of its own, to be awaited after the objects are applied:
/// the watch is open before the burst and streams its events, where one opened after it lists
/// every object first, and again after each error of a watch the loaded apiserver refused.
pub fn counting(
    api: &Api<DynamicObject>,
    what: &'static str,
    count: usize,
    timeout: Duration,
    named: impl Fn(&str) -> bool + Send + Sync + 'static,
    done: impl Fn(&DynamicObject) -> bool + Send + Sync + 'static,
) -> impl std::future::Future<Output = anyhow::Result<()>> {
    let api = api.clone();
    let task =
        tokio::spawn(async move { until_count(&api, what, count, timeout, named, done).await });
    async move { task.await.map_err(|e| anyhow::anyhow!("{what}: {e}"))? }
}
