//! From what the reconciler observes (the server lifecycle's [`ObservedServer`]s, the servers' JSZ
//! answers, the meta group) to the plain inputs of the gate, the step order and a removal.
//! Pure: the reconciler does the asking. The Raft groups and the report each is judged by are
//! read as [`crate::observation`] reads them for the Settled condition.

use std::collections::{BTreeMap, BTreeSet};

use nats_wire::jsapi::MetaView;
use nats_wire::monitor::{Jsz, PeerInfo};

use super::gate::{GateServer, MetaObservation};
use super::order::Member;
use super::removal::StreamReplicas;
use super::volume::ClaimShape;
use crate::observation::{
    Observation, leader_report, meta_members, meta_reports, own_report, raft_groups,
};
use crate::server_lifecycle::ObservedServer;

/// Where the meta group's leader and peers are read from: one observation's JSZ answers (what
/// the reconciler asks), or a meta view (`nats_wire::jsapi::meta_view_of`, which also reaches a
/// meta leader in another NATS cluster of the supercluster).
pub trait MetaSource {
    /// The meta leader and its peers, when the leader itself answered with them.
    fn leader_and_peers(&self) -> Option<(String, Vec<String>)>;
}

/// The meta leader's own JSZ report, when it answered: its peers and itself, sorted.
impl MetaSource for &Observation {
    fn leader_and_peers(&self) -> Option<(String, Vec<String>)> {
        let m = own_report(&meta_reports(self.jsz()))?;
        let mut peers: Vec<String> = m.replicas.iter().map(|p| p.name.clone()).collect();
        peers.push(m.leader.clone());
        peers.sort();
        Some((m.leader.clone(), peers))
    }
}

/// The leader's peers as the meta view lists them.
impl MetaSource for Option<&MetaView> {
    fn leader_and_peers(&self) -> Option<(String, Vec<String>)> {
        match self {
            Some(MetaView::FromLeader(group)) => Some((
                group.leader.clone(),
                group.peers.iter().map(|p| p.name.clone()).collect(),
            )),
            _ => None,
        }
    }
}

/// The meta group for the gate: Off without JetStream, the leader's peers when the meta leader
/// (in this NATS cluster or another) answered, else FromFollowers: every server that answers
/// then counts as a member.
pub fn meta_observation(jetstream: bool, source: impl MetaSource) -> MetaObservation {
    if !jetstream {
        return MetaObservation::Off;
    }
    match source.leader_and_peers() {
        Some((leader, peers)) => MetaObservation::FromLeader { leader, peers },
        None => MetaObservation::FromFollowers,
    }
}

/// Each server's target revision by ordinal (`DesiredServer::revision`); a server beyond
/// replicas has none.
pub type Targets = BTreeMap<u32, String>;

fn target(targets: &Targets, ordinal: u32) -> String {
    targets.get(&ordinal).cloned().unwrap_or_default()
}

/// The step order's view of the servers.
pub fn members(observed: &[ObservedServer], targets: &Targets) -> Vec<Member> {
    observed
        .iter()
        .map(|o| Member {
            ordinal: o.ordinal,
            name: o.server_name.clone(),
            present: o.present,
            revision: o.revision.clone(),
            target: target(targets, o.ordinal),
        })
        .collect()
}

/// Which revision a server runs, from the `config_digest` its `/varz` reports and the digest
/// each known revision of that server's rendered config has (`reload::config_digest`).
pub fn reported_revision(config_digest: &str, known: &[(String, String)]) -> Option<String> {
    known
        .iter()
        .find(|(_, d)| d == config_digest)
        .map(|(r, _)| r.clone())
}

/// The gate's view of the present servers: `reported` maps a server to the revision it reports,
/// `answered` holds the servers that answered JSZ.
pub fn gate_servers(
    observed: &[ObservedServer],
    targets: &Targets,
    reported: &BTreeMap<String, String>,
    answered: &BTreeSet<String>,
) -> Vec<GateServer> {
    observed
        .iter()
        .filter(|o| o.present)
        .map(|o| GateServer {
            name: o.server_name.clone(),
            ready: o.ready,
            revision: o.revision.clone(),
            target: target(targets, o.ordinal),
            reported: reported.get(&o.server_name).cloned(),
            answered: answered.contains(&o.server_name),
        })
        .collect()
}

/// `(server, JSZ)` of each answer.
fn pairs(answers: &[(String, Jsz)]) -> impl Iterator<Item = (&str, &Jsz)> {
    answers.iter().map(|(s, j)| (s.as_str(), j))
}

