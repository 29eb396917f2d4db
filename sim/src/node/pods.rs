//! The lives of the servers the kubelet runs, told as the local server lifecycle tells its own
//! ([`ServerLifecycleEvent`]s), so a scenario's timeline, rollout steps and restart order read the same
//! on either backend. A server is a pod (the cluster controller's StatefulSet of one), named by
//! its `cluster.nats.mikluko.io/server` label; its pod is replaced under the same name.
//!
//! - **Started**: the first pod of a server has its container running.
//! - **LameDuck**: a pod is being deleted (the kubelet runs its preStop lame duck).
//! - **Restarted**: a later pod of the same server has its container running (a rollout step,
//!   or a replacement).
//! - **Revived**: a pod's container was restarted in place (it died on its own).
//!
//! [`Lives::see`] is the pure rule, table-tested; [`PodLog`] watches the pods and applies it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;

use crate::local::{LocalEvent, ServerLifecycleEvent};

/// The label naming the server a pod runs.
pub const SERVER_LABEL: &str = "cluster.nats.mikluko.io/server";
/// The annotation naming the config revision a pod runs.
pub const REVISION_ANNOTATION: &str = "cluster.nats.mikluko.io/config-revision";

/// What one look at a pod shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodFacts {
    pub server: String,
    pub uid: String,
    /// Its nats container is running.
    pub running: bool,
    /// It has a deletion timestamp.
    pub deleting: bool,
    /// Its containers' restarts in place.
    pub restarts: i32,
    pub revision: Option<String>,
}

impl PodFacts {
    /// The facts of a pod the cluster controller runs; None for any other pod.
    pub fn of(pod: &Pod) -> Option<Self> {
        let meta = &pod.metadata;
        let server = meta.labels.as_ref()?.get(SERVER_LABEL)?.clone();
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        Some(Self {
            server,
            uid: meta.uid.clone()?,
            running: statuses
                .iter()
                .find(|c| c.name == "nats")
                .and_then(|c| c.state.as_ref())
                .is_some_and(|s| s.running.is_some()),
            deleting: meta.deletion_timestamp.is_some(),
            restarts: statuses.iter().map(|c| c.restart_count).sum(),
            revision: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(REVISION_ANNOTATION).cloned()),
        })
    }
}

/// What was seen of one pod.
#[derive(Clone, Debug, Default)]
struct PodSeen {
    ran: bool,
    deleting: bool,
    restarts: i32,
}

/// Every pod seen of every server, by server then uid in the order first seen.
#[derive(Clone, Debug, Default)]
pub struct Lives {
    servers: BTreeMap<String, Vec<(String, PodSeen)>>,
}

impl Lives {
    /// The events a look at a pod adds to its server's life.
    pub fn see(&mut self, facts: &PodFacts) -> Vec<LocalEvent> {
        let pods = self.servers.entry(facts.server.clone()).or_default();
        let index = match pods.iter().position(|(uid, _)| *uid == facts.uid) {
            Some(i) => i,
            None => {
                pods.push((facts.uid.clone(), PodSeen::default()));
                pods.len() - 1
            }
        };
        let earlier = pods[..index].iter().any(|(_, p)| p.ran);
        let seen = &mut pods[index].1;
        let mut out = Vec::new();
        if facts.deleting && !seen.deleting {
            seen.deleting = true;
            out.push(LocalEvent::LameDuck);
        }
        if facts.running && !seen.ran {
            seen.ran = true;
            out.push(if earlier {
                LocalEvent::Restarted
            } else {
                LocalEvent::Started
            });
        } else if facts.restarts > seen.restarts {
            out.push(LocalEvent::Revived);
        }
        seen.restarts = seen.restarts.max(facts.restarts);
        out
    }

    /// Per server, how often it was started again (replaced, or revived in place).
    pub fn restarts(events: &[ServerLifecycleEvent]) -> BTreeMap<String, u32> {
        let mut out = BTreeMap::new();
        for e in events {
            let n = out.entry(e.server.clone()).or_insert(0);
            if matches!(e.event, LocalEvent::Restarted | LocalEvent::Revived) {
                *n += 1;
            }
        }
        out
    }
}

