//! The monitoring requests over the system account: STATSZ, VARZ, JSZ, CONNZ, LEAFZ, GATEWAYZ,
//! HEALTHZ, each as a ping every server answers (`$SYS.REQ.SERVER.PING.<X>`, events.go) and as a
//! request to one server by id (`$SYS.REQ.SERVER.<id>.<X>`). Field names follow monitor.go.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::request::json_body;
use crate::{Collect, PingReplies, Reply, ServerFilter, Wire, WireError};

/// `$SYS.REQ.SERVER.PING.<kind>`.
pub fn ping_subject(kind: &str) -> String {
    format!("$SYS.REQ.SERVER.PING.{kind}")
}

/// `$SYS.REQ.SERVER.<id>.<kind>`.
pub fn server_subject(server_id: &str, kind: &str) -> String {
    format!("$SYS.REQ.SERVER.{server_id}.{kind}")
}

// ---------------------------------------------------------------------------------------------
// Request options

/// VARZ and STATSZ take only the server filter.
pub type VarzOptions = ServerFilter;
pub type StatszOptions = ServerFilter;

/// JSZ options (monitor.go JSzOptions) plus the server filter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JszOptions {
    #[serde(flatten)]
    pub filter: ServerFilter,
    /// Only this account's details.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    /// Include per-account details.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub accounts: bool,
    /// Include per-stream details (implies accounts).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub streams: bool,
    /// Include consumer details.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub consumer: bool,
    /// Include stream configs.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub config: bool,
    /// Only the meta leader answers.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub leader_only: bool,
    /// Include Raft group names.
    #[serde(rename = "raft", skip_serializing_if = "std::ops::Not::not")]
    pub raft_groups: bool,
    /// Only stream leaders report their streams.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stream_leader_only: bool,
    #[serde(skip_serializing_if = "is_zero")]
    pub offset: usize,
    #[serde(skip_serializing_if = "is_zero")]
    pub limit: usize,
}

/// CONNZ options (monitor.go ConnzOptions) plus the server filter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ConnzOptions {
    #[serde(flatten)]
    pub filter: ServerFilter,
    /// Only connections bound to this account (name, or public key in operator mode).
    #[serde(rename = "acc", skip_serializing_if = "String::is_empty")]
    pub account: String,
    /// Only connections authenticated as this user (name, or user public key in operator mode).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    /// Include the authorized user and account of each connection.
    #[serde(rename = "auth", skip_serializing_if = "std::ops::Not::not")]
    pub username: bool,
    /// Include each connection's subscriptions.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub subscriptions: bool,
    /// Only connections with interest in this subject (needs `account`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub filter_subject: String,
    /// One connection by its client id.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub cid: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub offset: usize,
    #[serde(skip_serializing_if = "is_zero")]
    pub limit: usize,
}

impl ConnzOptions {
    /// The connections of one user of one account, with the user shown: what a deleted user's
    /// kick looks for (monitor.go filters by account, then user).
    pub fn user_of_account(account: &str, user: &str) -> Self {
        ConnzOptions {
            account: account.to_string(),
            user: user.to_string(),
            username: true,
            ..Default::default()
        }
    }
}

/// LEAFZ options plus the server filter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LeafzOptions {
    #[serde(flatten)]
    pub filter: ServerFilter,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub subscriptions: bool,
}

/// GATEWAYZ options plus the server filter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GatewayzOptions {
    #[serde(flatten)]
    pub filter: ServerFilter,
    /// Only the remote gateway of this name.
    #[serde(rename = "name", skip_serializing_if = "String::is_empty")]
    pub gateway_name: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub accounts: bool,
}

/// HEALTHZ options (monitor.go HealthzOptions) plus the server filter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HealthzOptions {
    #[serde(flatten)]
    pub filter: ServerFilter,
    #[serde(rename = "js-enabled-only", skip_serializing_if = "std::ops::Not::not")]
    pub js_enabled_only: bool,
    #[serde(rename = "js-server-only", skip_serializing_if = "std::ops::Not::not")]
    pub js_server_only: bool,
    #[serde(rename = "js-meta-only", skip_serializing_if = "std::ops::Not::not")]
    pub js_meta_only: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stream: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub consumer: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub details: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

// ---------------------------------------------------------------------------------------------
// Responses

