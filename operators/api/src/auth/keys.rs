//! Shapes the auth kinds share: keys and scopes, permissions, account references, and the
//! distribution and revocation records.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::SecretKeyRef;

/// The most signing keys one object may list.
pub const MAX_SIGNING_KEYS: u32 = 16;

/// Seeds to adopt. Omitted, the auth controller generates the keys into Secrets named
/// `<name>-<operator|systemaccount|account>-<identity|signing-1>`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Keys {
    /// The identity key's seed. Its public key is the object's NATS identity and never changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityKey>,
    /// The signing keys' seeds. To rotate, add a key, let everything be re-signed, then remove the
    /// key marked retiring.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub signing: Vec<SigningKey>,
}

/// An identity key's seed, read from a Secret (`key` defaults to `seed`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdentityKey {
    /// The Secret, in the referrer's namespace, and its key holding the seed (`seed` when `key` is
    /// omitted, the key generated Secrets use).
    #[schemars(transform = default_seed_key)]
    pub secret_key_ref: SecretKeyRef,
}

impl IdentityKey {
    /// The Secret key to read, with the default applied.
    pub fn key(&self) -> &str {
        self.secret_key_ref
            .key
            .as_deref()
            .unwrap_or(super::DEFAULT_SEED_KEY)
    }
}

/// A signing key's seed, read from a Secret (`key` defaults to `seed`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SigningKey {
    /// Names the key within the list.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// The Secret, in the referrer's namespace, and its key holding the seed (`seed` when `key` is
    /// omitted, the key generated Secrets use).
    #[schemars(transform = default_seed_key)]
    pub secret_key_ref: SecretKeyRef,
    /// Marks the key for removal: the controller re-signs with another key what this one signed;
    /// removing it afterwards invalidates anything still signed by it.
    #[serde(default)]
    pub retiring: bool,
    /// Makes this an account's scoped signing key: users signed with it get the scope's
    /// permissions and limits, and name it by role. Not allowed on a NATS operator's keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
}

impl SigningKey {
    /// The Secret key to read, with the default applied.
    pub fn key(&self) -> &str {
        self.secret_key_ref
            .key
            .as_deref()
            .unwrap_or(super::DEFAULT_SEED_KEY)
    }
}

/// Writes a default key into a `secretKeyRef` schema, so the apiserver fills it in and
/// `kubectl get -o yaml` shows the key that is read; the description says which.
pub(crate) fn default_secret_key(schema: &mut schemars::Schema, key: &str) {
    if let Some(prop) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("key"))
        .and_then(|k| k.as_object_mut())
    {
        prop.insert("default".into(), key.into());
        prop.insert(
            "description".into(),
            format!("Key within the Secret; `{key}` when omitted.").into(),
        );
    }
}

fn default_seed_key(schema: &mut schemars::Schema) {
    default_secret_key(schema, super::DEFAULT_SEED_KEY);
}

/// The permissions and limits a scoped signing key imposes on every user it signs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    /// The role users name (NatsUser spec.role) to be signed by this key.
    #[schemars(length(min = 1, max = 63))]
    pub role: String,
    /// Publish and subscribe permissions of the scope's users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Permissions>,
    /// The connection types the scope's users may connect with; any when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connection_types: Vec<ConnectionType>,
    /// Limits of the scope's users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<UserLimits>,
}

/// Per-user limits.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserLimits {
    /// The most subscriptions a user may hold; unlimited when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscriptions: Option<i64>,
    /// The largest message a user may publish (e.g. `1Mi`); unlimited when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Quantity>,
}

/// Publish and subscribe permissions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Permissions {
    /// Subjects that may be published to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<SubjectPermissions>,
    /// Subjects that may be subscribed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<SubjectPermissions>,
}

/// Subjects allowed and denied; a deny wins over an allow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubjectPermissions {
    /// Subjects (wildcards allowed) permitted; everything when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Subjects (wildcards allowed) refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

/// A kind of client connection, as NATS user JWTs spell it.
#[allow(clippy::upper_case_acronyms)]
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum ConnectionType {
    /// A client over the NATS protocol.
    #[serde(rename = "STANDARD")]
    Standard,
    /// A client over WebSocket.
    #[serde(rename = "WEBSOCKET")]
    Websocket,
    /// A leaf node.
    #[serde(rename = "LEAFNODE")]
    Leafnode,
    /// A leaf node over WebSocket.
    #[serde(rename = "LEAFNODE_WS")]
    LeafnodeWs,
    /// An MQTT client.
    #[serde(rename = "MQTT")]
    Mqtt,
    /// An MQTT client over WebSocket.
    #[serde(rename = "MQTT_WS")]
    MqttWs,
    /// An in-process client.
    #[serde(rename = "IN_PROCESS")]
    InProcess,
}

/// The kinds that answer an account reference.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(extend("maxLength" = 32))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum AccountKind {
    /// An ordinary account.
    NatsAccount,
    /// A system account.
    NatsSystemAccount,
}

/// A NatsAccount or NatsSystemAccount, by kind and name. Another namespace only through a
/// NatsReferenceGrant there.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountReference {
    /// NatsAccount or NatsSystemAccount.
    pub kind: AccountKind,
    /// Name of the account object.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the account object; the referrer's own when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
}

/// How many servers hold an account's current JWT.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Distribution {
    /// Servers in the STATSZ roster.
    #[serde(default)]
    pub servers: u32,
    /// Servers answering CLAIMS.LOOKUP with the current JWT.
    #[serde(default)]
    pub current: u32,
    /// When the JWT was last pushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_push_time: Option<Time>,
    /// The roster with memory: every server that answered STATSZ when this was counted, and
    /// every server recorded before that has not answered since (`silentSince` set), so a
    /// server that stops answering is counted as down rather than dropped from the roster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub roster: Vec<RosterServer>,
}

/// One server of a distribution's roster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RosterServer {
    /// The server's name (`server_name`), which a restart keeps.
    pub name: String,
    /// Its server id when it last answered; nats-server takes a new one at every start, so a new
    /// id means it restarted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Since when it has not answered STATSZ; unset while it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silent_since: Option<Time>,
}

/// A user key an account JWT revokes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revocation {
    /// The revoked user's public key; `*` revokes every user.
    pub public_key: String,
    /// User JWTs issued at or before this time are revoked.
    pub at: Time,
    /// The account's signing keys when the revocation was recorded, the keys that may have signed
    /// a revoked JWT; the revocation is dropped once none of them remains on the account.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issuers: Vec<String>,
}

/// What to do when signing from spec would drop claims of an adopted account JWT.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum DroppedClaims {
    /// Do not sign; Ready False, reason AdoptionDropsClaims, naming the claims.
    #[default]
    Refuse,
    /// Sign from spec; the claims the spec does not carry are dropped.
    Accept,
}

/// How an account made elsewhere (e.g. with nsc) is taken over.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Adoption {
    /// Whether signing may drop claims the servers' current JWT carries and the spec does not.
    #[serde(default)]
    pub dropped_claims: DroppedClaims,
}
