//! `nats.mikluko.io`: the kinds every controller reads — how a NATS cluster is reached
//! (NatsConnection), who may reference what across namespaces (NatsReferenceGrant), and the trust
//! roots a NatsCluster boots from (NatsOperatorTrust, NatsAccountTrust).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{CaBundle, Conditions, Credentials, ObjectReference};

/// The API group of this module's kinds.
pub const GROUP: &str = "nats.mikluko.io";

/// Condition types of this group's kinds.
pub mod condition {
    /// NatsConnection: the connection can be dialled with the credentials it names.
    /// Trust objects: the trust material is present and usable.
    pub const READY: &str = "Ready";
}

/// Condition reasons of this group's kinds.
pub mod reason {
    /// NatsConnection Ready=True: a server answered with the credentials given.
    pub const CONNECTED: &str = "Connected";
    /// NatsConnection Ready=False: the connection was up and has been lost.
    pub const DISCONNECTED: &str = "Disconnected";
    /// NatsConnection Ready=False: the credentials or CA Secret does not exist.
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    /// NatsConnection Ready=False: the Secret exists but the key is missing or not a creds file / PEM bundle.
    pub const INVALID_SECRET: &str = "InvalidSecret";
    /// NatsConnection Ready=False: no server could be dialled, or the handshake was refused.
    pub const CONNECT_FAILED: &str = "ConnectFailed";

    /// Trust objects Ready=True: the spec carries the trust material literally.
    pub const LITERAL: &str = "Literal";
    /// Trust objects Ready=True: the auth controller copied the referenced object's material into status.
    pub const MIRRORED: &str = "Mirrored";
    /// Trust objects Ready=False: the referenced NatsOperator or NatsAccount does not exist.
    pub const REFERENCE_NOT_FOUND: &str = "ReferenceNotFound";
    /// Trust objects Ready=False: no NatsReferenceGrant admits the cross-namespace reference.
    pub const REFERENCE_NOT_PERMITTED: &str = "ReferenceNotPermitted";
    /// Trust objects Ready=False: the referenced object has not been signed yet.
    pub const REFERENCE_NOT_READY: &str = "ReferenceNotReady";
    /// Trust objects Ready=False: a literal JWT does not decode or is not of the expected kind.
    pub const INVALID_JWT: &str = "InvalidJWT";
}

// ---------------------------------------------------------------------------------------------
// NatsConnection

/// How a NATS cluster is reached and as whom: server URLs, the CA that verifies them and the
/// credentials whose account every resource naming this connection acts in. The JetStream
/// controller reaches every NATS cluster, deployed here or not, only through a NatsConnection.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsConnection",
    namespaced,
    status = "NatsConnectionStatus",
    derive = "PartialEq",
    shortname = "natsconn",
    category = "nats",
    doc = "An address and an identity on a NATS cluster, managed here or not: server URLs, the CA verifying them and the credentials deciding the account.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NatsConnectionSpec {
    /// NATS URLs to dial, such as `nats://demo.nats.svc:4222` or `tls://hub.example.com:4222`;
    /// at least one.
    #[x_kube(validation = Rule::new("size(self) >= 1").message("spec.servers must list at least one NATS URL"))]
    #[schemars(length(max = 64), inner(length(min = 1, max = 2048)))]
    pub servers: Vec<String>,
    /// The client side of TLS toward the servers; omitted, the system roots verify `tls://` servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ConnectionTls>,
    /// The creds file the connection authenticates with; it decides the account. Omitted, the
    /// connection lands wherever the server puts an unauthenticated client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<Credentials>,
}

/// The client side of TLS toward NATS servers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionTls {
    /// The CA bundle verifying the servers' certificates; omitted, the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CaBundle>,
}

/// Observed state of a NatsConnection.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsConnectionStatus {
    /// The generation of the spec the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready: Connected, or Disconnected, SecretNotFound, InvalidSecret, ConnectFailed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::common::conditions_schema")]
    pub conditions: Conditions,
}

