//! `read_replicas`: what each replica of a stream holds in its own store, judged against the
//! ledger of the stream's publisher. Where `audit_stream` reads the stream through its leader,
//! this step reads every replica's own copy (`Topology::read_replica_copy`: the server stopped,
//! its store copied, the copy opened by a standalone nats-server), one server at a time, each
//! restarted and the stream current again before the next is stopped. A damaged replica that
//! kept diverged data while the leader serves everything shows here, and only here.
//!
//! Sim topologies on the local backend only (`Deployment::read_replica_copy`); the workload's
//! default creds read every copy.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::deployed::{Deployed, Done};
use super::step_context::StepContext;
use crate::backend::{Deployment, Fault};
use crate::topology::ReplicaCopy;
use crate::traffic::PublisherSpec;

/// What one replica's own copy of a stream holds, against the acknowledged messages of the
/// stream's publisher.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaRead {
    pub stream: String,
    pub server: String,
    /// Whether the copy holds the stream at all.
    pub has_stream: bool,
    pub messages: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    /// Acknowledged messages (their ids) the copy does not hold.
    pub missing: Vec<u64>,
    /// Acknowledged messages the copy holds other than acknowledged: at another sequence, with
    /// another subject or payload, or without its id at its sequence.
    pub differing: Vec<u64>,
    /// What the standalone reader warned of while it recovered the copy.
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl ReplicaRead {
    /// One line: the replica's state and what it lacks.
    pub fn describe(&self) -> String {
        if !self.has_stream {
            return format!(
                "{} {}: no stream in its copy ({} acknowledged missing)",
                self.stream,
                self.server,
                self.missing.len()
            );
        }
        format!(
            "{} {}: {} messages, seq {}..{}, {} acknowledged missing{}, {} differing{}",
            self.stream,
            self.server,
            self.messages,
            self.first_seq,
            self.last_seq,
            self.missing.len(),
            few(&self.missing),
            self.differing.len(),
            few(&self.differing)
        )
    }
}

/// The first ids of a list, for a report line.
fn few(ids: &[u64]) -> String {
    if ids.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = ids.iter().take(5).map(u64::to_string).collect();
    let more = if ids.len() > 5 { ", …" } else { "" };
    format!(" (ids {}{more})", shown.join(", "))
}

/// The rule: each acknowledged message (`acked`: id → the stream sequence its ack named)
/// differs when the copy holds it at another sequence or with another subject or payload than
/// `published` sent, or holds at its sequence a message without its id (a damaged header); it
/// is missing when the copy holds neither its id nor anything at its sequence.
pub fn judge_replica(
    stream: &str,
    acked: &BTreeMap<u64, u64>,
    published: &PublisherSpec,
    copy: &ReplicaCopy,
) -> ReplicaRead {
    let payload = vec![b'x'; published.payload_bytes];
    let by_id: BTreeMap<u64, (u64, &crate::topology::StoredMessage)> = copy
        .held
        .iter()
        .filter_map(|(seq, m)| m.id.map(|id| (id, (*seq, m))))
        .collect();
    let mut read = ReplicaRead {
        stream: stream.to_string(),
        server: copy.server.clone(),
        has_stream: copy.has_stream,
        messages: copy.messages,
        first_seq: copy.first_seq,
        last_seq: copy.last_seq,
        warnings: copy.warnings.clone(),
        ..ReplicaRead::default()
    };
    for (id, seq) in acked {
        match by_id.get(id) {
            None if copy.held.contains_key(seq) => read.differing.push(*id),
            None => read.missing.push(*id),
            Some((at, m)) => {
                if at != seq || m.subject != published.subject || m.payload != payload {
                    read.differing.push(*id);
                }
            }
        }
    }
    read
}

/// The acknowledged messages of a ledger: id → the stream sequence of its first ack that was
/// not a duplicate's (a duplicate's ack names the original's sequence too).
fn acked_at(ledger: &crate::ledger::Ledger) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    for e in ledger.events() {
        if let crate::ledger::Event::Ack { id, stream_seq, .. } = e {
            out.entry(id).or_insert(stream_seq);
        }
    }
    out
}

/// Carries out a `read_replicas` step on `stream`.
pub(super) async fn read_replicas(
    deployed: &mut Deployed,
    ctx: &mut StepContext,
    stream: &str,
    timeout: Duration,
) -> Result<Done, String> {
    let ledger = ctx
        .ledgers
        .get(stream)
        .ok_or_else(|| format!("no publisher of the workload publishes to {stream}"))?;
    let published = ctx
        .published
        .get(stream)
        .ok_or_else(|| format!("no publisher of the workload publishes to {stream}"))?
        .clone();
    let acked = acked_at(ledger);
    let creds = ctx.workload_creds.clone();
    let dep = deployed.dep_mut();
    let servers = replicas_of(&*dep, stream, timeout).await?;
    let mut lines = Vec::new();
    for server in servers {
        dep.fault(&server, Fault::Sigterm)
            .await
            .map_err(|e| e.to_string())?;
        let copy = dep
            .read_replica_copy(&server, stream, creds.as_deref(), timeout)
            .await
            .map_err(|e| e.to_string());
        dep.fault(&server, Fault::Restart)
            .await
            .map_err(|e| e.to_string())?;
        let read = judge_replica(stream, &acked, &published, &copy?);
        lines.push(read.describe());
        ctx.replica_reads.push(read);
        replicas_of(&*dep, stream, timeout)
            .await
            .map_err(|e| format!("{stream} after {server} restarted: {e}"))?;
    }
    Ok(Done {
        target: Some(lines.join("; ")),
        ..Done::default()
    })
}

