//! NatsAccount: an account, its limits, and its exports and imports.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AccountKind, AccountReference, Adoption, Distribution, Keys, Revocation};
use crate::common::{Conditions, ObjectReference, SecretKeyRef};
use crate::jetstream::GoDuration;

pub(crate) fn default_jwt_ttl() -> Option<GoDuration> {
    Some(GoDuration::new(super::DEFAULT_JWT_TTL))
}

/// An account of an auth plane. Its JWT, signed by its NatsOperator, carries its limits,
/// exports, imports and revocations, and expires after jwtTTL.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "auth.nats.mikluko.io",
    version = "v1beta1",
    kind = "NatsAccount",
    namespaced,
    status = "NatsAccountStatus",
    category = "nats",
    category = "nats-auth",
    doc = "A NATS account, its limits, exports and imports, signed by its NatsOperator.",
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
#[x_kube(validation = Rule::new("!has(self.jwtTTL) || self.jwtTTL == '0' || duration(self.jwtTTL) == duration('0s') || duration(self.jwtTTL) >= duration('1m')").message("jwtTTL must be 0 (never expiring) or at least 1m: the JWT is re-signed and pushed to every server at half of it"))]
#[serde(rename_all = "camelCase")]
pub struct NatsAccountSpec {
    /// The NatsOperator that signs this account; another namespace's only through a
    /// NatsReferenceGrant there.
    pub operator_ref: ObjectReference,
    /// Seeds to adopt; omitted, keys are generated into `<name>-account-identity` and
    /// `<name>-account-signing-1`. A signing key with a scope signs the users naming its role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Keys>,
    /// The account's public key, its identity seed kept offline. Exclusive with keys.identity;
    /// requires a signing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 56, max = 56), regex(pattern = "^A[A-Z2-7]{55}$"))]
    pub public_key: Option<String>,
    /// The account JWT's lifetime (Go duration, default `48h`, at least `1m`); it is re-signed
    /// and pushed to every server at half of it. `0` signs a JWT that never expires, as a copy
    /// preloaded by a leaf needs.
    #[serde(
        default = "default_jwt_ttl",
        skip_serializing_if = "Option::is_none",
        rename = "jwtTTL"
    )]
    pub jwt_ttl: Option<GoDuration>,
    /// How an account made elsewhere (e.g. with nsc) is taken over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adoption: Option<Adoption>,
    /// Limits signed into the account JWT; an omitted limit is unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<AccountLimits>,
    /// What other accounts may import from this one (at most 1000).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1000))]
    pub exports: Vec<Export>,
    /// Exports of other accounts this one takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1000))]
    pub imports: Vec<Import>,
}

/// An account's limits.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountLimits {
    /// The most client connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<i64>,
    /// The most subscriptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscriptions: Option<i64>,
    /// The largest message payload (e.g. `1Mi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Quantity>,
    /// Enables JetStream for the account within these limits; JetStream is off when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<JetStreamLimits>,
}

/// An account's JetStream limits, set either for the account as a whole or by tier.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(validation = Rule::new("!has(self.tiers) || size(self.tiers) == 0 || !(has(self.memoryStorage) || has(self.diskStorage) || has(self.streams) || has(self.consumers) || has(self.maxAckPending) || has(self.memoryMaxStreamBytes) || has(self.diskMaxStreamBytes) || has(self.maxBytesRequired))").message("limits.jetstream sets either account-wide limits or tiers, not both"))]
#[serde(rename_all = "camelCase")]
pub struct JetStreamLimits {
    /// The memory store the account may use (e.g. `1Gi`); unlimited when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_storage: Option<Quantity>,
    /// The file store the account may use (e.g. `50Gi`); unlimited when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_storage: Option<Quantity>,
    /// The most streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<i64>,
    /// The most consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumers: Option<i64>,
    /// The highest maxAckPending a consumer may set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ack_pending: Option<i64>,
    /// The highest maxBytes a memory stream may set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max_stream_bytes: Option<Quantity>,
    /// The highest maxBytes a file stream may set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_max_stream_bytes: Option<Quantity>,
    /// Refuse a stream that sets no maxBytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes_required: Option<bool>,
    /// Limits by replica tier, in place of the account-wide limits; nats-server refuses a stream
    /// whose tier is not listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub tiers: Vec<JetStreamTier>,
}

