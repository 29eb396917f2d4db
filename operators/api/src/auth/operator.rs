//! NatsOperator: a NATS operator the auth controller signs accounts for.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Keys, Revocation};
use crate::common::{Conditions, ObjectReference};

/// A NATS operator: the trust root of an auth plane. Its signing key signs every account JWT,
/// the system account's included.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "auth.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsOperator",
    namespaced,
    status = "NatsOperatorStatus",
    category = "nats",
    category = "nats-auth",
    doc = "A NATS operator whose signing key signs the accounts of an auth plane.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "System Account",
        type_ = "string",
        json_path = ".spec.systemAccountRef.name"
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
#[x_kube(validation = Rule::new("!has(self.jwt) || !has(self.keys) || !has(self.keys.identity)").message("set at most one of jwt (an identity kept offline) and keys.identity"))]
#[x_kube(validation = Rule::new("!has(self.jwt) || (has(self.keys) && has(self.keys.signing) && size(self.keys.signing) > 0)").message("jwt (an identity kept offline) requires at least one signing key in keys.signing"))]
#[x_kube(validation = Rule::new("!has(self.keys) || !has(self.keys.signing) || self.keys.signing.all(k, !has(k.scope))").message("keys.signing of a NATS operator takes no scope: scopes belong to account signing keys"))]
#[serde(rename_all = "camelCase")]
pub struct NatsOperatorSpec {
    /// Seeds to adopt; omitted, keys are generated into `<name>-operator-identity` and
    /// `<name>-operator-signing-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Keys>,
    /// A NATS operator JWT signed elsewhere, keeping the identity key offline. Exclusive with
    /// keys.identity; requires a signing key, which the JWT must list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 65536))]
    pub jwt: Option<String>,
    /// The NatsSystemAccount the operator JWT names as its system account; other
    /// NatsSystemAccounts under this NatsOperator are not signed.
    pub system_account_ref: ObjectReference,
}

/// The Secrets holding generated seeds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeedSecrets {
    /// The identity seed's Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The signing seeds' Secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signing: Vec<String>,
}

/// The system account the operator JWT names, as signed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SystemAccountState {
    /// The NatsSystemAccount spec.systemAccountRef resolves to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The system account's public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// The system account JWT (no expiry), as servers preload it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<String>,
    /// The user keys the system account JWT revokes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revocations: Vec<Revocation>,
}

/// An account deleted from the resolvers while a server may still hold a valid JWT for it; the
/// delete is re-sent to every server that rejoins until that JWT would have expired.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletedAccount {
    /// The account's public key.
    pub public_key: String,
    /// When its last JWT expires; never when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<Time>,
}

/// The observed state of a NATS operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsOperatorStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, ReferencesResolved, RetiringKeysInUse and RevocationsUnrecovered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Conditions,
    /// The identity's public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// The signing keys' public keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signing_keys: Vec<String>,
    /// The Secrets holding generated seeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_secrets: Option<SeedSecrets>,
    /// The operator JWT servers trust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<String>,
    /// The system account as signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_account: Option<SystemAccountState>,
    /// Accounts deleted while a server may still hold a valid JWT for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted_accounts: Vec<DeletedAccount>,
}