/// The servers' pods watched in every namespace, their lives logged as they are seen.
pub struct PodLog {
    events: Arc<Mutex<Vec<ServerLifecycleEvent>>>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for PodLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodLog").finish_non_exhaustive()
    }
}

impl Drop for PodLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PodLog {
    /// Watches the pods of every server `client` reaches, from now on.
    pub fn start(client: kube::Client) -> Self {
        let events = Arc::new(Mutex::new(Vec::new()));
        let log = events.clone();
        let pods: Api<Pod> = Api::all(client);
        let config = watcher::Config::default().labels(SERVER_LABEL);
        let task = tokio::spawn(async move {
            let mut lives = Lives::default();
            let mut stream = watcher::watcher(pods, config).boxed();
            while let Some(event) = stream.next().await {
                let seen = match event {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::debug!(error = %e, "the pod watch restarts");
                        continue;
                    }
                };
                let Some(facts) = PodFacts::of(&seen) else {
                    continue;
                };
                let at = Instant::now();
                let added: Vec<ServerLifecycleEvent> = lives
                    .see(&facts)
                    .into_iter()
                    .map(|event| ServerLifecycleEvent {
                        at,
                        server: facts.server.clone(),
                        event,
                        revision: facts.revision.clone(),
                    })
                    .collect();
                log.lock().unwrap_or_else(|p| p.into_inner()).extend(added);
            }
        });
        Self { events, task }
    }

    /// Every event logged so far, in the order seen.
    pub fn events(&self) -> Vec<ServerLifecycleEvent> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LocalEvent::*;

    fn pod(uid: &str, running: bool, deleting: bool, restarts: i32) -> PodFacts {
        PodFacts {
            server: "demo-0".into(),
            uid: uid.into(),
            running,
            deleting,
            restarts,
            revision: None,
        }
    }

    /// Each row: a look at a pod of server demo-0, and the events it adds.
    #[test]
    fn a_servers_life_read_off_its_pods() {
        let rows: Vec<(PodFacts, Vec<LocalEvent>)> = vec![
            (pod("a", false, false, 0), vec![]),
            (pod("a", true, false, 0), vec![Started]),
            (pod("a", true, false, 0), vec![]),
            // Died on its own; the kubelet started the container again.
            (pod("a", true, false, 1), vec![Revived]),
            (pod("a", true, false, 1), vec![]),
            // The rollout deletes it: lame duck, then its replacement runs.
            (pod("a", true, true, 1), vec![LameDuck]),
            (pod("a", false, true, 1), vec![]),
            (pod("b", false, false, 0), vec![]),
            (pod("b", true, false, 0), vec![Restarted]),
            // A late look at the old pod adds nothing.
            (pod("a", false, true, 1), vec![]),
        ];
        let mut lives = Lives::default();
        for (i, (facts, want)) in rows.iter().enumerate() {
            assert_eq!(&lives.see(facts), want, "row {i}: {facts:?}");
        }
    }

    #[test]
    fn a_pod_seen_first_when_deleted_and_running_is_its_servers_start() {
        let mut lives = Lives::default();
        assert_eq!(lives.see(&pod("a", true, true, 0)), vec![LameDuck, Started]);
    }

    #[test]
    fn a_replacement_that_never_ran_before_is_started_not_restarted() {
        let mut lives = Lives::default();
        assert_eq!(lives.see(&pod("a", false, true, 0)), vec![LameDuck]);
        assert_eq!(lives.see(&pod("b", true, false, 0)), vec![Started]);
    }

    #[test]
    fn restarts_count_replacements_and_revivals() {
        let at = Instant::now();
        let e = |server: &str, event| ServerLifecycleEvent {
            at,
            server: server.into(),
            event,
            revision: None,
        };
        let events = [
            e("demo-0", Started),
            e("demo-1", Started),
            e("demo-1", LameDuck),
            e("demo-1", Restarted),
            e("demo-0", Revived),
            e("demo-1", Revived),
        ];
        assert_eq!(
            Lives::restarts(&events),
            BTreeMap::from([("demo-0".into(), 1), ("demo-1".into(), 2)])
        );
    }
}