// ---------------------------------------------------------------------------------------------
// NatsReferenceGrant

/// Admits references into this grant's namespace: objects of the `from` kinds in the `from`
/// namespaces may name objects of the `to` kinds here. Matched exactly and rechecked on every
/// reconcile, so deleting a grant revokes what it admitted.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsReferenceGrant",
    namespaced,
    derive = "PartialEq",
    shortname = "natsgrant",
    category = "nats",
    doc = "Admits references into its own namespace from the namespaces and kinds it lists; deleting it revokes what it admitted.",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NatsReferenceGrantSpec {
    /// The referrers admitted: a kind in a namespace each; at least one.
    #[x_kube(validation = Rule::new("size(self) >= 1").message("spec.from must list at least one referrer (group, kind, namespace)"))]
    #[schemars(length(max = 64))]
    pub from: Vec<ReferenceGrantFrom>,
    /// The objects in this namespace they may reference: a kind, optionally one name; at least one.
    #[x_kube(validation = Rule::new("size(self) >= 1").message("spec.to must list at least one target (group, kind, optional name)"))]
    #[schemars(length(max = 64))]
    pub to: Vec<ReferenceGrantTo>,
}

/// A kind of referrer in one namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrantFrom {
    /// API group of the referrer, matched exactly, such as `cluster.nats.mikluko.io`.
    #[schemars(length(min = 1, max = 253))]
    pub group: String,
    /// Kind of the referrer, matched exactly, such as `NatsCluster`.
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    /// Namespace the referrers live in, matched exactly.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
}

/// A kind of object in the grant's namespace, optionally one object of it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrantTo {
    /// API group of the referenced object, matched exactly, such as `nats.mikluko.io`.
    #[schemars(length(min = 1, max = 253))]
    pub group: String,
    /// Kind of the referenced object, matched exactly, such as `NatsConnection`.
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    /// Name of the one object admitted; omitted, every object of the kind in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// NatsOperatorTrust

/// The trust roots a NatsCluster boots from: the NATS operator JWT and the system account JWT,
/// either by reference to a NatsOperator in this Kubernetes cluster (the auth controller then
/// writes both JWTs into status) or as literal JWTs copied in by GitOps wherever no auth
/// controller runs.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsOperatorTrust",
    namespaced,
    status = "NatsOperatorTrustStatus",
    derive = "PartialEq",
    category = "nats",
    doc = "Trust roots a NatsCluster boots from: a NATS operator JWT and its system account JWT, by reference to a NatsOperator or literally.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.operatorRef) != (has(self.operatorJWT) || has(self.systemAccountJWT))")
        .message("set exactly one of spec.operatorRef and the literal spec.operatorJWT with spec.systemAccountJWT"),
    validation = Rule::new("has(self.operatorJWT) == has(self.systemAccountJWT)")
        .message("spec.operatorJWT and spec.systemAccountJWT are set together or not at all"),
)]
#[serde(rename_all = "camelCase")]
pub struct NatsOperatorTrustSpec {
    /// A NatsOperator in this Kubernetes cluster; the auth controller writes its JWT and its system
    /// account's JWT into this object's status. Exclusive with the literal JWTs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_ref: Option<ObjectReference>,
    /// The NATS operator JWT, literally; set together with systemAccountJWT.
    #[serde(
        rename = "operatorJWT",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 1, max = 65536))]
    pub operator_jwt: Option<String>,
    /// The system account JWT, literally; set together with operatorJWT.
    #[serde(
        rename = "systemAccountJWT",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 1, max = 65536))]
    pub system_account_jwt: Option<String>,
}

