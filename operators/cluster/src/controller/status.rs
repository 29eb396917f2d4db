//! The conditions a NatsCluster's status reads (design §4.7, API.md), as pure functions of what
//! the reconciler observed: the servers (pods or processes) through the lifecycle port, and the
//! servers' own answers (JSZ, GATEWAYZ, LEAFZ, VARZ) through the system connection or each
//! server's monitoring endpoint.

use std::collections::{BTreeMap, BTreeSet};

use controller_kit::metrics::{self, Metrics};
use nats_api::cluster::{GatewayStatus, LeafRemoteStatus, RolloutStatus, reason};
use nats_wire::monitor::{ClusterInfo, Gatewayz, Jsz, Leafz, PeerInfo};

use crate::lifecycle::ObservedServer;

/// A condition as decided: status, reason, message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Verdict {
    pub fn new(status: bool, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            reason,
            message: message.into(),
        }
    }
}

/// What one server answered.
#[derive(Clone, Debug, Default)]
pub struct ServerAnswer {
    pub name: String,
    pub version: Option<String>,
    /// Whether the server runs under an auth plane (its system account is an account key, not
    /// the default `$SYS`), where it said.
    pub auth: Option<bool>,
    /// The `/varz` `config_digest`: which rendered config it runs.
    pub config_digest: Option<String>,
    /// NotAfter (unix seconds) of the certificate each TLS listener loaded, by listener.
    pub certificates: BTreeMap<String, i64>,
    pub jsz: Option<Jsz>,
    pub gatewayz: Option<Gatewayz>,
    pub leafz: Option<Leafz>,
}

/// What the servers of one NatsCluster answered in one pass.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    /// The servers that answered, by server_name.
    pub answers: BTreeMap<String, ServerAnswer>,
    /// Why the servers could not be asked at all (dial failure), if so.
    pub failure: Option<String>,
}

/// Ready: every server's pod Ready, or a quorum of them, unless an object in the way or a
/// refusal says otherwise.
pub fn ready(replicas: u32, observed: &[ObservedServer], foreign: &[String]) -> Verdict {
    if !foreign.is_empty() {
        return Verdict::new(
            false,
            reason::RECONCILE_FAILED,
            format!(
                "not controlled by this NatsCluster, left untouched: {}",
                foreign.join(", ")
            ),
        );
    }
    let ready = ready_count(replicas, observed);
    if ready == replicas {
        Verdict::new(
            true,
            reason::ALL_SERVERS_READY,
            format!("{ready} of {replicas} servers ready"),
        )
    } else if ready > replicas / 2 {
        Verdict::new(
            true,
            reason::QUORUM_AVAILABLE,
            format!("{ready} of {replicas} servers ready; the meta group keeps its quorum"),
        )
    } else {
        Verdict::new(
            false,
            reason::QUORUM_UNAVAILABLE,
            format!("{ready} of {replicas} servers ready; no quorum"),
        )
    }
}

/// How many of the first `replicas` servers are Ready.
pub fn ready_count(replicas: u32, observed: &[ObservedServer]) -> u32 {
    observed
        .iter()
        .filter(|o| o.ordinal < replicas && o.ready)
        .count() as u32
}

fn names(list: &[String]) -> String {
    list.join(", ")
}

/// The report of a Raft group to judge by: the one from its leader's server when that server
/// answered (it alone knows every member's lag), else any.
fn leader_view<'a>(reports: &[(&'a str, &'a ClusterInfo)]) -> Option<&'a ClusterInfo> {
    reports
        .iter()
        .find(|(server, c)| !c.leader.is_empty() && c.leader == *server)
        .or_else(|| reports.iter().find(|(_, c)| !c.leader.is_empty()))
        .or(reports.first())
        .map(|(_, c)| *c)
}

/// Settled as written by a pass that restarted `restarted`. The verdict was judged from what the
/// servers said before the step; a server the pass has just restarted is not serving its groups
/// until it rejoins, so the pass does not call the NATS cluster settled. The next pass judges
/// again from what the servers then say.
pub fn settled_after_restarts(judged: Verdict, restarted: &[String]) -> Verdict {
    if !judged.status || restarted.is_empty() {
        return judged;
    }
    Verdict::new(
        false,
        reason::SERVERS_SILENT,
        format!("{} restarted by this pass, not yet back", names(restarted)),
    )
}