/// STATSZ (events.go ServerStats).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Statsz {
    pub start: Option<DateTime<Utc>>,
    pub mem: i64,
    pub cores: i64,
    pub cpu: f64,
    pub connections: i64,
    pub total_connections: u64,
    pub active_accounts: i64,
    #[serde(rename = "subscriptions")]
    pub num_subs: u64,
    pub slow_consumers: i64,
    pub routes: Vec<RouteStat>,
    pub gateways: Vec<GatewayStat>,
    /// How many servers this server knows of in the whole system (supercluster and leafs).
    pub active_servers: i64,
    pub jetstream: Option<JetStreamVarz>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct RouteStat {
    #[serde(rename = "rid")]
    pub id: u64,
    pub name: String,
    pub pending: i64,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct GatewayStat {
    #[serde(rename = "gwid")]
    pub id: u64,
    pub name: String,
    #[serde(rename = "inbound_connections")]
    pub num_inbound: i64,
}

/// VARZ (monitor.go Varz): identity, config digest and load time (how a reload is confirmed),
/// listener settings and counts.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Varz {
    pub server_id: String,
    pub server_name: String,
    pub version: String,
    pub host: String,
    pub port: u16,
    pub max_payload: i64,
    pub max_connections: i64,
    pub connections: i64,
    pub routes: i64,
    pub remotes: i64,
    pub leafnodes: i64,
    pub start: Option<DateTime<Utc>>,
    pub config_load_time: Option<DateTime<Utc>>,
    /// sha256 of the parsed config, as `nats-server -t -c FILE` prints it.
    pub config_digest: String,
    pub tags: Vec<String>,
    pub system_account: String,
    /// NotAfter of the certificate the client listener loaded (absent without TLS).
    pub tls_cert_not_after: Option<DateTime<Utc>>,
    pub cluster: ClusterOptsVarz,
    pub gateway: GatewayOptsVarz,
    pub leaf: LeafNodeOptsVarz,
    pub jetstream: JetStreamVarz,
}

