//! The NATS system as one `$SYS.REQ.SERVER.PING.JSZ` shows it to the system account: every
//! server that answered (its name, NATS cluster and tags), the meta group as its leader reports
//! it, and every stream group of every account once (its account, NATS cluster, leader, peers,
//! configured replicas and placement, and the ownership marker) followed by the groups of its
//! consumers when the ping asked for consumers. The evacuation (and the balancers) judge from
//! this alone; reading it is the shell's job.

use std::collections::BTreeMap;

use nats_wire::Reply;
use nats_wire::jsapi::{MetaGroup, meta_group_of};
use nats_wire::monitor::{ConsumerDetail, Jsz, StreamDetail};
use nats_wire::{PingReplies, ServerInfo};

use crate::ownership::OWNER_METADATA_KEY;

/// One server that answered the ping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSeen {
    /// Its server_name.
    pub name: String,
    /// The NATS cluster it is in.
    pub cluster: String,
    /// Its server tags (`key:value`).
    pub tags: Vec<String>,
}

impl ServerSeen {
    /// Whether the server carries every one of `tags` (nats-server matches tags without case).
    pub fn carries_all(&self, tags: &[String]) -> bool {
        tags.iter()
            .all(|t| self.tags.iter().any(|s| s.eq_ignore_ascii_case(t)))
    }
}

/// One stream group (a stream, key-value bucket or object store), or one group of a consumer of
/// it, as the system sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSeen {
    /// The account as the JetStream API names it: JSZ's `id` (the public key in operator
    /// mode, where `name` is the JWT's name; the name under config accounts).
    pub account: String,
    /// The server-side stream name (a consumer's: its stream's).
    pub stream: String,
    /// The consumer, for a consumer's group; `None` for the stream's own.
    pub consumer: Option<String>,
    /// The NATS cluster the group is placed in.
    pub cluster: String,
    /// Its leader's server_name; empty while it has none.
    pub leader: String,
    /// Its other peers' server_names.
    pub peers: Vec<String>,
    /// The replicas its config asks for (a consumer's: the members its group has, as nats-server
    /// derives them from the stream's; consumer.go `replicas`).
    pub replicas: usize,
    /// The NATS cluster its (stream's) config's placement names; empty when none.
    pub placement_cluster: String,
    /// The UID its (stream's) ownership marker names, if any.
    pub owner: Option<String>,
}

impl GroupSeen {
    /// Leader and peers: every server holding a copy.
    pub fn members(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.leader.as_str())
            .filter(|l| !l.is_empty())
            .chain(self.peers.iter().map(String::as_str))
    }

    /// Whether the group is as its config asks: a leader and exactly its replicas (a group being
    /// moved holds the old peers and the new ones at once).
    pub fn settled(&self) -> bool {
        !self.leader.is_empty() && self.members().count() == self.replicas.max(1)
    }

    /// The stream the group is of: (account, stream); a consumer's group follows its stream.
    pub fn stream_key(&self) -> (String, String) {
        (self.account.clone(), self.stream.clone())
    }

    /// `stream S`, or `consumer C of stream S`: how messages name the group.
    pub fn describe(&self) -> String {
        moved(&self.stream, self.consumer.as_deref())
    }
}

/// `stream S`, or `consumer C of stream S`: how messages name what a move moves.
pub fn moved(stream: &str, consumer: Option<&str>) -> String {
    match consumer {
        Some(c) => format!("consumer {c} of stream {stream}"),
        None => format!("stream {stream}"),
    }
}

/// What one JSZ ping showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SystemView {
    /// The servers that answered, by name.
    pub servers: Vec<ServerSeen>,
    /// The meta group as its leader reports it; `None` when no leader answered.
    pub meta: Option<MetaGroup>,
    /// The meta leader any answer names (a cluster-filtered ping may not reach the leader).
    pub meta_leader: Option<String>,
    /// Every stream group of every account, once, and the groups of their consumers, sorted by
    /// account, stream, then consumer (the stream's own group first).
    pub groups: Vec<GroupSeen>,
}

