//! NatsUser: a user of a NatsAccount or NatsSystemAccount.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AccountReference, ConnectionType, Permissions};
use crate::common::{Conditions, Credentials};

/// A named permission set.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(extend("maxLength" = 32))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum UserPreset {
    /// What the cluster controller requests over the system account (NatsSystemAccount users only).
    #[serde(rename = "cluster-controller")]
    ClusterController,
    /// What the JetStream controller requests over the system account (NatsSystemAccount users only).
    #[serde(rename = "jetstream-controller")]
    JetStreamController,
    /// What the auth controller requests: claims updates, the CONNZ ping and KICK
    /// (NatsSystemAccount users only).
    #[serde(rename = "auth-controller")]
    AuthController,
    /// Subscribe to anything, publish only replies (NatsAccount users only).
    #[serde(rename = "readonly")]
    Readonly,
    /// What a leaf node's remote connection needs (NatsAccount users only).
    #[serde(rename = "leafnode")]
    Leafnode,
}

impl UserPreset {
    /// The spelling in spec.preset.
    pub fn as_str(self) -> &'static str {
        match self {
            UserPreset::ClusterController => "cluster-controller",
            UserPreset::JetStreamController => "jetstream-controller",
            UserPreset::AuthController => "auth-controller",
            UserPreset::Readonly => "readonly",
            UserPreset::Leafnode => "leafnode",
        }
    }

    /// Whether the preset is for a system account user (a controller preset).
    pub fn is_system(self) -> bool {
        matches!(
            self,
            UserPreset::ClusterController
                | UserPreset::JetStreamController
                | UserPreset::AuthController
        )
    }

    /// The inbox prefix a controller preset subscribes under: `_INBOX.<preset>`.
    pub fn inbox_prefix(self) -> Option<String> {
        self.is_system()
            .then(|| format!("_INBOX.{}", self.as_str()))
    }
}

/// A user of an account. Its JWT is signed by the account's signing key (the scoped one its role
/// names, if any); its creds go to credentials.secretKeyRef, or, with publicKey, only its JWT
/// is published in status.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "auth.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsUser",
    namespaced,
    status = "NatsUserStatus",
    category = "nats",
    category = "nats-auth",
    doc = "A user of a NatsAccount or NatsSystemAccount.",
    printcolumn(
        name = "Account",
        type_ = "string",
        json_path = ".spec.accountRef.name"
    ),
    printcolumn(name = "Preset", type_ = "string", json_path = ".spec.preset"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Public Key",
        type_ = "string",
        json_path = ".status.publicKey",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("!(has(self.publicKey) && has(self.credentials))").message("set at most one of publicKey (the client holds the seed) and credentials (the controller writes creds)"))]
#[x_kube(validation = Rule::new("!(has(self.preset) && has(self.permissions))").message("set at most one of preset and permissions"))]
#[x_kube(validation = Rule::new("!has(self.role) || !(has(self.permissions) || (has(self.connectionTypes) && size(self.connectionTypes) > 0) || has(self.preset))").message("role takes its permissions and connection types from the scoped signing key: leave permissions, connectionTypes and preset unset"))]
#[x_kube(validation = Rule::new("!has(self.preset) || !(self.preset in ['cluster-controller', 'jetstream-controller', 'auth-controller']) || self.accountRef.kind == 'NatsSystemAccount'").message("presets cluster-controller, jetstream-controller and auth-controller need accountRef.kind NatsSystemAccount"))]
#[x_kube(validation = Rule::new("!has(self.preset) || !(self.preset in ['readonly', 'leafnode']) || self.accountRef.kind == 'NatsAccount'").message("presets readonly and leafnode need accountRef.kind NatsAccount"))]
#[serde(rename_all = "camelCase")]
pub struct NatsUserSpec {
    /// The account the user belongs to. Cannot change.
    #[x_kube(validation = Rule::new("self == oldSelf").message("accountRef cannot change"))]
    pub account_ref: AccountReference,
    /// Publish and subscribe permissions. Exclusive with preset and role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Permissions>,
    /// A named permission set in place of permissions: cluster-controller, jetstream-controller and
    /// auth-controller for system account users; readonly and leafnode for account users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<UserPreset>,
    /// The connection types the user may connect with; any when empty. Exclusive with role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 7))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub connection_types: Vec<ConnectionType>,
    /// The role of a scoped signing key of the account: the user is signed by that key and gets its
    /// scope. Exclusive with permissions, connectionTypes and preset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub role: Option<String>,
    /// The user's public key, its seed held by the client; only the signed JWT is published, in
    /// status. Exclusive with credentials. May change: the key it replaces is revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 56, max = 56), regex(pattern = "^U[A-Z2-7]{55}$"))]
    pub public_key: Option<String>,
    /// Where the controller writes the user's creds file (`key` defaults to `user.creds`), in the
    /// shape a NatsConnection reads. Exclusive with publicKey.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<Credentials>,
}

/// A key the user held before, revoked from when it was replaced.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplacedKey {
    /// The replaced public key.
    pub public_key: String,
    /// When it was replaced; its JWTs issued up to then are revoked.
    pub at: Time,
}

/// The observed state of a user.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsUserStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, ReferencesResolved and Distributed (of the revocations a key change needs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Conditions,
    /// The user's public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// The user JWT, published for a user that brings its own key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<String>,
    /// Keys the user held before, kept until the account JWT revokes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced_keys: Vec<ReplacedKey>,
    /// When the grant that admitted this user to an account in another namespace was found
    /// withdrawn (§7): its key is revoked in the account JWT from then on, and its connections
    /// kicked. Cleared once a grant admits it again and a fresh JWT, issued after this time, is
    /// signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawn_at: Option<Time>,
}
