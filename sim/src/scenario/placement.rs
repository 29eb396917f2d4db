//! Where servers and streams are, as the steps need it: the `meta-follower:<cluster>` selector
//! (a server of a cluster that does not lead the meta group) and `wait_streams_settled` (every
//! stream led in one cluster with exactly its replicas, all current: no move under way), read
//! from the servers with STREAM.INFO.

use std::time::Duration;

use async_nats::jetstream;
use futures::TryStreamExt;

use super::deployed::Done;
use crate::backend::Deployment;

/// The first server of `cluster` (named `<cluster>-<n>`, as a sim topology names them) other
/// than the meta leader `leader`.
pub(super) fn meta_follower(
    servers: &[String],
    cluster: &str,
    leader: &str,
) -> Result<String, String> {
    let prefix = format!("{cluster}-");
    servers
        .iter()
        .find(|s| s.starts_with(&prefix) && *s != leader)
        .cloned()
        .ok_or_else(|| format!("no server of {cluster} other than the meta leader {leader}"))
}

/// One stream's placement as STREAM.INFO tells it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StreamPlacement {
    pub(super) name: String,
    /// The replicas its config asks for.
    pub(super) replicas: usize,
    /// The NATS cluster of its leader.
    pub(super) cluster: Option<String>,
    pub(super) leader: Option<String>,
    /// Every other peer: its name and whether it is current (and online).
    pub(super) peers: Vec<(String, bool)>,
}

impl StreamPlacement {
    fn of(info: &jetstream::stream::Info) -> Self {
        let c = info.cluster.as_ref();
        StreamPlacement {
            name: info.config.name.clone(),
            replicas: info.config.num_replicas.max(1),
            cluster: c.and_then(|c| c.name.clone()),
            leader: c.and_then(|c| c.leader.clone()),
            peers: c
                .map(|c| {
                    c.replicas
                        .iter()
                        .map(|p| (p.name.clone(), p.current && !p.offline))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Whether it is settled in `cluster`: led there, with exactly its replicas (a group being
    /// moved has more: the new peers beside the old), each current. Why not, otherwise.
    pub(super) fn settled_in(&self, cluster: &str) -> Result<(), String> {
        let name = &self.name;
        let Some(leader) = &self.leader else {
            return Err(format!("{name} has no leader"));
        };
        if self.cluster.as_deref() != Some(cluster) {
            return Err(format!(
                "{name} is led by {leader} in {}",
                self.cluster.as_deref().unwrap_or("no cluster")
            ));
        }
        let members = self.peers.len() + 1;
        if members != self.replicas {
            let peers: Vec<&str> = self.peers.iter().map(|(p, _)| p.as_str()).collect();
            return Err(format!(
                "{name} has {members} peers for {} replicas (leader {leader}, {})",
                self.replicas,
                peers.join(", ")
            ));
        }
        let behind: Vec<&str> = self
            .peers
            .iter()
            .filter(|(_, current)| !current)
            .map(|(p, _)| p.as_str())
            .collect();
        if !behind.is_empty() {
            return Err(format!("{name}: {} not current", behind.join(", ")));
        }
        Ok(())
    }
}

/// `wait_streams_settled`: until every stream of the workload's account (or each of `only`)
/// is settled in `cluster` ([`StreamPlacement::settled_in`]); the last text says which is not
/// and why.
pub(super) async fn wait_streams_settled(
    dep: &dyn Deployment,
    cluster: &str,
    only: &[String],
    timeout: Duration,
) -> Result<Done, String> {
    let addrs: Vec<async_nats::ServerAddr> = dep
        .client_urls()
        .iter()
        .filter_map(|u| u.parse().ok())
        .collect();
    let client = async_nats::ConnectOptions::new()
        .connect(addrs)
        .await
        .map_err(|e| format!("connecting to read the streams: {e}"))?;
    let js = jetstream::new(client);
    let names = crate::wait::poll(
        &format!("every stream settled in {cluster}"),
        timeout,
        || async {
            let infos: Vec<jetstream::stream::Info> = js
                .streams()
                .try_collect()
                .await
                .map_err(|e| format!("listing the streams: {e}"))?;
            let placements: Vec<StreamPlacement> = infos
                .iter()
                .map(StreamPlacement::of)
                .filter(|p| only.is_empty() || only.contains(&p.name))
                .collect();
            let missing: Vec<&str> = only
                .iter()
                .filter(|n| placements.iter().all(|p| p.name != **n))
                .map(String::as_str)
                .collect();
            if placements.is_empty() || !missing.is_empty() {
                return Err(format!("no stream {}", missing.join(", ")));
            }
            let unsettled: Vec<String> = placements
                .iter()
                .filter_map(|p| p.settled_in(cluster).err())
                .collect();
            if unsettled.is_empty() {
                let mut names: Vec<String> = placements.into_iter().map(|p| p.name).collect();
                names.sort();
                Ok(Some(names))
            } else {
                Err(unsettled.join("; "))
            }
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(Done {
        target: Some(format!("{} settled in {cluster}", names.join(", "))),
        ..Done::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_follower_is_a_server_of_the_cluster_other_than_the_meta_leader() {
        let servers: Vec<String> = ["c1-0", "c1-1", "c1-2", "c2-0", "c10-0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let cases: &[(&str, &str, Result<&str, ()>)] = &[
            ("c1", "c2-0", Ok("c1-0")),
            ("c1", "c1-0", Ok("c1-1")),
            ("c2", "c1-0", Ok("c2-0")),
            ("c2", "c2-0", Err(())),
            ("c10", "c1-0", Ok("c10-0")),
            ("c3", "c1-0", Err(())),
        ];
        for (cluster, leader, want) in cases {
            let got = meta_follower(&servers, cluster, leader);
            assert_eq!(
                got.as_deref().map_err(|_| ()),
                want.as_ref().copied().map_err(|_| ()),
                "{cluster} with leader {leader}: {got:?}"
            );
        }
    }

    #[test]
    fn a_stream_is_settled_led_in_the_cluster_with_exactly_its_replicas_all_current() {
        let p =
            |cluster: Option<&str>, leader: Option<&str>, peers: &[(&str, bool)]| StreamPlacement {
                name: "ORDERS".into(),
                replicas: 3,
                cluster: cluster.map(str::to_string),
                leader: leader.map(str::to_string),
                peers: peers.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
            };
        let three = [("c2-1", true), ("c2-2", true)];
        let moving = [
            ("c2-1", true),
            ("c2-2", true),
            ("c1-0", false),
            ("c1-1", false),
            ("c1-2", false),
        ];
        let cases: &[(StreamPlacement, &str, Option<&str>)] = &[
            (p(Some("c2"), Some("c2-0"), &three), "c2", None),
            (p(Some("c2"), Some("c2-0"), &three), "c1", Some("in c2")),
            (p(Some("c2"), Some("c2-0"), &moving), "c2", Some("6 peers")),
            (
                p(Some("c2"), Some("c2-0"), &[("c2-1", true), ("c2-2", false)]),
                "c2",
                Some("c2-2 not current"),
            ),
            (
                p(Some("c2"), Some("c2-0"), &[("c2-1", true)]),
                "c2",
                Some("2 peers"),
            ),
            (p(None, None, &three), "c2", Some("no leader")),
        ];
        for (placement, cluster, why) in cases {
            match (placement.settled_in(cluster), why) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.contains(w), "{e} should say {w}"),
                (got, want) => panic!("{placement:?} in {cluster}: {got:?}, want {want:?}"),
            }
        }
    }
}
