//! JetStream as one server sees it: the JetStream block of VARZ and STATSZ, and JSZ — the meta
//! group and its peers, accounts, streams with their Raft groups, placement and state, consumers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The JetStream block of VARZ and STATSZ.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct JetStreamVarz {
    pub config: Option<JetStreamConfig>,
    pub meta: Option<MetaClusterInfo>,
    pub stats: Option<JetStreamStats>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct JetStreamConfig {
    pub max_memory: i64,
    pub max_storage: i64,
    pub store_dir: String,
    pub domain: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct JetStreamStats {
    pub memory: u64,
    pub storage: u64,
    pub accounts: i64,
    pub ha_assets: i64,
}

/// The meta group as one server sees it (monitor.go MetaClusterInfo). `replicas` lists the peers
/// other than the leader, and only the leader fills it reliably.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct MetaClusterInfo {
    pub name: String,
    /// Server name of the meta leader.
    pub leader: String,
    /// Peer id of the meta leader.
    pub peer: String,
    pub replicas: Vec<PeerInfo>,
    pub cluster_size: i64,
    pub pending: i64,
}

/// A Raft peer (stream.go PeerInfo).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct PeerInfo {
    pub name: String,
    pub current: bool,
    pub offline: bool,
    /// Nanoseconds since last seen.
    pub active: i64,
    pub lag: u64,
    pub peer: String,
}

/// JSZ (monitor.go JSInfo).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Jsz {
    pub server_id: String,
    pub disabled: bool,
    pub config: JetStreamConfig,
    pub memory: u64,
    pub storage: u64,
    pub streams: i64,
    pub streams_leader: i64,
    pub consumers: i64,
    pub consumers_leader: i64,
    pub messages: u64,
    pub bytes: u64,
    pub meta_cluster: Option<MetaClusterInfo>,
    pub account_details: Vec<AccountDetail>,
    pub total: i64,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AccountDetail {
    pub name: String,
    pub id: String,
    #[serde(rename = "stream_detail")]
    pub streams: Vec<StreamDetail>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct StreamDetail {
    pub name: String,
    pub cluster: Option<ClusterInfo>,
    pub config: Option<StreamConfigView>,
    pub state: StreamState,
    #[serde(rename = "stream_raft_group")]
    pub raft_group: String,
    #[serde(rename = "consumer_detail")]
    pub consumers: Vec<ConsumerDetail>,
}

/// A stream's or consumer's Raft group (stream.go ClusterInfo).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClusterInfo {
    /// The NATS cluster the group is placed in.
    pub name: String,
    pub raft_group: String,
    pub leader: String,
    pub replicas: Vec<PeerInfo>,
}

impl ClusterInfo {
    /// Leader and replicas: every server the group is on, leader first.
    pub fn members(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.leader.is_empty() {
            out.push(self.leader.clone());
        }
        out.extend(self.replicas.iter().map(|p| p.name.clone()));
        out
    }
}

/// The parts of a StreamConfig the controllers read from JSZ.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct StreamConfigView {
    pub name: String,
    pub num_replicas: i64,
    pub placement: Option<Placement>,
    pub metadata: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct Placement {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub preferred: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct StreamState {
    pub messages: u64,
    pub bytes: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    pub consumer_count: i64,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConsumerDetail {
    pub name: String,
    pub stream_name: String,
    pub cluster: Option<ClusterInfo>,
}
