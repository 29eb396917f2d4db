//! An example waited for in the background ([`Watched`]): its object read every [`POLL`] from
//! its step's apply until its status conforms to the example, or its deadline passes, the
//! closest miss kept for the report.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, GroupVersionKind};
use serde_json::Value;

use super::matches::{Mismatch, conforms};
use crate::stories::StatusExample;

/// How often an example's object is read.
pub(super) const POLL: Duration = Duration::from_millis(250);

/// How long an example's object may stay unchanged, short of the example, before the next
/// step is applied anyway (the example waits on a later step: story 02's system account is
/// distributed once step 03's cluster runs).
pub(super) const QUIET: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
pub(super) enum State {
    Waiting { changed: Instant },
    Reached(Duration),
    Failed(String),
}

/// An example waited for in the background, from its step's apply until reached or `within`.
pub(super) struct Watched {
    pub(super) example: StatusExample,
    state: std::sync::Arc<std::sync::Mutex<State>>,
    /// The wait's task, stopped when the story ends without it.
    task: tokio::task::AbortHandle,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Watched {
    pub(super) fn start(client: kube::Client, example: StatusExample, within: Duration) -> Self {
        let state = std::sync::Arc::new(std::sync::Mutex::new(State::Waiting {
            changed: Instant::now(),
        }));
        let shared = state.clone();
        let e = example.clone();
        let task = tokio::spawn(async move {
            let end = match reach(&client, &e, within, &shared).await {
                Ok(after) => State::Reached(after),
                Err(why) => State::Failed(why),
            };
            set(&shared, end);
        })
        .abort_handle();
        Watched {
            example,
            state,
            task,
        }
    }

    pub(super) fn state(&self) -> State {
        self.state
            .lock()
            .map(|s| s.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Still waiting, its object changed within QUIET.
    pub(super) fn moving(&self) -> bool {
        matches!(self.state(), State::Waiting { changed } if changed.elapsed() < QUIET)
    }
}

fn set(state: &std::sync::Mutex<State>, to: State) {
    match state.lock() {
        Ok(mut s) => *s = to,
        Err(e) => *e.into_inner() = to,
    }
}

/// Reads `example`'s object until its status conforms; the time it took, or the differences
/// still there at `within`.
async fn reach(
    client: &kube::Client,
    example: &StatusExample,
    within: Duration,
    state: &std::sync::Mutex<State>,
) -> Result<Duration, String> {
    let o = &example.object;
    let gvk = GroupVersionKind::gvk(o.group(), o.version(), &o.kind);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("the kind {}: {e}", o.kind))?;
    let api: Api<DynamicObject> = match (caps.scope, &o.namespace) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => {
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        _ => Api::all_with(client.clone(), &ar),
    };
    let t0 = Instant::now();
    let mut last: String;
    let mut version: Option<String> = None;
    // The reading nearest the example, for the failure: the last is often the state after.
    let mut closest: Option<(usize, String)> = None;
    loop {
        match api.get_opt(&o.name).await {
            Ok(Some(obj)) => {
                // Not quiet while its controller has not looked at its current generation (a
                // busy controller, a restarted one): the step after may make the example
                // unreachable (story 14's refusal, before the Accept).
                let unobserved = obj
                    .data
                    .pointer("/status/observedGeneration")
                    .and_then(Value::as_i64)
                    != obj.metadata.generation;
                if obj.metadata.resource_version != version || unobserved {
                    version = obj.metadata.resource_version.clone();
                    set(
                        state,
                        State::Waiting {
                            changed: Instant::now(),
                        },
                    );
                }
                let found = differences(example, &obj);
                if found.is_empty() {
                    return Ok(t0.elapsed());
                }
                if closest.as_ref().is_none_or(|(n, _)| found.len() <= *n) {
                    closest = Some((found.len(), shown(&found)));
                }
                last = shown(&found);
            }
            Ok(None) => last = "no such object".into(),
            Err(e) => last = format!("reading it: {e}"),
        }
        if t0.elapsed() >= within {
            return Err(match closest {
                Some((_, near)) if near != last => {
                    format!("not reached within {within:?}: nearest {near}; last {last}")
                }
                _ => format!("not reached within {within:?}: {last}"),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// How `obj` falls short of `example`: its status, and its generation when the example names one.
fn differences(example: &StatusExample, obj: &DynamicObject) -> Vec<Mismatch> {
    let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
    let mut found = conforms(example.status(), &status);
    if example.status().get("observedGeneration").is_some() {
        let seen = status.get("observedGeneration").and_then(Value::as_i64);
        if seen != obj.metadata.generation {
            found.push(Mismatch {
                path: "status.observedGeneration".into(),
                want: format!("{:?} (the object's generation)", obj.metadata.generation),
                got: format!("{seen:?}"),
            });
        }
    }
    found
}

fn shown(found: &[Mismatch]) -> String {
    let mut parts: Vec<String> = found.iter().take(6).map(ToString::to_string).collect();
    if found.len() > 6 {
        parts.push(format!("{} more", found.len() - 6));
    }
    parts.join("; ")
}
