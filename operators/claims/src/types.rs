//! The field groups the claims share, shaped exactly like nats-io/jwt v2's Go structs:
//! the same JSON names, the same field order, and Go's `omitempty` (a zero value is absent,
//! an absent value is zero). Structs that Go always writes (`pub`, `sub`, `limits`, ...)
//! are always written here too, so a payload encodes byte-for-byte as the Go library's.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub(crate) fn is_zero(v: &i64) -> bool {
    *v == 0
}

pub(crate) fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

pub(crate) fn is_zero_u8(v: &u8) -> bool {
    *v == 0
}

pub(crate) fn is_false(v: &bool) -> bool {
    !*v
}

/// Go's `NoLimit`.
pub const NO_LIMIT: i64 = -1;

/// The revocation key that revokes every user (or activation) issued at or before its time.
pub const REVOKE_ALL: &str = "*";

/// Public key → unix seconds; JWTs issued at or before that second are revoked.
pub type RevocationList = BTreeMap<String, i64>;

/// Allow and deny subject lists. A subscribe entry may carry a queue group after a space.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Permission {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

impl Permission {
    pub fn allow<I, S>(subjects: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Permission {
            allow: subjects.into_iter().map(Into::into).collect(),
            deny: Vec::new(),
        }
    }

    pub fn deny<I, S>(subjects: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Permission {
            allow: Vec::new(),
            deny: subjects.into_iter().map(Into::into).collect(),
        }
    }

    pub fn and_deny<I, S>(mut self, subjects: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.deny.extend(subjects.into_iter().map(Into::into));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

/// Lets a user publish to reply subjects of messages it received, `max` replies within `ttl`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResponsePermission {
    pub max: i64,
    /// Nanoseconds (a Go `time.Duration`).
    pub ttl: i64,
}

impl ResponsePermission {
    pub fn new(max: i64, ttl: std::time::Duration) -> Self {
        ResponsePermission {
            max,
            ttl: duration_nanos(ttl),
        }
    }
}

pub(crate) fn duration_nanos(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Permissions {
    #[serde(rename = "pub")]
    pub publish: Permission,
    #[serde(rename = "sub")]
    pub subscribe: Permission,
    #[serde(rename = "resp", skip_serializing_if = "Option::is_none")]
    pub response: Option<ResponsePermission>,
}

impl Permissions {
    pub fn is_empty(&self) -> bool {
        self.publish.is_empty() && self.subscribe.is_empty() && self.response.is_none()
    }
}

/// A daily window in the server's local time (or `times_location`), "HH:MM:SS".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TimeRange {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub start: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub end: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NatsLimits {
    #[serde(skip_serializing_if = "is_zero")]
    pub subs: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub data: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub payload: i64,
}

impl Default for NatsLimits {
    /// Zero, as Go's zero value: a decoded JWT without these fields has them zero.
    fn default() -> Self {
        NatsLimits {
            subs: 0,
            data: 0,
            payload: 0,
        }
    }
}

impl NatsLimits {
    pub fn unlimited() -> Self {
        NatsLimits {
            subs: NO_LIMIT,
            data: NO_LIMIT,
            payload: NO_LIMIT,
        }
    }
}

/// User limits: source networks, time windows and the NATS limits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// CIDRs the user may connect from. Decodes from a list or a comma-separated string, as Go does.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "deserialize_cidr_list"
    )]
    pub src: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub times: Vec<TimeRange>,
    #[serde(rename = "times_location", skip_serializing_if = "String::is_empty")]
    pub locale: String,
    #[serde(flatten)]
    pub nats: NatsLimits,
}

fn deserialize_cidr_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrString {
        List(Vec<String>),
        Joined(String),
    }
    Ok(match ListOrString::deserialize(d)? {
        ListOrString::List(list) => list,
        // Go's CIDRList.Set: lower-case, split on commas, trim, drop empties and duplicates.
        ListOrString::Joined(joined) => {
            let mut out: Vec<String> = Vec::new();
            for part in joined.to_lowercase().split(',') {
                let part = part.trim().to_string();
                if !part.is_empty() && !out.contains(&part) {
                    out.push(part);
                }
            }
            out
        }
    })
}

/// Connection types a user may be restricted to (`allowed_connection_types`).
pub mod connection_type {
    pub const STANDARD: &str = "STANDARD";
    pub const WEBSOCKET: &str = "WEBSOCKET";
    pub const LEAFNODE: &str = "LEAFNODE";
    pub const LEAFNODE_WS: &str = "LEAFNODE_WS";
    pub const MQTT: &str = "MQTT";
    pub const MQTT_WS: &str = "MQTT_WS";
    pub const IN_PROCESS: &str = "IN_PROCESS";
}

