//! `sim up`'s live log: one line per thing that happened, read off what the apiserver and the local
//! servers show, the way a person watching `kubectl get -w` and the pods would see it.
//!
//! The pure part: what changed between two looks ([`changes`]) and how each is said
//! ([`event_line`], [`server_line`]). The looking itself is in [`super::watch`].

use std::collections::BTreeMap;

use crate::local::{LocalEvent, ServerLifecycleEvent};

/// One condition as an object's status shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// Every custom object seen in one look: `Kind namespace/name` → its conditions by type.
pub type Objects = BTreeMap<String, BTreeMap<String, Condition>>;

/// The lines saying what changed from `before` to `after`: an object created or gone, and every
/// condition that appeared or changed status, reason or message.
pub fn changes(before: &Objects, after: &Objects) -> Vec<String> {
    let mut lines = Vec::new();
    for (object, conditions) in after {
        let old = before.get(object);
        if old.is_none() {
            lines.push(format!("{object} created"));
        }
        for (type_, c) in conditions {
            if old.and_then(|o| o.get(type_)) != Some(c) {
                lines.push(condition_line(object, type_, c));
            }
        }
    }
    for object in before.keys() {
        if !after.contains_key(object) {
            lines.push(format!("{object} deleted"));
        }
    }
    lines
}

fn condition_line(object: &str, type_: &str, c: &Condition) -> String {
    let mut line = format!("{object} {type_}={}", c.status);
    if !c.reason.is_empty() {
        line.push_str(&format!(" {}", c.reason));
    }
    if !c.message.is_empty() {
        line.push_str(&format!(": {}", c.message));
    }
    line
}

/// A Kubernetes Event a controller recorded.
pub fn event_line(object: &str, type_: &str, reason: &str, note: &str) -> String {
    format!("{object} event {type_} {reason}: {note}")
}

/// What happened to a local server (its process is the pod of this backend).
pub fn server_line(e: &ServerLifecycleEvent) -> String {
    let what = match e.event {
        LocalEvent::Started => "started",
        LocalEvent::LameDuck => "lame duck (restarting)",
        LocalEvent::Restarted => "restarted",
        LocalEvent::Revived => "exited and was started again",
        LocalEvent::Deleted => "stopped and deleted",
        LocalEvent::ConfigWritten => "config rewritten",
    };
    format!("server {} {what}", e.server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn c(status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn objects(list: &[(&str, &[(&str, Condition)])]) -> Objects {
        list.iter()
            .map(|(o, cs)| {
                (
                    o.to_string(),
                    cs.iter().map(|(t, c)| (t.to_string(), c.clone())).collect(),
                )
            })
            .collect()
    }

    #[rstest]
    #[case::nothing(objects(&[]), objects(&[]), &[])]
    #[case::created_without_status(
        objects(&[]),
        objects(&[("NatsCluster nats/demo", &[])]),
        &["NatsCluster nats/demo created"]
    )]
    #[case::created_with_a_condition(
        objects(&[]),
        objects(&[("NatsStream nats/orders", &[("Ready", c("False", "Dialing", ""))])]),
        &["NatsStream nats/orders created", "NatsStream nats/orders Ready=False Dialing"]
    )]
    #[case::condition_changed(
        objects(&[("NatsCluster nats/demo", &[("Ready", c("False", "ServersStarting", "0 of 3"))])]),
        objects(&[("NatsCluster nats/demo", &[("Ready", c("True", "AllServersReady", "3 of 3 servers ready"))])]),
        &["NatsCluster nats/demo Ready=True AllServersReady: 3 of 3 servers ready"]
    )]
    #[case::unchanged_says_nothing(
        objects(&[("NatsCluster nats/demo", &[("Ready", c("True", "AllServersReady", "x"))])]),
        objects(&[("NatsCluster nats/demo", &[("Ready", c("True", "AllServersReady", "x"))])]),
        &[]
    )]
    #[case::message_only(
        objects(&[("NatsCluster nats/demo", &[("Progressing", c("True", "RollingOut", "1 of 3"))])]),
        objects(&[("NatsCluster nats/demo", &[("Progressing", c("True", "RollingOut", "2 of 3"))])]),
        &["NatsCluster nats/demo Progressing=True RollingOut: 2 of 3"]
    )]
    #[case::deleted(
        objects(&[("NatsUser nats/alice", &[])]),
        objects(&[]),
        &["NatsUser nats/alice deleted"]
    )]
    fn changes_are_said_once(
        #[case] before: Objects,
        #[case] after: Objects,
        #[case] want: &[&str],
    ) {
        assert_eq!(changes(&before, &after), want);
    }

    #[test]
    fn server_lines_name_the_server() {
        let e = ServerLifecycleEvent {
            at: std::time::Instant::now(),
            server: "demo-2".into(),
            event: LocalEvent::LameDuck,
            revision: None,
        };
        assert_eq!(server_line(&e), "server demo-2 lame duck (restarting)");
    }
}
