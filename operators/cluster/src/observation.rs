//! What the servers of one NatsCluster answered in one pass ([`Observation`]: STATSZ, VARZ, JSZ,
//! GATEWAYZ, LEAFZ, or the same from each server's monitoring endpoint), and what is read off
//! it the same way wherever it is judged: whether the servers run under an auth plane, the
//! version they agree on, and the Raft groups with the report each is judged by. Pure: the
//! asking is [`crate::nats::ask_observation`]'s; the conditions ([`crate::conditions`]) and the rollout
//! ([`crate::rollout`]) judge what is read here.

use std::collections::BTreeMap;

use nats_wire::monitor::{ClusterInfo, Gatewayz, Jsz, Leafz, MetaClusterInfo, PeerInfo};

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

impl Observation {
    /// Each answering server's JSZ, as `(server, JSZ)`.
    pub fn jsz(&self) -> impl Iterator<Item = (&str, &Jsz)> {
        self.answers
            .values()
            .filter_map(|a| Some((a.name.as_str(), a.jsz.as_ref()?)))
    }
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

/// `status.version`: the oldest version a server of `expected` reports, so that mid-rollout
/// (story 01's canary: one server on 2.15.1) it reads what every server runs at least, and a
/// server that does not answer for a moment (restarting) leaves it as the others say. None when
/// no server answers with a version. Versions compare by semver; one that is not semver sorts
/// after every one that is (it is named only when no server reports a semver).
pub fn oldest_version(obs: &Observation, expected: &[String]) -> Option<String> {
    expected
        .iter()
        .filter_map(|n| obs.answers.get(n).and_then(|a| a.version.as_ref()))
        .min_by(
            |a, b| match (semver::Version::parse(a), semver::Version::parse(b)) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                (Ok(_), Err(_)) => std::cmp::Ordering::Less,
                (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
                (Err(_), Err(_)) => a.cmp(b),
            },
        )
        .cloned()
}

/// A stream's or a consumer's Raft group, by account and names. Consumers order before
/// streams, then by account, stream and consumer name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RaftGroup {
    Consumer {
        account: String,
        stream: String,
        consumer: String,
    },
    Stream {
        account: String,
        stream: String,
    },
}

impl RaftGroup {
    /// The group as the rollout names it (evacuation, ScaleDownBlocked): `stream APP > ORDERS`,
    /// `consumer APP > ORDERS > C`, the path the deletion guard names streams by.
    pub fn path(&self) -> String {
        match self {
            RaftGroup::Stream { account, stream } => format!("stream {account} > {stream}"),
            RaftGroup::Consumer {
                account,
                stream,
                consumer,
            } => format!("consumer {account} > {stream} > {consumer}"),
        }
    }

    /// The group as the Settled condition's messages name it: `stream APP ORDERS`,
    /// `consumer APP ORDERS C`.
    pub fn words(&self) -> String {
        match self {
            RaftGroup::Stream { account, stream } => format!("stream {account} {stream}"),
            RaftGroup::Consumer {
                account,
                stream,
                consumer,
            } => format!("consumer {account} {stream} {consumer}"),
        }
    }
}

/// Every stream and consumer Raft group in `answers` (`(server, JSZ)`), each with the reports of
/// it: `(server that reported, group)`.
pub fn raft_groups<'a>(
    answers: impl IntoIterator<Item = (&'a str, &'a Jsz)>,
) -> BTreeMap<RaftGroup, Vec<(&'a str, &'a ClusterInfo)>> {
    let mut groups: BTreeMap<RaftGroup, Vec<(&str, &ClusterInfo)>> = BTreeMap::new();
    for (server, jsz) in answers {
        for acc in &jsz.account_details {
            for s in &acc.streams {
                if let Some(c) = &s.cluster {
                    let group = RaftGroup::Stream {
                        account: acc.name.clone(),
                        stream: s.name.clone(),
                    };
                    groups.entry(group).or_default().push((server, c));
                }
                for con in &s.consumers {
                    if let Some(c) = &con.cluster {
                        let group = RaftGroup::Consumer {
                            account: acc.name.clone(),
                            stream: s.name.clone(),
                            consumer: con.name.clone(),
                        };
                        groups.entry(group).or_default().push((server, c));
                    }
                }
            }
        }
    }
    groups
}

/// A report of one Raft group (a stream's or consumer's, or the meta group's): it names the
/// group's leader.
pub trait RaftReport {
    fn leader(&self) -> &str;
}

impl RaftReport for ClusterInfo {
    fn leader(&self) -> &str {
        &self.leader
    }
}

impl RaftReport for MetaClusterInfo {
    fn leader(&self) -> &str {
        &self.leader
    }
}

/// The leader's own report of its group among `reports` (`(server that reported, report)`):
/// only the leader knows every member's lag and lists its peers reliably.
pub fn own_report<'a, R: RaftReport>(reports: &[(&'a str, &'a R)]) -> Option<&'a R> {
    reports
        .iter()
        .find(|(server, r)| !r.leader().is_empty() && r.leader() == *server)
        .map(|(_, r)| *r)
}

/// The report to judge a group by: the leader's own when its server answered, else one that
/// names a leader, else any (a leaderless group).
pub fn leader_report<'a, R: RaftReport>(reports: &[(&'a str, &'a R)]) -> Option<&'a R> {
    own_report(reports)
        .or_else(|| {
            reports
                .iter()
                .find(|(_, r)| !r.leader().is_empty())
                .map(|(_, r)| *r)
        })
        .or(reports.first().map(|(_, r)| *r))
}

/// The meta group as the answering servers can vouch for it: its leader (empty when none is
/// named, or when the answers name different ones) and the members to judge. The leader's own
/// report, when its server answered, lists every peer's currency. A follower knows only whether it
/// hears the leader: on a follower, nats-server's raft `Peers()` reports every other follower
/// `current: false` (raft.go, "another follower that we're not in contact with"), so its list is no
/// judge of them. When the leader did not answer (it is in another NATS cluster of the
/// supercluster, or it just stepped down), each answering server stands for itself, current when
/// its entry for the leader is; a server that names no leader or has no entry for it is not
/// current. Answers naming two leaders are an election in progress: leaderless.
pub fn meta_members(reports: &[(&str, &MetaClusterInfo)]) -> (String, Vec<PeerInfo>) {
    if let Some(m) = own_report(reports) {
        return (m.leader.clone(), m.replicas.clone());
    }
    let mut named = reports
        .iter()
        .map(|(_, m)| m.leader.as_str())
        .filter(|l| !l.is_empty());
    let Some(leader) = named.next() else {
        return (String::new(), vec![]);
    };
    if named.any(|l| l != leader) {
        return (String::new(), vec![]);
    }
    let members = reports
        .iter()
        .map(|(server, m)| {
            let heard = m
                .replicas
                .iter()
                .find(|p| m.leader == leader && p.name == leader);
            PeerInfo {
                name: (*server).to_string(),
                current: heard.is_some_and(|p| p.current),
                offline: heard.is_some_and(|p| p.offline),
                lag: heard.map_or(0, |p| p.lag),
                ..Default::default()
            }
        })
        .collect();
    (leader.to_string(), members)
}

/// The meta group's reports in `answers` (`(server, JSZ)`).
pub fn meta_reports<'a>(
    answers: impl IntoIterator<Item = (&'a str, &'a Jsz)>,
) -> Vec<(&'a str, &'a MetaClusterInfo)> {
    answers
        .into_iter()
        .filter_map(|(s, j)| Some((s, j.meta_cluster.as_ref()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