/// What a user may do: the body of a user JWT and the template of a scoped signing key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserPermissionLimits {
    #[serde(flatten)]
    pub permissions: Permissions,
    #[serde(flatten)]
    pub limits: Limits,
    #[serde(rename = "bearer_token", skip_serializing_if = "is_false")]
    pub bearer: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub proxy_required: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_connection_types: Vec<String>,
}

impl UserPermissionLimits {
    /// Go's `NewUserClaims` defaults: no permissions, unlimited subs, data and payload.
    pub fn unlimited() -> Self {
        UserPermissionLimits {
            limits: Limits {
                nats: NatsLimits::unlimited(),
                ..Limits::default()
            },
            ..Self::default()
        }
    }

    /// True for the zero value, which is what a user signed by a scoped key must carry.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AccountLimits {
    #[serde(skip_serializing_if = "is_zero")]
    pub imports: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub exports: i64,
    #[serde(rename = "wildcards", skip_serializing_if = "is_false")]
    pub wildcard_exports: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub disallow_bearer: bool,
    #[serde(skip_serializing_if = "is_zero")]
    pub conn: i64,
    #[serde(rename = "leaf", skip_serializing_if = "is_zero")]
    pub leaf_node_conn: i64,
}

impl AccountLimits {
    pub fn unlimited() -> Self {
        AccountLimits {
            imports: NO_LIMIT,
            exports: NO_LIMIT,
            wildcard_exports: true,
            disallow_bearer: false,
            conn: NO_LIMIT,
            leaf_node_conn: NO_LIMIT,
        }
    }
}

/// JetStream limits; all zero means JetStream is disabled for the account.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct JetStreamLimits {
    #[serde(rename = "mem_storage", skip_serializing_if = "is_zero")]
    pub memory_storage: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub disk_storage: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub streams: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub consumer: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub max_ack_pending: i64,
    #[serde(rename = "mem_max_stream_bytes", skip_serializing_if = "is_zero")]
    pub memory_max_stream_bytes: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub disk_max_stream_bytes: i64,
    #[serde(skip_serializing_if = "is_false")]
    pub max_bytes_required: bool,
}

impl JetStreamLimits {
    pub fn is_enabled(&self) -> bool {
        self.memory_storage != 0 || self.disk_storage != 0
    }
}

/// The limits an operator places on an account.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OperatorLimits {
    #[serde(flatten)]
    pub nats: NatsLimits,
    #[serde(flatten)]
    pub account: AccountLimits,
    #[serde(flatten)]
    pub jetstream: JetStreamLimits,
    /// Per replication tier ("R1", "R3"); exclusive with `jetstream`.
    #[serde(rename = "tiered_limits", skip_serializing_if = "BTreeMap::is_empty")]
    pub jetstream_tiers: BTreeMap<String, JetStreamLimits>,
}

impl OperatorLimits {
    /// Go's `NewAccountClaims` defaults: everything unlimited, JetStream disabled.
    pub fn unlimited() -> Self {
        OperatorLimits {
            nats: NatsLimits::unlimited(),
            account: AccountLimits::unlimited(),
            jetstream: JetStreamLimits::default(),
            jetstream_tiers: BTreeMap::new(),
        }
    }

    pub fn is_jetstream_enabled(&self) -> bool {
        if self.jetstream_tiers.is_empty() {
            self.jetstream.is_enabled()
        } else {
            self.jetstream_tiers
                .values()
                .any(JetStreamLimits::is_enabled)
        }
    }
}

/// Stream or service, the two kinds of export, import and activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportType {
    Stream,
    Service,
}

/// How many responses a service request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseType {
    Singleton,
    Stream,
    Chunked,
}

/// Latency sampling of a service export: trace headers, or a percentage 1..=100.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    Headers,
    Percent(u8),
}