/// Observed state of a NatsOperatorTrust.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsOperatorTrustStatus {
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready: Literal or Mirrored, or ReferenceNotFound, ReferenceNotPermitted, ReferenceNotReady, InvalidJWT.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::common::conditions_schema")]
    pub conditions: Conditions,
    /// The referenced NATS operator's JWT, written by the auth controller in the reference form.
    #[serde(
        rename = "operatorJWT",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub operator_jwt: Option<String>,
    /// The referenced NATS operator's system account JWT, written by the auth controller in the
    /// reference form.
    #[serde(
        rename = "systemAccountJWT",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub system_account_jwt: Option<String>,
}

impl NatsOperatorTrust {
    /// The operator and system account JWTs in force: the literal pair from spec, or the pair the
    /// auth controller mirrored into status for the reference form. `None` until both are known.
    pub fn jwts(&self) -> Option<(&str, &str)> {
        if self.spec.operator_ref.is_none() {
            return Some((
                self.spec.operator_jwt.as_deref()?,
                self.spec.system_account_jwt.as_deref()?,
            ));
        }
        let status = self.status.as_ref()?;
        Some((
            status.operator_jwt.as_deref().filter(|s| !s.is_empty())?,
            status
                .system_account_jwt
                .as_deref()
                .filter(|s| !s.is_empty())?,
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// NatsAccountTrust

/// An account a NatsCluster trusts by key: a leaf binds a remote to it, and with a JWT a server
/// preloads it. Either by reference to a NatsAccount in this Kubernetes cluster (the auth
/// controller writes its public key and JWT into status) or by its literal public key and,
/// optionally, a JWT copy.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsAccountTrust",
    namespaced,
    status = "NatsAccountTrustStatus",
    derive = "PartialEq",
    category = "nats",
    doc = "An account a NatsCluster trusts: by reference to a NatsAccount, or by literal public key with an optional JWT a server preloads.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.accountRef) != has(self.publicKey)")
        .message("set exactly one of spec.accountRef and spec.publicKey"),
    validation = Rule::new("!has(self.jwt) || has(self.publicKey)")
        .message("spec.jwt is set only together with spec.publicKey"),
)]
#[serde(rename_all = "camelCase")]
pub struct NatsAccountTrustSpec {
    /// A NatsAccount in this Kubernetes cluster; the auth controller writes its public key and JWT
    /// into this object's status. Exclusive with publicKey.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_ref: Option<ObjectReference>,
    /// The account's public key (an `A…` nkey), literally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub public_key: Option<String>,
    /// A copy of the account JWT a server preloads; only with publicKey. The copy stays valid only
    /// within the account's jwtTTL unless that account signs with `jwtTTL: 0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1048576))]
    pub jwt: Option<String>,
}

/// Observed state of a NatsAccountTrust.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsAccountTrustStatus {
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready: Literal or Mirrored, or ReferenceNotFound, ReferenceNotPermitted, ReferenceNotReady, InvalidJWT.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::common::conditions_schema")]
    pub conditions: Conditions,
    /// The referenced account's public key, written by the auth controller in the reference form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// The referenced account's JWT, written by the auth controller in the reference form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<String>,
}

impl NatsAccountTrust {
    /// The account's public key in force: the literal one from spec, or the one the auth
    /// controller mirrored into status for the reference form.
    pub fn public_key(&self) -> Option<&str> {
        match &self.spec.public_key {
            Some(key) => Some(key),
            None => self
                .status
                .as_ref()?
                .public_key
                .as_deref()
                .filter(|s| !s.is_empty()),
        }
    }

    /// The account JWT a server preloads, if any: the literal copy from spec, or the one mirrored
    /// into status for the reference form.
    pub fn jwt(&self) -> Option<&str> {
        if self.spec.account_ref.is_none() {
            return self.spec.jwt.as_deref();
        }
        self.status
            .as_ref()?
            .jwt
            .as_deref()
            .filter(|s| !s.is_empty())
    }
}

crate::impl_observed_status!(
    NatsConnectionStatus,
    NatsOperatorTrustStatus,
    NatsAccountTrustStatus
);