/// A JetStream tier: R followed by the replica count of the streams in it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum TierName {
    /// Streams of one replica.
    R1,
    /// Streams of two replicas.
    R2,
    /// Streams of three replicas.
    R3,
    /// Streams of four replicas.
    R4,
    /// Streams of five replicas.
    R5,
}

/// An account's JetStream limits for one tier.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JetStreamTier {
    /// The tier, R1 to R5.
    pub name: TierName,
    /// The memory store the tier may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_storage: Option<Quantity>,
    /// The file store the tier may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_storage: Option<Quantity>,
    /// The most streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<i64>,
    /// The most consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumers: Option<i64>,
    /// The highest maxAckPending a consumer may set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ack_pending: Option<i64>,
    /// The highest maxBytes a memory stream may set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max_stream_bytes: Option<Quantity>,
    /// The highest maxBytes a file stream may set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_max_stream_bytes: Option<Quantity>,
    /// Refuse a stream that sets no maxBytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes_required: Option<bool>,
}

/// A named set of exports.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 32))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum ExportPreset {
    /// Service exports of `$JS.API.STREAM.LEADER.STEPDOWN.*` and
    /// `$JS.API.CONSUMER.LEADER.STEPDOWN.*.*`, imported into the system account so the system
    /// balancer can move this account's leaders.
    #[serde(rename = "jetstream-stepdown")]
    JetStreamStepdown,
}

/// The type of an export or import.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum ExportType {
    /// Messages published on the subject flow to importers.
    Stream,
    /// Importers send requests on the subject and get responses.
    Service,
}

/// How a service export responds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum ResponseType {
    /// One response (the default).
    Singleton,
    /// Any number of responses.
    Stream,
    /// One response in several messages.
    Chunked,
}

/// Who may import an export.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("maxLength" = 16))]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum ExportAccess {
    /// Any account (the default).
    Public,
    /// Only the listed importers, each with an activation token the controller signs.
    Private,
}

/// One export, or a preset expanding to several.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.preset) ? !(has(self.name) || has(self.type) || has(self.subject) || has(self.responseType) || has(self.access) || has(self.importers)) : (has(self.name) && has(self.type) && has(self.subject))").message("an export sets either preset alone, or name, type and subject"))]
#[x_kube(validation = Rule::new("!has(self.responseType) || (has(self.type) && self.type == 'Service')").message("responseType is set only on an export of type Service"))]
#[x_kube(validation = Rule::new("!has(self.importers) || size(self.importers) == 0 || (has(self.access) && self.access == 'Private')").message("importers are listed only on an export with access Private"))]
#[serde(rename_all = "camelCase")]
pub struct Export {
    /// A preset expanding to a fixed set of exports; exclusive with every other field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<ExportPreset>,
    /// The name imports refer to the export by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,
    /// Stream or Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "type")]
    pub type_: Option<ExportType>,
    /// The subject exported (wildcards allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub subject: Option<String>,
    /// How a Service export responds: Singleton (default), Stream or Chunked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_type: Option<ResponseType>,
    /// Public (default) or Private.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<ExportAccess>,
    /// The accounts admitted to a Private export; the controller signs each an activation token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub importers: Vec<Importer>,
}

/// An account admitted to a Private export: an account object by kind and name, or any account by
/// public key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.publicKey) != (has(self.kind) && has(self.name))").message("an importer is either kind and name (with an optional namespace) or publicKey"))]
#[x_kube(validation = Rule::new("!has(self.publicKey) || !has(self.__namespace__)").message("an importer by publicKey takes no namespace"))]
#[serde(rename_all = "camelCase")]
pub struct Importer {
    /// NatsAccount or NatsSystemAccount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<AccountKind>,
    /// Name of the importing account object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,
    /// Namespace of the importing account object; this account's when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
    /// The importing account's public key, for an account no object here describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 56, max = 56), regex(pattern = "^A[A-Z2-7]{55}$"))]
    pub public_key: Option<String>,
}

/// An activation token read from a Secret, for an import of an account outside this NATS operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Activation {
    /// The Secret, in this account's namespace, and its key holding the activation JWT
    /// (`activation.jwt` when `key` is omitted).
    #[schemars(transform = default_activation_key)]
    pub secret_key_ref: SecretKeyRef,
}

/// The Secret key an import's activation token is read from when `key` is omitted.
pub const DEFAULT_ACTIVATION_KEY: &str = "activation.jwt";

