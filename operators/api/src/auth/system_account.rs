//! NatsSystemAccount: a NATS system account, a kind of its own so RBAC can keep it to the platform team.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::{Adoption, Distribution, Keys, Revocation};
use crate::common::{Conditions, ObjectReference};

/// A NATS system account. Only the one its NatsOperator's systemAccountRef names is signed.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "auth.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsSystemAccount",
    namespaced,
    status = "NatsSystemAccountStatus",
    category = "nats",
    category = "nats-auth",
    doc = "A NATS system account, signed by its NatsOperator.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Distributed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Distributed\")].status"
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
#[x_kube(validation = Rule::new("!has(self.publicKey) || !has(self.keys) || !has(self.keys.identity)").message("set at most one of publicKey (an identity kept offline) and keys.identity"))]
#[x_kube(validation = Rule::new("!has(self.publicKey) || (has(self.keys) && has(self.keys.signing) && size(self.keys.signing) > 0)").message("publicKey (an identity kept offline) requires at least one signing key in keys.signing"))]
#[serde(rename_all = "camelCase")]
pub struct NatsSystemAccountSpec {
    /// The NatsOperator that signs this account.
    pub operator_ref: ObjectReference,
    /// Seeds to adopt; omitted, keys are generated into `<name>-systemaccount-identity` and
    /// `<name>-systemaccount-signing-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Keys>,
    /// The account's public key, its identity seed kept offline. Exclusive with keys.identity;
    /// requires a signing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 56, max = 56), regex(pattern = "^A[A-Z2-7]{55}$"))]
    pub public_key: Option<String>,
    /// How a system account made elsewhere is taken over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adoption: Option<Adoption>,
}

/// The observed state of a system account.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsSystemAccountStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, ReferencesResolved, Distributed, RetiringKeysInUse, RevocationsUnrecovered and
    /// SigningKeyUntrusted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Conditions,
    /// The account's public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// Identifies the current JWT (held in the NatsOperator's status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt_hash: Option<String>,
    /// How many servers hold the current JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<Distribution>,
    /// The user keys the JWT revokes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revocations: Vec<Revocation>,
}