impl SystemView {
    /// The servers of the NATS cluster `cluster` that answered.
    pub fn servers_of<'a>(&'a self, cluster: &'a str) -> impl Iterator<Item = &'a ServerSeen> {
        self.servers.iter().filter(move |s| s.cluster == cluster)
    }
}

/// The view of a JSZ ping asked with accounts, streams and configs (and consumers, for their
/// groups).
pub fn system_view(replies: &PingReplies<Jsz>) -> SystemView {
    let mut servers: Vec<ServerSeen> = replies
        .replies
        .iter()
        .map(|r| server_seen(&r.server))
        .collect();
    servers.sort_by(|a, b| a.name.cmp(&b.name));
    servers.dedup_by(|a, b| a.name == b.name);
    SystemView {
        servers,
        meta: meta_group_of(replies),
        meta_leader: replies
            .replies
            .iter()
            .filter_map(|r| r.data.meta_cluster.as_ref())
            .map(|m| m.leader.clone())
            .find(|l| !l.is_empty()),
        groups: groups(&replies.replies),
    }
}

fn server_seen(s: &ServerInfo) -> ServerSeen {
    ServerSeen {
        name: s.name.clone(),
        cluster: s.cluster.clone(),
        tags: s.tags.clone(),
    }
}

/// Every group once: each member reports the groups it holds, and the leader's report wins
/// (a follower's may lag behind a change of peers).
fn groups(replies: &[Reply<Jsz>]) -> Vec<GroupSeen> {
    type Key = (String, String, Option<String>);
    let mut by_key: BTreeMap<Key, (bool, GroupSeen)> = BTreeMap::new();
    let mut keep = |server: &str, mut seen: GroupSeen| {
        seen.peers = peers_of(&seen.leader, std::mem::take(&mut seen.peers), server);
        let from_leader = !seen.leader.is_empty() && seen.leader == server;
        let key = (
            seen.account.clone(),
            seen.stream.clone(),
            seen.consumer.clone(),
        );
        match by_key.get(&key) {
            Some((true, _)) => {}
            Some((false, _)) if !from_leader => {}
            _ => {
                by_key.insert(key, (from_leader, seen));
            }
        }
    };
    for r in replies {
        for account in &r.data.account_details {
            for stream in &account.streams {
                // ACCOUNT.STREAM.MOVE.<account> takes the id; JSZ's name is only a label.
                let id = if account.id.is_empty() {
                    &account.name
                } else {
                    &account.id
                };
                let seen = group_seen(id, stream);
                for c in &stream.consumers {
                    keep(&r.server.name, consumer_seen(&seen, c));
                }
                keep(&r.server.name, seen);
            }
        }
    }
    by_key.into_values().map(|(_, g)| g).collect()
}

/// A consumer's group: its own leader and peers, its stream's account, placement and owner. Its
/// replicas are the members reported (nats-server derives them from the stream's and the
/// consumer's config), so it is as asked once it has a leader.
pub(crate) fn consumer_seen(stream: &GroupSeen, c: &ConsumerDetail) -> GroupSeen {
    let cluster = c.cluster.clone().unwrap_or_default();
    let members = cluster.members().len();
    GroupSeen {
        consumer: Some(c.name.clone()),
        cluster: if cluster.name.is_empty() {
            stream.cluster.clone()
        } else {
            cluster.name
        },
        leader: cluster.leader,
        peers: cluster.replicas.into_iter().map(|p| p.name).collect(),
        replicas: members,
        ..stream.clone()
    }
}

/// The peers of a group besides its leader, each once, from the report of `reporter`, one of its
/// members: nats-server's report of a group lists every member but the server answering
/// (jetstream_cluster.go `clusterInfo`), so a follower's names the leader among the replicas and
/// leaves itself out. The leader's report wins ([`groups`]), but right after a leader move no
/// answer may come from the new leader as such: counted as reported, the leader held a copy twice
/// and the follower none (seen in a test: one server with seven copies of six streams, its
/// neighbour with five, and the system balancer Settled on that count).
pub(crate) fn peers_of(leader: &str, replicas: Vec<String>, reporter: &str) -> Vec<String> {
    let mut peers: Vec<String> = Vec::new();
    for name in replicas.into_iter().chain([reporter.to_string()]) {
        if name != leader && !peers.contains(&name) {
            peers.push(name);
        }
    }
    peers
}