/// Raft groups (streams, consumers) that still have `server` as a member.
pub fn groups_on(answers: &[(String, Jsz)], server: &str) -> Vec<String> {
    raft_groups(pairs(answers))
        .into_iter()
        .filter(|(_, reports)| {
            reports
                .iter()
                .any(|(_, c)| c.members().iter().any(|m| m == server))
        })
        .map(|(g, _)| g.path())
        .collect()
}

fn current_apart(leader: &str, replicas: &[PeerInfo], except: Option<&str>) -> bool {
    !leader.is_empty()
        && replicas
            .iter()
            .filter(|p| Some(p.name.as_str()) != except)
            .all(|p| p.current && !p.offline)
}

/// Raft groups not current — leaderless, or a member offline or behind — not counting `except`
/// (the server being removed) among the members; the meta group first when the answers show it.
pub fn not_current(answers: &[(String, Jsz)], except: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let reports = meta_reports(pairs(answers));
    let (leader, members) = meta_members(&reports);
    // Followers name the server being removed as leader but it did not answer as one: it cannot
    // be stepped down, and nothing would answer a SERVER.REMOVE.
    let led_by_except = own_report(&reports).is_none() && Some(leader.as_str()) == except;
    if !reports.is_empty() && (led_by_except || !current_apart(&leader, &members, except)) {
        let what = if leader.is_empty() {
            "the meta group (leaderless)"
        } else {
            "the meta group"
        };
        out.push(what.to_string());
    }
    for (group, reports) in raft_groups(pairs(answers)) {
        if let Some(c) = leader_report(&reports)
            && !current_apart(&c.leader, &c.replicas, except)
        {
            out.push(group.path());
        }
    }
    out
}

/// Every stream's replica count (from its config, else its members), for ScaleDownBlocked.
pub fn stream_replicas(answers: &[(String, Jsz)]) -> Vec<StreamReplicas> {
    let mut out: BTreeMap<String, u32> = BTreeMap::new();
    for (_, jsz) in answers {
        for acc in &jsz.account_details {
            for s in &acc.streams {
                let from_config = s.config.as_ref().map(|c| c.num_replicas.max(1) as u32);
                let from_members = s.cluster.as_ref().map(|c| c.members().len().max(1) as u32);
                let n = from_config.or(from_members).unwrap_or(1);
                let e = out.entry(format!("{} > {}", acc.name, s.name)).or_insert(0);
                *e = (*e).max(n);
            }
        }
    }
    out.into_iter()
        .map(|(name, replicas)| StreamReplicas { name, replicas })
        .collect()
}