/// Settled: the meta group and every stream and consumer group have a leader and every member
/// current, as the answering servers report; every server answers.
pub fn settled(expected: &[String], jetstream: bool, obs: &Observation) -> Verdict {
    let silent: Vec<String> = expected
        .iter()
        .filter(|n| !obs.answers.contains_key(*n))
        .cloned()
        .collect();
    if obs.answers.is_empty()
        && let Some(f) = &obs.failure
    {
        return Verdict::new(false, reason::OBSERVATION_FAILED, f.clone());
    }
    if !silent.is_empty() {
        let verb = if silent.len() == 1 { "does" } else { "do" };
        return Verdict::new(
            false,
            reason::SERVERS_SILENT,
            format!("{} {verb} not answer", names(&silent)),
        );
    }
    if !jetstream {
        return Verdict::new(
            true,
            reason::ALL_GROUPS_CURRENT,
            "every server answers; without JetStream there is no Raft group",
        );
    }
    // The meta group: from the meta leader's own report when it answered.
    let metas: Vec<(&str, &nats_wire::monitor::MetaClusterInfo)> = obs
        .answers
        .values()
        .filter_map(|a| Some((a.name.as_str(), a.jsz.as_ref()?.meta_cluster.as_ref()?)))
        .collect();
    let meta = metas
        .iter()
        .find(|(s, m)| !m.leader.is_empty() && m.leader == *s)
        .or_else(|| metas.iter().find(|(_, m)| !m.leader.is_empty()))
        .map(|(_, m)| *m);
    let mut leaderless = vec![];
    let mut offline = vec![];
    let mut behind = vec![];
    let mut judge = |group: String, leader: &str, replicas: &[PeerInfo]| {
        if leader.is_empty() {
            leaderless.push(group);
            return;
        }
        if replicas.iter().any(|p| p.offline) {
            offline.push(group);
        } else if replicas.iter().any(|p| !p.current) {
            behind.push(group);
        }
    };
    match meta {
        Some(m) => judge("the meta group".into(), &m.leader, &m.replicas),
        None => judge("the meta group".into(), "", &[]),
    }
    // Stream and consumer groups, keyed by account and name.
    let mut groups: BTreeMap<String, Vec<(&str, &ClusterInfo)>> = BTreeMap::new();
    for a in obs.answers.values() {
        let Some(jsz) = &a.jsz else { continue };
        for acc in &jsz.account_details {
            for s in &acc.streams {
                if let Some(c) = &s.cluster {
                    groups
                        .entry(format!("stream {} {}", acc.name, s.name))
                        .or_default()
                        .push((a.name.as_str(), c));
                }
                for con in &s.consumers {
                    if let Some(c) = &con.cluster {
                        groups
                            .entry(format!("consumer {} {} {}", acc.name, s.name, con.name))
                            .or_default()
                            .push((a.name.as_str(), c));
                    }
                }
            }
        }
    }
    for (group, reports) in &groups {
        if let Some(c) = leader_view(reports) {
            judge(group.clone(), &c.leader, &c.replicas);
        }
    }
    let count = |v: &[String]| {
        if v.len() == 1 {
            v[0].clone()
        } else {
            format!("{} Raft groups ({})", v.len(), names(v))
        }
    };
    if !leaderless.is_empty() {
        return Verdict::new(
            false,
            reason::GROUPS_LEADERLESS,
            format!("{} without a leader", count(&leaderless)),
        );
    }
    if !offline.is_empty() {
        return Verdict::new(
            false,
            reason::MEMBERS_OFFLINE,
            format!("{} with a member offline", count(&offline)),
        );
    }
    if !behind.is_empty() {
        return Verdict::new(
            false,
            reason::GROUPS_CATCHING_UP,
            format!("{} with a member that is not current", count(&behind)),
        );
    }
    Verdict::new(
        true,
        reason::ALL_GROUPS_CURRENT,
        "the meta group and every stream and consumer group have a leader and every member current",
    )
}

/// Whether the running servers run under an auth plane, as the first that said reports.
pub fn running_with_auth(obs: &Observation) -> Option<bool> {
    obs.answers.values().find_map(|a| a.auth)
}

/// Whether a server reporting `system_account` runs under an auth plane: without one it runs the
/// default system account `$SYS`; under an operator its system account is an account key.
pub fn auth_from_system_account(system_account: &str) -> Option<bool> {
    (!system_account.is_empty()).then(|| system_account != "$SYS")
}