fn default_activation_key(schema: &mut schemars::Schema) {
    super::keys::default_secret_key(schema, DEFAULT_ACTIVATION_KEY);
}

impl Activation {
    /// The Secret key to read, with the default applied.
    pub fn key(&self) -> &str {
        self.secret_key_ref
            .key
            .as_deref()
            .unwrap_or(DEFAULT_ACTIVATION_KEY)
    }
}

/// An import of another account's export. An import names an export, not a subject: with
/// accountRef the subject, type and response type come from the exporting account.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.accountRef) != has(self.publicKey)").message("an import names its exporting account by exactly one of accountRef and publicKey"))]
#[x_kube(validation = Rule::new("has(self.publicKey) || !(has(self.subject) || has(self.type))").message("subject and type are set only on an import by publicKey; with accountRef they come from the export"))]
#[x_kube(validation = Rule::new("!has(self.publicKey) || (has(self.subject) && has(self.type))").message("an import by publicKey needs subject and type"))]
#[x_kube(validation = Rule::new("has(self.publicKey) || !has(self.activation)").message("activation is set only on an import by publicKey; with accountRef the controller signs it"))]
#[x_kube(validation = Rule::new("!has(self.share) || !has(self.type) || self.type == 'Service'").message("share is set only on an import of type Service"))]
#[x_kube(validation = Rule::new("!has(self.allowTrace) || !has(self.type) || self.type == 'Stream'").message("allowTrace is set only on an import of type Stream"))]
#[serde(rename_all = "camelCase")]
pub struct Import {
    /// The exporting NatsAccount or NatsSystemAccount; another namespace's only through a
    /// NatsReferenceGrant there, and only one under this account's NatsOperator: an account of
    /// another NatsOperator is refused at reconcile (Ready False, ImportsUnresolved) and left out
    /// of the JWT, since CEL cannot read the other object's operatorRef. Exclusive with publicKey.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_ref: Option<AccountReference>,
    /// The exporting account's public key, for an account no object here describes (made
    /// elsewhere under this account's NatsOperator: the servers resolve it or not). A key a
    /// NatsAccount or NatsSystemAccount of another NatsOperator records is refused at reconcile
    /// (Ready False, ImportsUnresolved). Exclusive with accountRef; needs subject and type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 56, max = 56), regex(pattern = "^A[A-Z2-7]{55}$"))]
    pub public_key: Option<String>,
    /// The name of the export taken.
    #[schemars(length(min = 1, max = 253))]
    pub export: String,
    /// The exported subject, for an import by publicKey.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub subject: Option<String>,
    /// The export's type, for an import by publicKey.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "type")]
    pub type_: Option<ExportType>,
    /// The activation token of a private export, for an import by publicKey.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation: Option<Activation>,
    /// Where the import appears in this account; the exported subject when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub local_subject: Option<String>,
    /// Share this account's connection details with the exporter (Service imports only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<bool>,
    /// Let message traces cross into this account (Stream imports only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_trace: Option<bool>,
}

/// How an import's activation token was obtained.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(transform = crate::jetstream::drop_type_description)]
pub enum ActivationSource {
    /// The controller signed it for an importer listed on the export.
    Signed,
    /// It was supplied through the import's activation Secret.
    Supplied,
}

/// An import as resolved and signed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportState {
    /// The export taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<String>,
    /// The exported subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Where the import appears in this account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_subject: Option<String>,
    /// Stream or Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "type")]
    pub type_: Option<ExportType>,
    /// How the activation token of a private export was obtained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation: Option<ActivationSource>,
}

/// An activation token this account signed for an importer of one of its private exports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivationToken {
    /// The export the token admits to.
    pub export: String,
    /// The importer as listed: `<kind>/<namespace>/<name>` or its public key.
    pub importer: String,
    /// The importing account's public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// The activation JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// The observed state of an account.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsAccountStatus {
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
    /// The current account JWT; emptied once the account is no longer admitted to its NatsOperator
    /// and that NatsOperator records its deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<String>,
    /// Identifies the current JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt_hash: Option<String>,
    /// How many servers hold the current JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<Distribution>,
    /// The user keys the JWT revokes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revocations: Vec<Revocation>,
    /// The imports as resolved and signed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<ImportState>,
    /// Activation tokens signed for the importers of this account's private exports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub activations: Vec<ActivationToken>,
}