/// The servers whose volume no longer has the desired shape (design §4.5: replaced). A server whose volume the port
/// could not tell is not replaced: a replacement is only ever taken on what was seen.
pub fn volume_mismatches(desired: Option<&ClaimShape>, observed: &[ObservedServer]) -> Vec<String> {
    let Some(want) = desired else {
        return vec![];
    };
    observed
        .iter()
        .filter(|o| o.present)
        .filter(|o| o.volume.as_ref().is_some_and(|v| v != want))
        .map(|o| o.server_name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::volume::shape_of;
    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
    use nats_wire::jsapi::{MetaGroup, MetaPeer};
    use nats_wire::monitor::{
        AccountDetail, ClusterInfo, ConsumerDetail, MetaClusterInfo, StreamConfigView, StreamDetail,
    };
    use rstest::rstest;

    fn peer(name: &str, current: bool, offline: bool) -> PeerInfo {
        PeerInfo {
            name: name.into(),
            current,
            offline,
            ..Default::default()
        }
    }

    fn group(leader: &str, replicas: Vec<PeerInfo>) -> ClusterInfo {
        ClusterInfo {
            name: "demo".into(),
            leader: leader.into(),
            replicas,
            ..Default::default()
        }
    }

    fn jsz(meta_leader: &str, meta: Vec<PeerInfo>, stream: Option<(ClusterInfo, i64)>) -> Jsz {
        Jsz {
            meta_cluster: Some(MetaClusterInfo {
                leader: meta_leader.into(),
                replicas: meta,
                ..Default::default()
            }),
            account_details: stream
                .map(|(c, r)| {
                    vec![AccountDetail {
                        name: "APP".into(),
                        streams: vec![StreamDetail {
                            name: "ORDERS".into(),
                            cluster: Some(c.clone()),
                            config: Some(StreamConfigView {
                                num_replicas: r,
                                ..Default::default()
                            }),
                            consumers: vec![ConsumerDetail {
                                name: "C".into(),
                                cluster: Some(c),
                                ..Default::default()
                            }],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }]
                })
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    fn all_current() -> Vec<PeerInfo> {
        vec![peer("demo-1", true, false), peer("demo-2", true, false)]
    }

    #[rstest]
    #[case::settled(all_current(), all_current(), None, vec![])]
    #[case::member_offline(all_current(), vec![peer("demo-1", true, false), peer("demo-2", false, true)], None,
        vec!["consumer APP > ORDERS > C", "stream APP > ORDERS"])]
    #[case::apart_from_the_removed(vec![peer("demo-1", true, false), peer("demo-2", false, true)], vec![peer("demo-1", true, false), peer("demo-2", false, true)], Some("demo-2"), vec![])]
    #[case::meta_behind(vec![peer("demo-1", false, false), peer("demo-2", true, false)], all_current(), None, vec!["the meta group"])]
    fn groups_not_current(
        #[case] meta: Vec<PeerInfo>,
        #[case] stream: Vec<PeerInfo>,
        #[case] except: Option<&str>,
        #[case] want: Vec<&str>,
    ) {
        let answers = vec![(
            "demo-0".to_string(),
            jsz("demo-0", meta, Some((group("demo-0", stream), 3))),
        )];
        assert_eq!(not_current(&answers, except), want);
    }

    /// A follower lists the other followers not current (nats-server raft.go `Peers()`): with
    /// the meta leader in another NATS cluster, only its entry for the leader is judged.
    #[rstest]
    #[case::hears_the_leader(true, vec![])]
    #[case::lost_the_leader(false, vec!["the meta group"])]
    fn the_meta_group_led_from_elsewhere(#[case] heard: bool, #[case] want: Vec<&str>) {
        let follower = |me: &str| {
            let meta = ["west-0", "demo-0", "demo-1"]
                .iter()
                .filter(|p| **p != me)
                .map(|p| peer(p, *p == "west-0" && heard, false))
                .collect();
            (me.to_string(), jsz("west-0", meta, None))
        };
        let answers = vec![follower("demo-0"), follower("demo-1")];
        assert_eq!(not_current(&answers, None), want);
    }

    /// Just after the meta leader being removed stepped down, before a new leader answers: the
    /// followers still name it, or name different leaders. Neither may let SERVER.REMOVE go to
    /// a meta group with no leader to answer it (the removal waits instead).
    #[rstest]
    #[case::followers_name_the_removed_server(&[("c1-0", "c1-3"), ("c1-1", "c1-3"), ("c1-2", "c1-3")], vec!["the meta group"])]
    #[case::answers_name_two_leaders(&[("c1-0", "c1-3"), ("c1-1", "c1-0"), ("c1-2", "c1-3")], vec!["the meta group (leaderless)"])]
    #[case::no_leader_named(&[("c1-0", ""), ("c1-1", ""), ("c1-2", "")], vec!["the meta group (leaderless)"])]
    #[case::a_new_leader_heard_by_all(&[("c1-0", "c1-1"), ("c1-2", "c1-1")], vec![])]
    fn the_meta_group_while_the_removed_leader_steps_down(
        #[case] named: &[(&str, &str)],
        #[case] want: Vec<&str>,
    ) {
        let answers = named
            .iter()
            .map(|(me, leader)| {
                let meta = ["c1-0", "c1-1", "c1-2", "c1-3"]
                    .iter()
                    .filter(|p| *p != me)
                    .map(|p| peer(p, p == leader, false))
                    .collect();
                (me.to_string(), jsz(leader, meta, None))
            })
            .collect::<Vec<_>>();
        assert_eq!(not_current(&answers, Some("c1-3")), want);
    }

    #[test]
    fn a_leaderless_stream_is_not_current() {
        // A follower's meta report: the leader current, the other follower not.
        let meta = vec![peer("demo-0", true, false), peer("demo-2", false, false)];
        let answers = vec![(
            "demo-1".to_string(),
            jsz("demo-0", meta, Some((group("", all_current()), 3))),
        )];
        assert_eq!(
            not_current(&answers, None),
            vec!["consumer APP > ORDERS > C", "stream APP > ORDERS"]
        );
    }

    #[test]
    fn groups_on_a_server_and_stream_replicas() {
        let answers = vec![(
            "demo-0".to_string(),
            jsz(
                "demo-0",
                all_current(),
                Some((group("demo-0", all_current()), 3)),
            ),
        )];
        assert_eq!(
            groups_on(&answers, "demo-2"),
            vec!["consumer APP > ORDERS > C", "stream APP > ORDERS"]
        );
        assert!(groups_on(&answers, "demo-3").is_empty());
        assert_eq!(
            stream_replicas(&answers),
            vec![StreamReplicas {
                name: "APP > ORDERS".into(),
                replicas: 3
            }]
        );
    }

    #[test]
    fn the_meta_view_becomes_the_gates_meta_observation() {
        let view = MetaView::FromLeader(MetaGroup {
            leader_cluster: "west".into(),
            leader: "west-0".into(),
            peers: ["west-0", "demo-0"]
                .iter()
                .map(|n| MetaPeer {
                    name: n.to_string(),
                    ..Default::default()
                })
                .collect(),
            cluster_size: 2,
        });
        assert_eq!(
            meta_observation(true, Some(&view)),
            MetaObservation::FromLeader {
                leader: "west-0".into(),
                peers: vec!["west-0".into(), "demo-0".into()]
            }
        );
        let followers = MetaView::FromFollowers {
            answered: vec!["demo-0".into()],
        };
        assert_eq!(
            meta_observation(true, Some(&followers)),
            MetaObservation::FromFollowers
        );
        assert_eq!(meta_observation(true, None), MetaObservation::FromFollowers);
        assert_eq!(meta_observation(false, Some(&view)), MetaObservation::Off);
    }

    #[test]
    fn servers_become_members_and_gate_servers() {
        let observed = vec![
            ObservedServer {
                ordinal: 0,
                server_name: "demo-0".into(),
                present: true,
                ready: true,
                revision: Some("r2".into()),
                restarts: 1,
                volume: None,
                claim: None,
            },
            ObservedServer {
                ordinal: 1,
                server_name: "demo-1".into(),
                present: false,
                ..Default::default()
            },
        ];
        let targets: Targets = [(0, "r2".to_string()), (1, "r2".to_string())].into();
        let m = members(&observed, &targets);
        assert_eq!(m[0].target, "r2");
        assert_eq!((m[0].present, m[1].present), (true, false));
        let known = vec![
            ("r1".to_string(), "sha256:a".to_string()),
            ("r2".to_string(), "sha256:b".to_string()),
        ];
        let reported: BTreeMap<String, String> = [(
            "demo-0".to_string(),
            reported_revision("sha256:b", &known).unwrap(),
        )]
        .into();
        let answered: BTreeSet<String> = ["demo-0".to_string()].into();
        let g = gate_servers(&observed, &targets, &reported, &answered);
        assert_eq!(g.len(), 1, "absent servers are not gated on");
        assert_eq!(g[0].reported.as_deref(), Some("r2"));
        assert!(g[0].answered);
        assert_eq!(reported_revision("sha256:z", &known), None);
    }

    fn claim(yaml: &str) -> PersistentVolumeClaimSpec {
        serde_yaml::from_str(yaml).expect("claim spec")
    }

    const BASE: &str = "accessModes: [ReadWriteOnce]\nresources: {requests: {storage: 20Gi}}\n";

    #[rstest]
    #[case::same(BASE, false)]
    #[case::same_size_other_unit(
        "accessModes: [ReadWriteOnce]\nresources: {requests: {storage: 20480Mi}}\n",
        false
    )]
    #[case::larger(
        "accessModes: [ReadWriteOnce]\nresources: {requests: {storage: 40Gi}}\n",
        true
    )]
    #[case::another_class(
        "storageClassName: fast\naccessModes: [ReadWriteOnce]\nresources: {requests: {storage: 20Gi}}\n",
        true
    )]
    #[case::another_zone(
        "accessModes: [ReadWriteOnce]\nresources: {requests: {storage: 20Gi}}\nselector: {matchLabels: {topology.kubernetes.io/zone: b}}\n",
        true
    )]
    #[case::access_modes(
        "accessModes: [ReadWriteMany]\nresources: {requests: {storage: 20Gi}}\n",
        true
    )]
    fn a_changed_claim_shape_replaces_the_server(#[case] now: &str, #[case] replaced: bool) {
        let observed = vec![ObservedServer {
            server_name: "demo-0".into(),
            present: true,
            volume: Some(shape_of(&claim(BASE))),
            ..Default::default()
        }];
        let want = shape_of(&claim(now));
        assert_eq!(
            volume_mismatches(Some(&want), &observed),
            if replaced {
                vec!["demo-0".to_string()]
            } else {
                vec![]
            }
        );
    }

    #[rstest]
    #[case::volume_unknown(true, None, true)]
    #[case::absent_server(false, Some(ClaimShape::default()), true)]
    #[case::no_template_wanted(true, Some(ClaimShape::default()), false)]
    fn nothing_is_replaced_on_what_was_not_seen(
        #[case] present: bool,
        #[case] volume: Option<ClaimShape>,
        #[case] template: bool,
    ) {
        let observed = vec![ObservedServer {
            server_name: "demo-0".into(),
            present,
            volume,
            ..Default::default()
        }];
        let want = shape_of(&claim("resources: {requests: {storage: 1Gi}}\n"));
        assert!(volume_mismatches(template.then_some(&want), &observed).is_empty());
    }
}