fn group_seen(account: &str, s: &StreamDetail) -> GroupSeen {
    let cluster = s.cluster.clone().unwrap_or_default();
    let config = s.config.clone().unwrap_or_default();
    GroupSeen {
        account: account.to_string(),
        stream: s.name.clone(),
        consumer: None,
        cluster: cluster.name,
        leader: cluster.leader,
        peers: cluster.replicas.into_iter().map(|p| p.name).collect(),
        replicas: usize::try_from(config.num_replicas).unwrap_or(1),
        placement_cluster: config.placement.map(|p| p.cluster).unwrap_or_default(),
        owner: config
            .metadata
            .get(OWNER_METADATA_KEY)
            .filter(|o| !o.is_empty())
            .cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_wire::monitor::{
        AccountDetail, ClusterInfo, MetaClusterInfo, Placement, StreamConfigView,
    };

    #[rstest::rstest]
    #[case::the_leaders_report("a", &["b", "c"], &["b", "c"])]
    #[case::a_followers_report_names_the_leader_not_itself("b", &["a", "c"], &["c", "b"])]
    #[case::a_replica_named_twice("a", &["b", "b", "c"], &["b", "c"])]
    #[case::an_r1_group_from_its_leader("a", &[], &[])]
    fn every_member_counts_once_whoever_reports_the_group(
        #[case] reporter: &str,
        #[case] replicas: &[&str],
        #[case] want: &[&str],
    ) {
        let replicas = replicas.iter().map(|r| r.to_string()).collect();
        assert_eq!(peers_of("a", replicas, reporter), want);
    }

    pub(crate) fn detail(name: &str, cluster: &str, leader: &str, peers: &[&str]) -> StreamDetail {
        StreamDetail {
            name: name.into(),
            cluster: Some(ClusterInfo {
                name: cluster.into(),
                leader: leader.into(),
                replicas: peers
                    .iter()
                    .map(|p| nats_wire::monitor::PeerInfo {
                        name: p.to_string(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            config: Some(StreamConfigView {
                name: name.into(),
                num_replicas: 1 + peers.len() as i64,
                placement: Some(Placement {
                    cluster: "c1".into(),
                    ..Default::default()
                }),
                metadata: [(OWNER_METADATA_KEY.to_string(), "uid-1".to_string())].into(),
            }),
            ..Default::default()
        }
    }

    fn reply(server: &str, cluster: &str, streams: Vec<StreamDetail>) -> Reply<Jsz> {
        Reply {
            server: ServerInfo {
                name: server.into(),
                cluster: cluster.into(),
                tags: vec!["region:east".into()],
                ..Default::default()
            },
            data: Jsz {
                meta_cluster: Some(MetaClusterInfo {
                    leader: "a".into(),
                    ..Default::default()
                }),
                account_details: vec![AccountDetail {
                    name: "APP".into(),
                    streams,
                    ..Default::default()
                }],
                ..Default::default()
            },
        }
    }

    fn replies(r: Vec<Reply<Jsz>>) -> PingReplies<Jsz> {
        PingReplies {
            request: "$SYS.REQ.SERVER.PING.JSZ".into(),
            replies: r,
            failures: Vec::new(),
            expected: None,
        }
    }

    #[test]
    fn a_group_is_named_by_its_accounts_id_not_its_jwt_name() {
        let mut r = reply("a", "c1", vec![detail("S", "c1", "a", &["b", "c"])]);
        r.data.account_details[0].name = "ORDERS".into();
        r.data.account_details[0].id = "ADQK6Z".into();
        let view = system_view(&replies(vec![r]));
        assert_eq!(view.groups[0].account, "ADQK6Z");
    }

    #[test]
    fn a_group_is_seen_once_and_the_leaders_report_wins() {
        // b reports a stale peer set; a, the leader, the current one.
        let view = system_view(&replies(vec![
            reply("b", "c1", vec![detail("S", "c1", "a", &["b", "old"])]),
            reply("a", "c1", vec![detail("S", "c1", "a", &["b", "c"])]),
            reply("c", "c1", vec![detail("S", "c1", "a", &["b", "old2"])]),
        ]));
        assert_eq!(view.groups.len(), 1);
        let g = &view.groups[0];
        assert_eq!(g.peers, vec!["b", "c"]);
        assert_eq!((g.account.as_str(), g.cluster.as_str()), ("APP", "c1"));
        assert_eq!(g.placement_cluster, "c1");
        assert_eq!(g.owner.as_deref(), Some("uid-1"));
        assert!(g.settled());
        assert_eq!(
            view.servers
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            vec!["a", "b", "c"]
        );
        assert_eq!(view.meta.map(|m| m.leader), Some("a".to_string()));
        assert_eq!(view.meta_leader.as_deref(), Some("a"));
    }

    fn consumer(name: &str, leader: &str, peers: &[&str]) -> ConsumerDetail {
        ConsumerDetail {
            name: name.into(),
            stream_name: "S".into(),
            cluster: Some(ClusterInfo {
                name: "c1".into(),
                leader: leader.into(),
                replicas: peers
                    .iter()
                    .map(|p| nats_wire::monitor::PeerInfo {
                        name: p.to_string(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_consumers_group_follows_its_stream_and_its_leaders_report_wins() {
        let with = |server: &str, consumers: Vec<ConsumerDetail>| {
            let mut d = detail("S", "c1", "a", &["b", "c"]);
            d.consumers = consumers;
            reply(server, "c1", vec![d])
        };
        // b, leading C, reports C's current peers; a and c lag behind.
        let view = system_view(&replies(vec![
            with("a", vec![consumer("C", "b", &["a", "old"])]),
            with(
                "b",
                vec![consumer("C", "b", &["a", "c"]), consumer("D", "", &["a"])],
            ),
            with("c", vec![consumer("C", "b", &["c", "old"])]),
        ]));
        let got: Vec<(&str, Option<&str>, &str, usize, bool)> = view
            .groups
            .iter()
            .map(|g| {
                (
                    g.stream.as_str(),
                    g.consumer.as_deref(),
                    g.leader.as_str(),
                    g.replicas,
                    g.settled(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("S", None, "a", 3, true),
                ("S", Some("C"), "b", 3, true),
                ("S", Some("D"), "", 1, false),
            ],
            "the stream first, then its consumers by name; a leaderless consumer is not settled"
        );
        let c = &view.groups[1];
        assert_eq!(c.peers, vec!["a", "c"]);
        assert_eq!(
            (
                c.account.as_str(),
                c.cluster.as_str(),
                c.placement_cluster.as_str()
            ),
            ("APP", "c1", "c1")
        );
        assert_eq!(c.owner.as_deref(), Some("uid-1"), "its stream's owner");
        assert_eq!(c.stream_key(), ("APP".to_string(), "S".to_string()));
        assert_eq!(c.describe(), "consumer C of stream S");
        assert_eq!(view.groups[0].describe(), "stream S");
    }

    #[test]
    fn a_group_being_moved_or_leaderless_is_not_settled() {
        let mut g = group_seen("APP", &detail("S", "c1", "a", &["b", "c"]));
        assert!(g.settled());
        g.peers.push("d".into());
        assert!(
            !g.settled(),
            "four members of an R3 group: a move in progress"
        );
        let mut g = group_seen("APP", &detail("S", "c1", "", &["b", "c"]));
        g.replicas = 2;
        assert!(!g.settled(), "no leader");
    }

    #[test]
    fn tags_are_matched_whole_and_without_case() {
        let s = ServerSeen {
            name: "a".into(),
            cluster: "c1".into(),
            tags: vec!["region:East".into(), "env:prod".into()],
        };
        for (tags, carries) in [
            (vec!["region:east"], true),
            (vec!["region:east", "env:prod"], true),
            (vec!["region:east", "env:dev"], false),
            (vec!["region:ea"], false),
            (vec![], true),
        ] {
            let tags: Vec<String> = tags.into_iter().map(String::from).collect();
            assert_eq!(s.carries_all(&tags), carries, "{tags:?}");
        }
    }
}