/// Once `stream` has a leader that sees every replica current, the servers holding a replica
/// (its leader and followers, from the leader's JSZ), sorted.
async fn replicas_of(
    dep: &dyn Deployment,
    stream: &str,
    timeout: Duration,
) -> Result<Vec<String>, String> {
    let monitors: BTreeMap<String, String> = dep.monitor_urls().into_iter().collect();
    let http = reqwest::Client::new();
    let what = format!("{stream} with a leader and every replica current");
    crate::wait::poll(&what, timeout, || {
        let (http, monitors) = (http.clone(), &monitors);
        async move {
            let leader = dep
                .stream_leader(stream, Duration::from_secs(5))
                .await
                .map_err(|e| e.to_string())?;
            let url = monitors
                .get(&leader)
                .ok_or_else(|| format!("no monitor URL for {leader}"))?;
            let jsz: serde_json::Value = http
                .get(format!("{url}/jsz?accounts=true&streams=true"))
                .send()
                .await
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            current_replicas(&jsz, stream, &leader).map(Some)
        }
    })
    .await
    .map_err(|e| e.to_string())
}

/// From a leader's JSZ: the leader and every follower of `stream`, or why not yet (a
/// follower not current, the stream not there).
fn current_replicas(
    jsz: &serde_json::Value,
    stream: &str,
    leader: &str,
) -> Result<Vec<String>, String> {
    for acc in jsz["account_details"].as_array().into_iter().flatten() {
        for st in acc["stream_detail"].as_array().into_iter().flatten() {
            if st["name"].as_str() != Some(stream) {
                continue;
            }
            let mut out = vec![leader.to_string()];
            for r in st["cluster"]["replicas"].as_array().into_iter().flatten() {
                let name = r["name"].as_str().unwrap_or("?");
                if r["current"].as_bool() != Some(true) {
                    return Err(format!("{name} not current"));
                }
                out.push(name.to_string());
            }
            out.sort();
            return Ok(out);
        }
    }
    Err(format!("{leader} does not list {stream}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::StoredMessage;
    use rstest::rstest;

    fn spec() -> PublisherSpec {
        serde_yaml::from_str("{ subject: s.new, rate: 1, duration: 1s, payload_bytes: 4 }")
            .expect("spec")
    }

    fn held(seq: u64, id: Option<u64>, subject: &str, payload: &[u8]) -> (u64, StoredMessage) {
        (
            seq,
            StoredMessage {
                id,
                subject: subject.into(),
                payload: payload.to_vec(),
            },
        )
    }

    fn copy(held: Vec<(u64, StoredMessage)>) -> ReplicaCopy {
        ReplicaCopy {
            server: "c1-1".into(),
            has_stream: true,
            messages: held.len() as u64,
            first_seq: held.first().map_or(0, |h| h.0),
            last_seq: held.last().map_or(0, |h| h.0),
            held: held.into_iter().collect(),
            warnings: Vec::new(),
        }
    }

    #[rstest]
    #[case::every_message_as_acknowledged(
        vec![held(1, Some(0), "s.new", b"xxxx"), held(2, Some(1), "s.new", b"xxxx")],
        vec![], vec![]
    )]
    #[case::a_message_cut_away(vec![held(1, Some(0), "s.new", b"xxxx")], vec![1], vec![])]
    #[case::a_flipped_payload(
        vec![held(1, Some(0), "s.new", b"xxxx"), held(2, Some(1), "s.new", b"xyxx")],
        vec![], vec![1]
    )]
    #[case::another_sequence(
        vec![held(1, Some(0), "s.new", b"xxxx"), held(3, Some(1), "s.new", b"xxxx")],
        vec![], vec![1]
    )]
    #[case::another_subject(
        vec![held(1, Some(0), "s.old", b"xxxx"), held(2, Some(1), "s.new", b"xxxx")],
        vec![], vec![0]
    )]
    #[case::a_damaged_id_header_at_its_sequence_differs(
        vec![held(1, None, "s.new", b"xxxx"), held(2, Some(1), "s.new", b"xxxx")],
        vec![], vec![0]
    )]
    #[case::an_unacknowledged_extra_is_neither(
        vec![held(1, Some(0), "s.new", b"xxxx"), held(2, Some(1), "s.new", b"xxxx"), held(3, Some(7), "s.new", b"x")],
        vec![], vec![]
    )]
    fn a_replica_is_judged_against_the_acknowledged_messages(
        #[case] holds: Vec<(u64, StoredMessage)>,
        #[case] missing: Vec<u64>,
        #[case] differing: Vec<u64>,
    ) {
        let acked = BTreeMap::from([(0, 1), (1, 2)]);
        let r = judge_replica("S", &acked, &spec(), &copy(holds));
        assert_eq!((r.missing, r.differing), (missing, differing));
    }

    #[test]
    fn a_copy_without_the_stream_misses_everything() {
        let acked = BTreeMap::from([(0, 1), (1, 2)]);
        let mut c = copy(Vec::new());
        c.has_stream = false;
        let r = judge_replica("S", &acked, &spec(), &c);
        assert_eq!(r.missing, vec![0, 1]);
        assert!(r.describe().contains("no stream"), "{}", r.describe());
    }
}
