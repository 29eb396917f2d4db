//! A watch on what the cluster controller says of each NatsCluster while a scenario runs: its
//! rollout gate (closed, and what it waits for), the server it is stepping, and each server
//! removal's phase (evacuation progress). Sampled every 500 ms from the host's apiserver; each
//! change is kept for the report's controller lanes.

use std::sync::{Arc, Mutex};
#[cfg(feature = "kube")]
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

#[cfg(feature = "kube")]
use crate::ledger::Ledger;

/// What the controller's status says of one NatsCluster at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusView {
    /// What a closed rollout gate waits for; none while it is open (or no rollout runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// The server the rollout is stepping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stepping: Option<String>,
    /// (server, phase) of each removal or replacement under way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removals: Vec<(String, String)>,
}

/// One NatsCluster's status view from `at_ms` on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusChange {
    pub at_ms: u64,
    /// `namespace/name`.
    pub cluster: String,
    #[serde(flatten)]
    pub view: StatusView,
}

/// The view of a NatsCluster's `status` (as JSON).
pub fn status_view(status: &serde_json::Value) -> StatusView {
    let rollout = &status["rollout"];
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    let gate = match &rollout["gate"] {
        serde_json::Value::Null => None,
        g => Some(text(&g["waitingFor"]).unwrap_or_else(|| "(unsaid)".into())),
    };
    let removals = status["removals"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter_map(|r| Some((text(&r["name"])?, text(&r["phase"])?)))
                .collect()
        })
        .unwrap_or_default();
    StatusView {
        gate,
        stepping: text(&rollout["current"]),
        removals,
    }
}

/// Appends `view` of `cluster` to `changes` when it differs from that cluster's last one.
pub fn record(changes: &mut Vec<StatusChange>, at_ms: u64, cluster: &str, view: StatusView) {
    let last = changes.iter().rev().find(|c| c.cluster == cluster);
    if last.map(|c| &c.view) != Some(&view) {
        changes.push(StatusChange {
            at_ms,
            cluster: cluster.to_string(),
            view,
        });
    }
}

/// The running watch; [`StatusWatch::stop`] returns what it saw; dropping it ends it.
pub struct StatusWatch {
    changes: Arc<Mutex<Vec<StatusChange>>>,
    task: JoinHandle<()>,
}

impl StatusWatch {
    /// Samples every NatsCluster `client` reaches every 500 ms, timed by `ledger`.
    #[cfg(feature = "kube")]
    pub fn start(client: kube::Client, ledger: Ledger) -> StatusWatch {
        let changes: Arc<Mutex<Vec<StatusChange>>> = Arc::default();
        let out = changes.clone();
        let task = tokio::spawn(async move {
            let api: kube::Api<nats_api::cluster::NatsCluster> = kube::Api::all(client);
            loop {
                if let Ok(list) = api.list(&Default::default()).await {
                    let at_ms = ledger.now_ms();
                    let mut c = out.lock().unwrap_or_else(|p| p.into_inner());
                    for nc in &list.items {
                        let Ok(json) = serde_json::to_value(nc) else {
                            continue;
                        };
                        let name = format!(
                            "{}/{}",
                            json["metadata"]["namespace"].as_str().unwrap_or_default(),
                            json["metadata"]["name"].as_str().unwrap_or_default()
                        );
                        record(&mut c, at_ms, &name, status_view(&json["status"]));
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        StatusWatch { changes, task }
    }

    /// Ends the watch; every change it saw, in time order.
    pub fn stop(&self) -> Vec<StatusChange> {
        self.task.abort();
        let c = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        c.clone()
    }
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_reads_the_gate_the_step_and_the_removals() {
        let status = serde_json::json!({
            "rollout": { "current": "demo-1", "gate": { "waitingFor": "stream ORDERS not current" } },
            "removals": [ { "name": "demo-2", "phase": "Evacuating" } ],
        });
        assert_eq!(
            status_view(&status),
            StatusView {
                gate: Some("stream ORDERS not current".into()),
                stepping: Some("demo-1".into()),
                removals: vec![("demo-2".into(), "Evacuating".into())],
            }
        );
        // no rollout, no status at all: the gate is open
        assert_eq!(status_view(&serde_json::json!({})), StatusView::default());
        assert_eq!(status_view(&serde_json::Value::Null), StatusView::default());
    }

    #[test]
    fn only_a_change_of_a_clusters_view_is_recorded() {
        let closed = StatusView {
            gate: Some("x".into()),
            ..Default::default()
        };
        let mut c = Vec::new();
        record(&mut c, 0, "nats/a", StatusView::default());
        record(&mut c, 500, "nats/a", StatusView::default());
        record(&mut c, 500, "nats/b", StatusView::default());
        record(&mut c, 1_000, "nats/a", closed.clone());
        record(&mut c, 1_500, "nats/a", closed);
        let at: Vec<(u64, &str)> = c.iter().map(|c| (c.at_ms, c.cluster.as_str())).collect();
        assert_eq!(at, [(0, "nats/a"), (500, "nats/b"), (1_000, "nats/a")]);
    }
}
