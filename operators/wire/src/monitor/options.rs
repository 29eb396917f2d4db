//! The options of each monitoring request (monitor.go's `*Options`), each with the server
//! filter every `$SYS.REQ.SERVER.PING` takes flattened in.

use serde::Serialize;

use crate::ServerFilter;

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
