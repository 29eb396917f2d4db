//! What a server says of itself: STATSZ (its stats and routes/gateways), VARZ (identity,
//! config digest and load time, listener settings) and HEALTHZ.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::jsz::JetStreamVarz;

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