/// The meta leader's server_name as the answering servers report it.
pub fn meta_leader(obs: &Observation) -> Option<String> {
    obs.answers
        .values()
        .filter_map(|a| a.jsz.as_ref()?.meta_cluster.as_ref())
        .map(|m| m.leader.clone())
        .find(|l| !l.is_empty())
}

/// status.gateways and GatewaysConnected: a member is reachable when every answering server
/// holds an outbound gateway connection to it.
pub fn gateways(remotes: &[String], obs: &Observation) -> (Vec<GatewayStatus>, Verdict) {
    let answering: Vec<&Gatewayz> = obs
        .answers
        .values()
        .filter_map(|a| a.gatewayz.as_ref())
        .collect();
    let statuses: Vec<GatewayStatus> = remotes
        .iter()
        .map(|r| {
            let outbound = answering
                .iter()
                .filter(|g| {
                    g.outbound_gateways
                        .get(r)
                        .is_some_and(|o| o.connection.is_some())
                })
                .count() as i32;
            let inbound = answering
                .iter()
                .map(|g| {
                    g.inbound_gateways
                        .get(r)
                        .map_or(0, |v| v.iter().filter(|c| c.connection.is_some()).count())
                })
                .sum::<usize>() as i32;
            GatewayStatus {
                name: r.clone(),
                connected: outbound > 0 && outbound as usize == answering.len(),
                inbound,
                outbound,
            }
        })
        .collect();
    let unreachable: Vec<String> = statuses
        .iter()
        .filter(|s| !s.connected)
        .map(|s| s.name.clone())
        .collect();
    let verdict = if answering.is_empty() {
        Verdict::new(
            false,
            reason::MEMBERS_UNREACHABLE,
            obs.failure
                .clone()
                .unwrap_or_else(|| "no server answered GATEWAYZ".into()),
        )
    } else if unreachable.is_empty() {
        Verdict::new(
            true,
            reason::ALL_MEMBERS_REACHABLE,
            if remotes.is_empty() {
                "no other member is listed".to_string()
            } else {
                format!("every server holds a gateway to {}", names(remotes))
            },
        )
    } else {
        Verdict::new(
            false,
            reason::MEMBERS_UNREACHABLE,
            format!(
                "not every server holds a gateway to {}",
                names(&unreachable)
            ),
        )
    };
    (statuses, verdict)
}

/// One entry of spec.leafRemotes as the reconciler resolved it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafRemoteView {
    pub index: usize,
    pub connection_namespace: String,
    pub connection_name: String,
    /// The local account bound (public key), None for the global account.
    pub account: Option<String>,
    /// Why the remote is rendered out: (reason, message); None when admitted.
    pub refused: Option<(&'static str, String)>,
}

/// The account name a leaf connection of the global account reports.
const GLOBAL_ACCOUNT: &str = "$G";

/// status.leafRemotes and LeafnodesConnected. A server holds a remote when it has a leaf
/// connection for the remote's local account; remotes binding the same account are told apart by
/// count alone (LEAFZ names no remote): the k-th such remote is held where k+1 connect.
pub fn leafnodes(
    remotes: &[LeafRemoteView],
    obs: &Observation,
) -> (Vec<LeafRemoteStatus>, Verdict) {
    let per_server: Vec<BTreeMap<&str, usize>> = obs
        .answers
        .values()
        .filter_map(|a| a.leafz.as_ref())
        .map(|l| {
            let mut m = BTreeMap::new();
            for leaf in &l.leafs {
                *m.entry(leaf.account.as_str()).or_insert(0) += 1;
            }
            m
        })
        .collect();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut statuses = vec![];
    let mut down = vec![];
    for r in remotes {
        let account = r.account.clone().unwrap_or_else(|| GLOBAL_ACCOUNT.into());
        let connected = if r.refused.is_some() {
            0
        } else {
            let k = *seen
                .entry(account.clone())
                .and_modify(|k| *k += 1)
                .or_insert(0);
            per_server
                .iter()
                .filter(|m| m.get(account.as_str()).copied().unwrap_or(0) > k)
                .count()
        };
        if r.refused.is_none() && (connected == 0 || connected < per_server.len()) {
            down.push(format!("{}/{}", r.connection_namespace, r.connection_name));
        }
        statuses.push(LeafRemoteStatus {
            connection_namespace: r.connection_namespace.clone(),
            connection_name: r.connection_name.clone(),
            connected: connected as i32,
            account: r.account.clone(),
        });
    }
    let refused: Vec<&LeafRemoteView> = remotes.iter().filter(|r| r.refused.is_some()).collect();
    let verdict = if let Some(first) = refused.first() {
        let reason = first
            .refused
            .as_ref()
            .map_or(reason::REMOTE_NOT_PERMITTED, |r| r.0);
        let msgs: Vec<String> = refused
            .iter()
            .filter_map(|r| r.refused.as_ref().map(|(_, m)| m.clone()))
            .collect();
        Verdict::new(false, reason, format!("rendered out: {}", msgs.join("; ")))
    } else if per_server.is_empty() {
        Verdict::new(
            false,
            reason::REMOTES_DISCONNECTED,
            obs.failure
                .clone()
                .unwrap_or_else(|| "no server answered LEAFZ".into()),
        )
    } else if down.is_empty() {
        Verdict::new(
            true,
            reason::REMOTES_CONNECTED,
            format!("every server holds each of {} remotes", remotes.len()),
        )
    } else {
        Verdict::new(
            false,
            reason::REMOTES_DISCONNECTED,
            format!("not every server holds {}", names(&down)),
        )
    };
    (statuses, verdict)
}