impl Varz {
    /// NotAfter of the certificate each TLS listener loaded, by listener (`client`, `routes`,
    /// `gateway`, `leafnodes`): which certificate a server serves, since a reload loads the
    /// files again without moving `config_digest`.
    pub fn loaded_certificates(&self) -> BTreeMap<String, DateTime<Utc>> {
        [
            ("client", self.tls_cert_not_after),
            ("routes", self.cluster.tls_cert_not_after),
            ("gateway", self.gateway.tls_cert_not_after),
            ("leafnodes", self.leaf.tls_cert_not_after),
        ]
        .into_iter()
        .filter_map(|(l, t)| Some((l.to_string(), t?)))
        .collect()
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClusterOptsVarz {
    pub name: String,
    #[serde(rename = "addr")]
    pub host: String,
    pub cluster_port: u16,
    pub urls: Vec<String>,
    pub tls_cert_not_after: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct GatewayOptsVarz {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub reject_unknown: bool,
    pub tls_cert_not_after: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LeafNodeOptsVarz {
    pub host: String,
    pub port: u16,
    pub tls_cert_not_after: Option<DateTime<Utc>>,
}

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

/// CONNZ (monitor.go Connz).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Connz {
    pub server_id: String,
    pub num_connections: i64,
    pub total: i64,
    pub offset: i64,
    pub limit: i64,
    pub connections: Vec<ConnInfo>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConnInfo {
    /// The client id KICK takes.
    pub cid: u64,
    pub kind: String,
    #[serde(rename = "type")]
    pub conn_type: String,
    pub ip: String,
    pub port: u16,
    pub name: String,
    pub lang: String,
    pub version: String,
    pub authorized_user: String,
    pub account: String,
    pub subscriptions: u64,
    pub subscriptions_list: Vec<String>,
}

/// LEAFZ (monitor.go Leafz).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Leafz {
    pub server_id: String,
    #[serde(rename = "leafnodes")]
    pub num_leafs: i64,
    pub leafs: Vec<LeafInfo>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LeafInfo {
    pub id: u64,
    /// The remote server's name.
    pub name: String,
    /// True on the hub side of a link that the remote (spoke) solicited.
    pub is_spoke: bool,
    /// The local account the link binds.
    pub account: String,
    pub ip: String,
    pub port: u16,
    pub rtt: String,
}

/// GATEWAYZ (monitor.go Gatewayz).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Gatewayz {
    pub server_id: String,
    /// This server's own gateway (NATS cluster) name.
    pub name: String,
    pub host: String,
    pub port: u16,
    pub outbound_gateways: BTreeMap<String, RemoteGatewayz>,
    pub inbound_gateways: BTreeMap<String, Vec<RemoteGatewayz>>,
}

impl Gatewayz {
    /// Remote gateway names with an established outbound connection.
    pub fn connected_outbound(&self) -> Vec<String> {
        self.outbound_gateways
            .iter()
            .filter(|(_, r)| r.connection.is_some())
            .map(|(n, _)| n.clone())
            .collect()
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct RemoteGatewayz {
    pub configured: bool,
    pub connection: Option<ConnInfo>,
}

/// HEALTHZ (monitor.go HealthStatus).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Healthz {
    /// `ok` when healthy.
    pub status: String,
    pub status_code: i64,
    pub error: String,
    pub errors: Vec<HealthzError>,
}

impl Healthz {
    pub fn is_ok(&self) -> bool {
        self.status == "ok"
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct HealthzError {
    #[serde(rename = "type")]
    pub kind: serde_json::Value,
    pub account: String,
    pub stream: String,
    pub consumer: String,
    pub error: String,
}

// ---------------------------------------------------------------------------------------------
// Requests

impl Wire {
    async fn ping_kind<T: DeserializeOwned, O: Serialize>(
        &self,
        kind: &str,
        options: &O,
        collect: Collect,
    ) -> Result<PingReplies<T>, WireError> {
        self.ping(&ping_subject(kind), json_body(options), collect)
            .await
    }

    async fn one_server<T: DeserializeOwned, O: Serialize>(
        &self,
        server_id: &str,
        kind: &str,
        options: &O,
    ) -> Result<Reply<T>, WireError> {
        let subject = server_subject(server_id, kind);
        let reply = self
            .sys_request::<T>(&subject, json_body(options), server_id)
            .await?;
        match reply.data {
            Some(data) => Ok(Reply {
                server: reply.server,
                data,
            }),
            None => Err(WireError::Refused {
                request: subject,
                server: reply.server.label(),
                code: 0,
                description: "answer without data".to_string(),
            }),
        }
    }

    /// `$SYS.REQ.SERVER.PING.STATSZ`: the roster of servers and their stats.
    pub async fn ping_statsz(
        &self,
        filter: &ServerFilter,
        collect: Collect,
    ) -> Result<PingReplies<Statsz>, WireError> {
        self.ping_kind("STATSZ", filter, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.STATSZ`.
    pub async fn statsz(&self, server_id: &str) -> Result<Reply<Statsz>, WireError> {
        self.one_server(server_id, "STATSZ", &ServerFilter::all())
            .await
    }

    /// `$SYS.REQ.SERVER.PING.VARZ`.
    pub async fn ping_varz(
        &self,
        filter: &ServerFilter,
        collect: Collect,
    ) -> Result<PingReplies<Varz>, WireError> {
        self.ping_kind("VARZ", filter, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.VARZ`.
    pub async fn varz(&self, server_id: &str) -> Result<Reply<Varz>, WireError> {
        self.one_server(server_id, "VARZ", &ServerFilter::all())
            .await
    }

    /// `$SYS.REQ.SERVER.PING.JSZ`.
    pub async fn ping_jsz(
        &self,
        options: &JszOptions,
        collect: Collect,
    ) -> Result<PingReplies<Jsz>, WireError> {
        self.ping_kind("JSZ", options, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.JSZ`.
    pub async fn jsz(
        &self,
        server_id: &str,
        options: &JszOptions,
    ) -> Result<Reply<Jsz>, WireError> {
        self.one_server(server_id, "JSZ", options).await
    }

    /// `$SYS.REQ.SERVER.PING.CONNZ`, filtered by account and user as the options say.
    pub async fn ping_connz(
        &self,
        options: &ConnzOptions,
        collect: Collect,
    ) -> Result<PingReplies<Connz>, WireError> {
        self.ping_kind("CONNZ", options, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.CONNZ`.
    pub async fn connz(
        &self,
        server_id: &str,
        options: &ConnzOptions,
    ) -> Result<Reply<Connz>, WireError> {
        self.one_server(server_id, "CONNZ", options).await
    }

    /// `$SYS.REQ.SERVER.PING.LEAFZ`.
    pub async fn ping_leafz(
        &self,
        options: &LeafzOptions,
        collect: Collect,
    ) -> Result<PingReplies<Leafz>, WireError> {
        self.ping_kind("LEAFZ", options, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.LEAFZ`.
    pub async fn leafz(
        &self,
        server_id: &str,
        options: &LeafzOptions,
    ) -> Result<Reply<Leafz>, WireError> {
        self.one_server(server_id, "LEAFZ", options).await
    }

    /// `$SYS.REQ.SERVER.PING.GATEWAYZ`.
    pub async fn ping_gatewayz(
        &self,
        options: &GatewayzOptions,
        collect: Collect,
    ) -> Result<PingReplies<Gatewayz>, WireError> {
        self.ping_kind("GATEWAYZ", options, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.GATEWAYZ`.
    pub async fn gatewayz(
        &self,
        server_id: &str,
        options: &GatewayzOptions,
    ) -> Result<Reply<Gatewayz>, WireError> {
        self.one_server(server_id, "GATEWAYZ", options).await
    }

    /// `$SYS.REQ.SERVER.PING.HEALTHZ`.
    pub async fn ping_healthz(
        &self,
        options: &HealthzOptions,
        collect: Collect,
    ) -> Result<PingReplies<Healthz>, WireError> {
        self.ping_kind("HEALTHZ", options, collect).await
    }

    /// `$SYS.REQ.SERVER.<id>.HEALTHZ`.
    pub async fn healthz(
        &self,
        server_id: &str,
        options: &HealthzOptions,
    ) -> Result<Reply<Healthz>, WireError> {
        self.one_server(server_id, "HEALTHZ", options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn connz_user_filter_body() {
        let v = serde_json::to_value(ConnzOptions::user_of_account("ACC", "UKEY")).unwrap();
        assert_eq!(v, json!({"acc": "ACC", "user": "UKEY", "auth": true}));
    }

    #[test]
    fn jsz_options_flatten_the_filter() {
        let o = JszOptions {
            filter: ServerFilter::cluster("east"),
            accounts: true,
            streams: true,
            ..Default::default()
        };
        let v = serde_json::to_value(o).unwrap();
        assert_eq!(
            v,
            json!({"cluster": "east", "exact_match": true, "accounts": true, "streams": true})
        );
    }

    #[test]
    fn healthz_option_names_are_hyphenated() {
        let o = HealthzOptions {
            js_server_only: true,
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(o).unwrap(),
            json!({"js-server-only": true})
        );
    }

    #[test]
    fn jsz_decodes_meta_and_streams() {
        let j: Jsz = serde_json::from_value(json!({
            "server_id": "N1", "now": "2026-01-01T00:00:00Z", "streams": 1, "consumers": 0,
            "meta_cluster": {"name": "c", "leader": "s1", "peer": "p1", "cluster_size": 3,
                "replicas": [{"name": "s2", "current": true, "active": 1000, "peer": "p2"}]},
            "account_details": [{"name": "APP", "id": "APP", "stream_detail": [
                {"name": "ORDERS", "cluster": {"name": "c", "leader": "s1",
                  "replicas": [{"name": "s2", "current": true, "active": 5, "peer": "p2"}]},
                 "state": {"messages": 3, "bytes": 10, "first_seq": 1, "last_seq": 3, "consumer_count": 0}}]}]
        }))
        .unwrap();
        let meta = j.meta_cluster.unwrap();
        assert_eq!(meta.leader, "s1");
        assert_eq!(meta.replicas[0].name, "s2");
        let s = &j.account_details[0].streams[0];
        assert_eq!(s.cluster.as_ref().unwrap().members(), vec!["s1", "s2"]);
        assert_eq!(s.state.messages, 3);
    }

    #[test]
    fn varz_reads_digest_and_load_time() {
        let v: Varz = serde_json::from_value(json!({
            "server_id": "N1", "server_name": "s1", "config_digest": "sha256:abc",
            "config_load_time": "2026-11-29T20:00:00.123456789Z", "jetstream": {}, "unknown": 1
        }))
        .unwrap();
        assert_eq!(v.config_digest, "sha256:abc");
        assert!(v.config_load_time.is_some());
    }

    #[test]
    fn varz_reads_the_certificate_each_listener_loaded() {
        // As nats-server 2.15.1 answers with TLS on the gateway and leafnode listeners only.
        let v: Varz = serde_json::from_value(json!({
            "server_name": "s1",
            "cluster": {"addr": "0.0.0.0", "cluster_port": 0},
            "gateway": {"name": "g", "port": 7222, "tls_cert_not_after": "2027-02-28T05:26:24Z"},
            "leaf": {"port": 7422, "tls_cert_not_after": "2027-03-01T00:00:00Z"}
        }))
        .unwrap();
        let loaded = v.loaded_certificates();
        assert_eq!(
            loaded.keys().map(String::as_str).collect::<Vec<_>>(),
            vec!["gateway", "leafnodes"]
        );
        assert_eq!(loaded["gateway"].to_rfc3339(), "2027-02-28T05:26:24+00:00");
        let all: Varz = serde_json::from_value(json!({
            "tls_cert_not_after": "2027-01-01T00:00:00Z",
            "cluster": {"tls_cert_not_after": "2027-01-02T00:00:00Z"}
        }))
        .unwrap();
        assert_eq!(
            all.loaded_certificates()
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            vec!["client", "routes"]
        );
    }

    #[test]
    fn subjects() {
        assert_eq!(ping_subject("JSZ"), "$SYS.REQ.SERVER.PING.JSZ");
        assert_eq!(server_subject("NID", "VARZ"), "$SYS.REQ.SERVER.NID.VARZ");
    }
}