impl Serialize for Sampling {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Sampling::Headers => s.serialize_str("headers"),
            Sampling::Percent(p) if (1..=100).contains(&p) => s.serialize_u8(p),
            Sampling::Percent(p) => Err(serde::ser::Error::custom(format!(
                "sampling percentage {p} is outside 1..=100"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for Sampling {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Text(t) if t.eq_ignore_ascii_case("headers") => Ok(Sampling::Headers),
            // Go stores 0 as the headers mode.
            Raw::Number(0) => Ok(Sampling::Headers),
            Raw::Number(n) if (1..=100).contains(&n) => Ok(Sampling::Percent(n as u8)),
            Raw::Number(n) => Err(serde::de::Error::custom(format!(
                "sampling percentage {n} is outside 1..=100"
            ))),
            Raw::Text(t) => Err(serde::de::Error::custom(format!(
                "sampling {t:?} is neither \"headers\" nor a percentage"
            ))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceLatency {
    pub sampling: Sampling,
    /// Subject the latency results are published to.
    pub results: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Export {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub export_type: Option<ExportType>,
    /// A private export: importers need an activation token.
    #[serde(skip_serializing_if = "is_false")]
    pub token_req: bool,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub revocations: RevocationList,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_type: Option<ResponseType>,
    /// Nanoseconds (a Go `time.Duration`).
    #[serde(skip_serializing_if = "is_zero")]
    pub response_threshold: i64,
    #[serde(rename = "service_latency", skip_serializing_if = "Option::is_none")]
    pub latency: Option<ServiceLatency>,
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub account_token_position: u64,
    #[serde(skip_serializing_if = "is_false")]
    pub advertise: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub allow_trace: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub info_url: String,
}

impl Export {
    pub fn stream(subject: impl Into<String>) -> Self {
        Export {
            subject: subject.into(),
            export_type: Some(ExportType::Stream),
            ..Export::default()
        }
    }

    pub fn service(subject: impl Into<String>) -> Self {
        Export {
            subject: subject.into(),
            export_type: Some(ExportType::Service),
            ..Export::default()
        }
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Private: importers need an activation token.
    pub fn token_required(mut self) -> Self {
        self.token_req = true;
        self
    }

    pub fn response_type(mut self, response_type: ResponseType) -> Self {
        self.response_type = Some(response_type);
        self
    }

    pub fn response_threshold(mut self, threshold: std::time::Duration) -> Self {
        self.response_threshold = duration_nanos(threshold);
        self
    }

    pub fn latency(mut self, sampling: Sampling, results: impl Into<String>) -> Self {
        self.latency = Some(ServiceLatency {
            sampling,
            results: results.into(),
        });
        self
    }

    /// Revokes the activation tokens issued to `account` at or before `at` (unix seconds).
    pub fn revoke_at(mut self, account: impl Into<String>, at: i64) -> Self {
        revoke_at(&mut self.revocations, account.into(), at);
        self
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Import {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The exporter's subject.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subject: String,
    /// The exporting account's public key.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    /// Activation token (a JWT) for a private export.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// Deprecated by `local_subject`; kept so old JWTs decode whole.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub to: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub local_subject: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub import_type: Option<ExportType>,
    #[serde(skip_serializing_if = "is_false")]
    pub share: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub allow_trace: bool,
}

impl Import {
    pub fn stream(account: impl Into<String>, subject: impl Into<String>) -> Self {
        Import {
            subject: subject.into(),
            account: account.into(),
            import_type: Some(ExportType::Stream),
            ..Import::default()
        }
    }

    pub fn service(account: impl Into<String>, subject: impl Into<String>) -> Self {
        Import {
            subject: subject.into(),
            account: account.into(),
            import_type: Some(ExportType::Service),
            ..Import::default()
        }
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    pub fn local_subject(mut self, subject: impl Into<String>) -> Self {
        self.local_subject = subject.into();
        self
    }

    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = token.into();
        self
    }
}

/// A weighted destination of a subject mapping.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WeightedMapping {
    pub subject: String,
    #[serde(skip_serializing_if = "is_zero_u8")]
    pub weight: u8,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
}

/// External (callout) authorization of an account.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExternalAuthorization {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auth_users: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_accounts: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub xkey: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MsgTrace {
    #[serde(rename = "dest", skip_serializing_if = "String::is_empty")]
    pub destination: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub sampling: i64,
}

/// Go's `RevocationList.Revoke`: a later time wins, an earlier one never lowers it.
pub(crate) fn revoke_at(list: &mut RevocationList, key: String, at: i64) {
    let entry = list.entry(key).or_insert(at);
    if *entry < at {
        *entry = at;
    }
}

/// Go's `RevocationList.IsRevoked` for a JWT of `key` issued at `issued_at`.
pub fn is_revoked(list: &RevocationList, key: &str, issued_at: i64) -> bool {
    let all = list.get(REVOKE_ALL).is_some_and(|ts| *ts >= issued_at);
    all || list.get(key).is_some_and(|ts| *ts >= issued_at)
}