/// The version every server reports, if they agree.
pub fn common_version(obs: &Observation, expected: &[String]) -> Option<String> {
    let versions: BTreeSet<Option<&String>> = expected
        .iter()
        .map(|n| obs.answers.get(n).and_then(|a| a.version.as_ref()))
        .collect();
    match versions.into_iter().collect::<Vec<_>>().as_slice() {
        [Some(v)] => Some((*v).clone()),
        _ => None,
    }
}

/// A byte count as a Kubernetes quantity, in the largest binary unit that divides it.
pub fn quantity(bytes: i64) -> String {
    for (unit, size) in [
        ("Ti", 1i64 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if bytes >= size && bytes % size == 0 {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

/// Servers not yet on the target revision: the one being stepped and those still to step.
pub fn pending_servers(rollout: Option<&RolloutStatus>) -> usize {
    rollout.map_or(0, |r| r.pending.len() + usize::from(r.current.is_some()))
}

/// Exports `status.rollout` as the pending and gate gauges. The gate's series is replaced each
/// pass, so one for an older `waitingFor` (or a gate now open) does not linger at 1.
pub fn export_rollout(m: &Metrics, namespace: &str, name: &str, rollout: Option<&RolloutStatus>) {
    let object = [("namespace", namespace), ("name", name)];
    m.set_gauge(
        metrics::ROLLOUT_PENDING,
        "Servers of a NatsCluster not yet on the target revision.",
        &object,
        pending_servers(rollout) as f64,
    );
    m.remove_gauge(metrics::ROLLOUT_GATE, &object);
    if let Some(gate) = rollout.and_then(|r| r.gate.as_ref()) {
        m.set_gauge(
            metrics::ROLLOUT_GATE,
            "1 while a NatsCluster's rollout gate is closed.",
            &[
                ("namespace", namespace),
                ("name", name),
                (
                    "waiting_for",
                    gate.waiting_for.as_deref().unwrap_or_default(),
                ),
            ],
            1.0,
        );
    }
}

/// Drops a deleted NatsCluster's rollout gauges.
pub fn forget_rollout(m: &Metrics, namespace: &str, name: &str) {
    let object = [("namespace", namespace), ("name", name)];
    m.remove_gauge(metrics::ROLLOUT_PENDING, &object);
    m.remove_gauge(metrics::ROLLOUT_GATE, &object);
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_wire::monitor::{
        AccountDetail, ConnInfo, ConsumerDetail, LeafInfo, MetaClusterInfo, RemoteGatewayz,
        StreamDetail,
    };
    use rstest::rstest;

    #[rstest]
    #[case::nothing_restarted(true, &[], (true, reason::ALL_GROUPS_CURRENT, "judged"))]
    #[case::one_restarted(
        true,
        &["demo-0"],
        (false, reason::SERVERS_SILENT, "demo-0 restarted by this pass, not yet back")
    )]
    #[case::restart_all(
        true,
        &["demo-0", "demo-1", "demo-2"],
        (false, reason::SERVERS_SILENT, "demo-0, demo-1, demo-2 restarted by this pass, not yet back")
    )]
    #[case::already_unsettled_keeps_its_reason(
        false,
        &["demo-0"],
        (false, reason::GROUPS_CATCHING_UP, "judged")
    )]
    fn a_pass_that_restarts_a_server_does_not_write_settled(
        #[case] judged_settled: bool,
        #[case] restarted: &[&str],
        #[case] want: (bool, &str, &str),
    ) {
        let judged = if judged_settled {
            Verdict::new(true, reason::ALL_GROUPS_CURRENT, "judged")
        } else {
            Verdict::new(false, reason::GROUPS_CATCHING_UP, "judged")
        };
        let restarted: Vec<String> = restarted.iter().map(|s| s.to_string()).collect();
        let v = settled_after_restarts(judged, &restarted);
        assert_eq!((v.status, v.reason, v.message.as_str()), want);
    }

    #[test]
    fn rollout_gauges_follow_the_status_and_go_with_the_object() {
        use nats_api::cluster::RolloutGate;
        let m = Metrics::default();
        let closed = RolloutStatus {
            current: Some("demo-2".into()),
            pending: vec!["demo-0".into(), "demo-1".into()],
            gate: Some(RolloutGate {
                waiting_for: Some("groups not current: ORDERS".into()),
                since: None,
            }),
            ..Default::default()
        };
        export_rollout(&m, "ns", "demo", Some(&closed));
        let text = m.render();
        assert!(
            text.contains(r#"nats_operator_rollout_pending_servers{namespace="ns",name="demo"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(r#"waiting_for="groups not current: ORDERS"} 1"#),
            "{text}"
        );
        let open = RolloutStatus {
            gate: None,
            ..closed
        };
        export_rollout(&m, "ns", "demo", Some(&open));
        let text = m.render();
        assert!(
            !text.contains("waiting_for="),
            "the open gate's series is gone: {text}"
        );
        export_rollout(&m, "ns", "demo", None);
        assert!(
            m.render()
                .contains(r#"nats_operator_rollout_pending_servers{namespace="ns",name="demo"} 0"#)
        );
        forget_rollout(&m, "ns", "demo");
        assert!(
            !m.render()
                .contains("nats_operator_rollout_pending_servers{")
        );
    }

    fn obs(n: u32, ready: u32) -> Vec<ObservedServer> {
        (0..n)
            .map(|i| ObservedServer {
                ordinal: i,
                server_name: format!("demo-{i}"),
                present: true,
                ready: i < ready,
                ..Default::default()
            })
            .collect()
    }

    #[rstest]
    #[case(3, 3, &[], true, reason::ALL_SERVERS_READY)]
    #[case(3, 2, &[], true, reason::QUORUM_AVAILABLE)]
    #[case(3, 1, &[], false, reason::QUORUM_UNAVAILABLE)]
    #[case(1, 0, &[], false, reason::QUORUM_UNAVAILABLE)]
    #[case(3, 3, &["ConfigMap/demo-1-config"], false, reason::RECONCILE_FAILED)]
    fn ready_follows_pods_and_objects_in_the_way(
        #[case] replicas: u32,
        #[case] ready_pods: u32,
        #[case] foreign: &[&str],
        #[case] status: bool,
        #[case] want: &str,
    ) {
        let foreign: Vec<String> = foreign.iter().map(|s| s.to_string()).collect();
        let v = ready(replicas, &obs(replicas, ready_pods), &foreign);
        assert_eq!((v.status, v.reason), (status, want));
        for f in &foreign {
            assert!(v.message.contains(f), "{}", v.message);
        }
    }

    #[test]
    fn servers_beyond_replicas_do_not_count_as_ready() {
        assert_eq!(ready_count(2, &obs(3, 3)), 2);
    }

    fn peer(name: &str, current: bool, offline: bool) -> PeerInfo {
        PeerInfo {
            name: name.into(),
            current,
            offline,
            ..Default::default()
        }
    }

    fn answer(
        name: &str,
        meta_leader: &str,
        peers: Vec<PeerInfo>,
        streams: Vec<StreamDetail>,
    ) -> ServerAnswer {
        ServerAnswer {
            name: name.into(),
            version: Some("2.15.0".into()),
            jsz: Some(Jsz {
                meta_cluster: Some(MetaClusterInfo {
                    leader: meta_leader.into(),
                    replicas: peers,
                    ..Default::default()
                }),
                account_details: vec![AccountDetail {
                    name: "APP".into(),
                    streams,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn stream(
        leader: &str,
        replicas: Vec<PeerInfo>,
        consumer_leader: Option<&str>,
    ) -> StreamDetail {
        StreamDetail {
            name: "orders".into(),
            cluster: Some(ClusterInfo {
                leader: leader.into(),
                replicas,
                ..Default::default()
            }),
            consumers: consumer_leader
                .map(|l| ConsumerDetail {
                    name: "c".into(),
                    cluster: Some(ClusterInfo {
                        leader: l.into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        }
    }

    fn three(
        meta_peers: Vec<PeerInfo>,
        meta_leader: &str,
        streams: Vec<StreamDetail>,
    ) -> Observation {
        let mut o = Observation::default();
        for i in 0..3 {
            let n = format!("demo-{i}");
            let peers = if n == meta_leader {
                meta_peers.clone()
            } else {
                vec![]
            };
            let s = if i == 0 { streams.clone() } else { vec![] };
            o.answers
                .insert(n.clone(), answer(&n, meta_leader, peers, s));
        }
        o
    }

    fn expected() -> Vec<String> {
        (0..3).map(|i| format!("demo-{i}")).collect()
    }

    #[rstest]
    #[case::all_current(
        three(vec![peer("demo-1", true, false), peer("demo-2", true, false)], "demo-0",
              vec![stream("demo-0", vec![peer("demo-1", true, false)], Some("demo-0"))]),
        true, reason::ALL_GROUPS_CURRENT)]
    #[case::meta_leaderless(three(vec![], "", vec![]), false, reason::GROUPS_LEADERLESS)]
    #[case::stream_leaderless(
        three(vec![peer("demo-1", true, false)], "demo-0", vec![stream("", vec![], None)]),
        false, reason::GROUPS_LEADERLESS)]
    #[case::consumer_leaderless(
        three(vec![peer("demo-1", true, false)], "demo-0", vec![stream("demo-0", vec![], Some(""))]),
        false, reason::GROUPS_LEADERLESS)]
    #[case::member_offline(
        three(vec![peer("demo-1", false, true)], "demo-0", vec![]),
        false, reason::MEMBERS_OFFLINE)]
    #[case::catching_up(
        three(vec![peer("demo-1", true, false)], "demo-0",
              vec![stream("demo-0", vec![peer("demo-2", false, false)], None)]),
        false, reason::GROUPS_CATCHING_UP)]
    fn settled_reads_every_raft_group(
        #[case] o: Observation,
        #[case] status: bool,
        #[case] want: &str,
    ) {
        let v = settled(&expected(), true, &o);
        assert_eq!((v.status, v.reason), (status, want), "{}", v.message);
    }

    #[test]
    fn settled_needs_every_server_to_answer() {
        let mut o = three(vec![], "demo-0", vec![]);
        o.answers.remove("demo-2");
        let v = settled(&expected(), true, &o);
        assert_eq!(v.reason, reason::SERVERS_SILENT);
        assert!(v.message.contains("demo-2"));
        let failed = Observation {
            answers: BTreeMap::new(),
            failure: Some("dial: refused".into()),
        };
        assert_eq!(
            settled(&expected(), true, &failed).reason,
            reason::OBSERVATION_FAILED
        );
        let v = settled(&expected(), false, &three(vec![], "", vec![]));
        assert!(v.status, "without JetStream answering is enough");
        assert_eq!(
            meta_leader(&three(vec![], "demo-1", vec![])),
            Some("demo-1".into())
        );
    }

    fn gw(outbound: &[&str], inbound: &[&str]) -> Gatewayz {
        let conn = || RemoteGatewayz {
            configured: true,
            connection: Some(ConnInfo::default()),
        };
        Gatewayz {
            outbound_gateways: outbound.iter().map(|n| (n.to_string(), conn())).collect(),
            inbound_gateways: inbound
                .iter()
                .map(|n| (n.to_string(), vec![conn()]))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn gateways_connected_when_every_server_reaches_every_member() {
        let mut o = Observation::default();
        for (i, g) in [gw(&["west"], &["west"]), gw(&["west"], &[])]
            .into_iter()
            .enumerate()
        {
            o.answers.insert(
                format!("e-{i}"),
                ServerAnswer {
                    name: format!("e-{i}"),
                    gatewayz: Some(g),
                    ..Default::default()
                },
            );
        }
        let (s, v) = gateways(&["west".into()], &o);
        assert_eq!(
            s,
            vec![GatewayStatus {
                name: "west".into(),
                connected: true,
                inbound: 1,
                outbound: 2
            }]
        );
        assert_eq!(v.reason, reason::ALL_MEMBERS_REACHABLE);
        let (s, v) = gateways(&["west".into(), "north".into()], &o);
        assert!(!s[1].connected);
        assert_eq!((v.status, v.reason), (false, reason::MEMBERS_UNREACHABLE));
        assert!(v.message.contains("north"));
        let (_, v) = gateways(&["west".into()], &Observation::default());
        assert!(!v.status);
    }

    fn leafz(accounts: &[&str]) -> Leafz {
        Leafz {
            leafs: accounts
                .iter()
                .map(|a| LeafInfo {
                    account: a.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn remote(i: usize, account: Option<&str>, refused: bool) -> LeafRemoteView {
        LeafRemoteView {
            index: i,
            connection_namespace: "edge".into(),
            connection_name: format!("hub-{i}"),
            account: account.map(str::to_string),
            refused: refused.then(|| (reason::REMOTE_NOT_PERMITTED, format!("hub-{i}: no grant"))),
        }
    }

    fn leaf_obs(per_server: &[&[&str]]) -> Observation {
        let mut o = Observation::default();
        for (i, a) in per_server.iter().enumerate() {
            o.answers.insert(
                format!("l-{i}"),
                ServerAnswer {
                    name: format!("l-{i}"),
                    leafz: Some(leafz(a)),
                    ..Default::default()
                },
            );
        }
        o
    }

    #[test]
    fn leaf_remotes_counted_by_account_and_refused_ones_named() {
        let o = leaf_obs(&[&["$G", "$G", "SYS"], &["$G", "SYS"]]);
        let remotes = vec![
            remote(0, None, false),
            remote(1, None, false),
            remote(2, Some("SYS"), false),
        ];
        let (s, v) = leafnodes(&remotes, &o);
        assert_eq!(
            s.iter().map(|r| r.connected).collect::<Vec<_>>(),
            vec![2, 1, 2],
            "the second global remote is held by one server only"
        );
        assert_eq!((v.status, v.reason), (false, reason::REMOTES_DISCONNECTED));
        assert!(v.message.contains("edge/hub-1"), "{}", v.message);

        let (_, v) = leafnodes(&[remote(0, None, false)], &o);
        assert_eq!((v.status, v.reason), (true, reason::REMOTES_CONNECTED));

        let (s, v) = leafnodes(&[remote(0, None, false), remote(1, None, true)], &o);
        assert_eq!(s[1].connected, 0);
        assert_eq!((v.status, v.reason), (false, reason::REMOTE_NOT_PERMITTED));
        assert!(v.message.contains("hub-1"));
    }

    #[test]
    fn auth_is_read_off_the_system_account() {
        assert_eq!(auth_from_system_account("$SYS"), Some(false));
        assert_eq!(
            auth_from_system_account("ADZ2BNYJT6KZ3QQUVSKOEYV3B7BDX6Y6VDNQJYQ6BTFRKRVPJKS5F36C"),
            Some(true)
        );
        assert_eq!(auth_from_system_account(""), None);
        let mut o = Observation::default();
        assert_eq!(running_with_auth(&o), None);
        o.answers.insert(
            "a".into(),
            ServerAnswer {
                name: "a".into(),
                auth: Some(false),
                ..Default::default()
            },
        );
        assert_eq!(running_with_auth(&o), Some(false));
    }

    #[rstest]
    #[case(3 << 30, "3Gi")]
    #[case(20 << 30, "20Gi")]
    #[case(1536 << 20, "1536Mi")]
    #[case(1000, "1000")]
    fn quantities(#[case] bytes: i64, #[case] want: &str) {
        assert_eq!(quantity(bytes), want);
    }

    #[test]
    fn common_version_only_when_all_agree() {
        let o = three(vec![], "", vec![]);
        assert_eq!(common_version(&o, &expected()), Some("2.15.0".into()));
        let mut o2 = o.clone();
        if let Some(a) = o2.answers.get_mut("demo-1") {
            a.version = Some("2.15.1".into());
        }
        assert_eq!(common_version(&o2, &expected()), None);
    }
}
