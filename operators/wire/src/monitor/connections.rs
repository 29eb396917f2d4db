//! A server's connections: CONNZ (clients), LEAFZ (leaf nodes), GATEWAYZ (gateways).

use std::collections::BTreeMap;

use serde::Deserialize;

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
