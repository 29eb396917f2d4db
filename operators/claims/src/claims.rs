//! The JWT envelope and the four claim bodies: operator, account, user, activation.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use crate::keys::KeyKind;
use crate::types::*;

/// The version of the claims format this crate reads and writes.
pub const CLAIMS_VERSION: i64 = 2;

/// A NATS JWT's claims: the registered JWT fields and the `nats` body.
/// Field order is Go's, which is what `jti` hashes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Claims<N> {
    #[serde(rename = "aud", skip_serializing_if = "String::is_empty")]
    pub audience: String,
    /// Unix seconds; 0 means the JWT never expires.
    #[serde(rename = "exp", skip_serializing_if = "is_zero")]
    pub expires: i64,
    /// Set when encoding: see [`crate::jwt::claims_hash`].
    #[serde(rename = "jti", skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Set when encoding.
    #[serde(rename = "iat", skip_serializing_if = "is_zero")]
    pub issued_at: i64,
    /// Set when encoding to the signing key's public key.
    #[serde(rename = "iss", skip_serializing_if = "String::is_empty")]
    pub issuer: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(rename = "nbf", skip_serializing_if = "is_zero")]
    pub not_before: i64,
    #[serde(rename = "sub", skip_serializing_if = "String::is_empty")]
    pub subject: String,
    pub nats: N,
}

/// What each claim body declares about itself.
pub trait ClaimBody: Serialize + DeserializeOwned + Clone + PartialEq + Default {
    /// The `nats.type` value.
    const TYPE: &'static str;
    /// The role the subject key must have.
    const SUBJECT_KIND: KeyKind;
    /// The roles the issuer key may have (Go's `ExpectedPrefixes`).
    const ISSUER_KINDS: &'static [KeyKind];

    /// Sets `type` and `version` (and anything Go normalizes) before encoding.
    fn prepare_encode(&mut self);
    /// The `type`/`version` recorded in the body.
    fn generic(&self) -> (&str, i64);
    /// Go's decode-time normalization (e.g. tiered limits clear the flat JetStream limits).
    fn normalize_decoded(&mut self) {}
    /// The `issuer_account` a scoped signing key sets, if the body has one.
    fn issuer_account(&self) -> Option<&str> {
        None
    }
}

impl<N: ClaimBody> Claims<N> {
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Expires at `at` (unix seconds); 0 means never.
    pub fn expires(mut self, at: i64) -> Self {
        self.expires = at;
        self
    }

    pub fn not_before(mut self, at: i64) -> Self {
        self.not_before = at;
        self
    }

    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = audience.into();
        self
    }
}

fn push_unique(list: &mut Vec<String>, value: String) {
    if !value.is_empty() && !list.contains(&value) {
        list.push(value);
    }
}

/// Go's `TagList.Add`: trimmed, lower-cased, unique.
fn add_tag(tags: &mut Vec<String>, tag: &str) {
    push_unique(tags, tag.trim().to_lowercase());
}

// ---------------------------------------------------------------- operator

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Operator {
    /// Operator signing keys allowed to sign account JWTs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signing_keys: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account_server_url: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub operator_service_urls: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub system_account: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub assert_server_version: String,
    /// Accounts must be signed by a signing key, never the operator identity.
    #[serde(rename = "strict_signing_key_usage", skip_serializing_if = "is_false")]
    pub strict_signing: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub claim_type: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub version: i64,
}

impl ClaimBody for Operator {
    const TYPE: &'static str = "operator";
    const SUBJECT_KIND: KeyKind = KeyKind::Operator;
    const ISSUER_KINDS: &'static [KeyKind] = &[KeyKind::Operator];

    fn prepare_encode(&mut self) {
        self.claim_type = Self::TYPE.into();
        self.version = CLAIMS_VERSION;
    }

    fn generic(&self) -> (&str, i64) {
        (&self.claim_type, self.version)
    }
}

pub type OperatorClaims = Claims<Operator>;

impl OperatorClaims {
    /// Operator claims for `operator` (its public key), self-signed when encoded with its key.
    pub fn new(operator: impl Into<String>) -> Self {
        Claims {
            subject: operator.into(),
            ..Claims::default()
        }
    }

    pub fn signing_key(mut self, key: impl Into<String>) -> Self {
        push_unique(&mut self.nats.signing_keys, key.into());
        self
    }

    pub fn system_account(mut self, account: impl Into<String>) -> Self {
        self.nats.system_account = account.into();
        self
    }

    pub fn account_server_url(mut self, url: impl Into<String>) -> Self {
        self.nats.account_server_url = url.into();
        self
    }

    pub fn operator_service_url(mut self, url: impl Into<String>) -> Self {
        push_unique(&mut self.nats.operator_service_urls, url.into());
        self
    }

    pub fn strict_signing(mut self, strict: bool) -> Self {
        self.nats.strict_signing = strict;
        self
    }

    pub fn tag(mut self, tag: &str) -> Self {
        add_tag(&mut self.nats.tags, tag);
        self
    }

    /// Go's `OperatorClaims.DidSign`: the identity signs anything (only itself when strict),
    /// a signing key signs what it is listed for.
    pub fn did_sign(&self, issuer: &str, subject: &str) -> bool {
        if issuer == self.subject {
            return !self.nats.strict_signing || subject == self.subject;
        }
        self.nats.signing_keys.iter().any(|k| k == issuer)
    }
}

// ---------------------------------------------------------------- account

/// A scoped signing key: users it signs get `template` and must carry no permissions themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserScope {
    /// Always `"user_scope"`.
    pub kind: String,
    pub key: String,
    pub role: String,
    /// Missing `subs`/`data`/`payload` decode as -1 (Go's `NewUserScope` defaults).
    #[serde(
        deserialize_with = "deserialize_scope_template",
        default = "scope_template_default"
    )]
    pub template: UserPermissionLimits,
    /// Go writes it even when empty.
    pub description: String,
}

pub const USER_SCOPE: &str = "user_scope";

impl UserScope {
    pub fn new(
        key: impl Into<String>,
        role: impl Into<String>,
        template: UserPermissionLimits,
    ) -> Self {
        UserScope {
            kind: USER_SCOPE.into(),
            key: key.into(),
            role: role.into(),
            template,
            description: String::new(),
        }
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
}

fn scope_template_default() -> UserPermissionLimits {
    UserPermissionLimits::unlimited()
}

fn deserialize_scope_template<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<UserPermissionLimits, D::Error> {
    let mut value = serde_json::Value::deserialize(d)?;
    if let Some(obj) = value.as_object_mut() {
        for field in ["subs", "data", "payload"] {
            obj.entry(field)
                .or_insert(serde_json::Value::from(NO_LIMIT));
        }
    }
    serde_json::from_value(value).map_err(serde::de::Error::custom)
}

/// Account signing keys: plain (`None`) or scoped. Encoded sorted by key, as Go does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SigningKeys(pub BTreeMap<String, Option<UserScope>>);

impl SigningKeys {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    pub fn scope(&self, key: &str) -> Option<&UserScope> {
        self.0.get(key).and_then(Option::as_ref)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

impl Serialize for SigningKeys {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Entry<'a> {
            Plain(&'a str),
            Scoped(&'a UserScope),
        }
        s.collect_seq(self.0.iter().map(|(k, scope)| match scope {
            Some(scope) => Entry::Scoped(scope),
            None => Entry::Plain(k),
        }))
    }
}

impl<'de> Deserialize<'de> for SigningKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let items = Vec::<serde_json::Value>::deserialize(d)?;
        let mut keys = BTreeMap::new();
        for item in items {
            match item {
                serde_json::Value::String(k) => {
                    keys.insert(k, None);
                }
                serde_json::Value::Object(ref obj) => {
                    let kind = obj.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
                    if kind != USER_SCOPE {
                        return Err(serde::de::Error::custom(format!(
                            "unknown signing key scope {kind:?}"
                        )));
                    }
                    let scope: UserScope =
                        serde_json::from_value(item).map_err(serde::de::Error::custom)?;
                    keys.insert(scope.key.clone(), Some(scope));
                }
                // Go skips entries that are neither a key nor a scope.
                _ => {}
            }
        }
        Ok(SigningKeys(keys))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Account {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<Import>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<Export>,
    pub limits: OperatorLimits,
    #[serde(skip_serializing_if = "SigningKeys::is_empty")]
    pub signing_keys: SigningKeys,
    /// User public key → unix seconds: users issued at or before it are revoked.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub revocations: RevocationList,
    pub default_permissions: Permissions,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mappings: BTreeMap<String, Vec<WeightedMapping>>,
    pub authorization: ExternalAuthorization,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<MsgTrace>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster_traffic: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub info_url: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub claim_type: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub version: i64,
}

impl ClaimBody for Account {
    const TYPE: &'static str = "account";
    const SUBJECT_KIND: KeyKind = KeyKind::Account;
    const ISSUER_KINDS: &'static [KeyKind] = &[KeyKind::Account, KeyKind::Operator];

    fn prepare_encode(&mut self) {
        self.claim_type = Self::TYPE.into();
        self.version = CLAIMS_VERSION;
        // Go sorts exports and imports by subject before encoding (stable for equal subjects).
        self.exports.sort_by(|a, b| a.subject.cmp(&b.subject));
        self.imports.sort_by(|a, b| a.subject.cmp(&b.subject));
    }

    fn generic(&self) -> (&str, i64) {
        (&self.claim_type, self.version)
    }

    fn normalize_decoded(&mut self) {
        if !self.limits.jetstream_tiers.is_empty() {
            self.limits.jetstream = JetStreamLimits::default();
        }
    }
}

pub type AccountClaims = Claims<Account>;

impl AccountClaims {
    /// Account claims for `account` with Go's `NewAccountClaims` defaults (unlimited, no JetStream).
    pub fn new(account: impl Into<String>) -> Self {
        Claims {
            subject: account.into(),
            nats: Account {
                limits: OperatorLimits::unlimited(),
                ..Account::default()
            },
            ..Claims::default()
        }
    }

    pub fn limits(mut self, limits: OperatorLimits) -> Self {
        self.nats.limits = limits;
        self
    }

    pub fn jetstream(mut self, limits: JetStreamLimits) -> Self {
        self.nats.limits.jetstream = limits;
        self.nats.limits.jetstream_tiers.clear();
        self
    }

    /// A replication tier ("R1", "R3"); tiers replace the flat JetStream limits.
    pub fn jetstream_tier(mut self, tier: impl Into<String>, limits: JetStreamLimits) -> Self {
        self.nats.limits.jetstream = JetStreamLimits::default();
        self.nats.limits.jetstream_tiers.insert(tier.into(), limits);
        self
    }

    pub fn export(mut self, export: Export) -> Self {
        self.nats.exports.push(export);
        self
    }

    pub fn import(mut self, import: Import) -> Self {
        self.nats.imports.push(import);
        self
    }

    pub fn signing_key(mut self, key: impl Into<String>) -> Self {
        self.nats.signing_keys.0.insert(key.into(), None);
        self
    }

    pub fn scoped_signing_key(mut self, scope: UserScope) -> Self {
        self.nats
            .signing_keys
            .0
            .insert(scope.key.clone(), Some(scope));
        self
    }

    /// Revokes the user JWTs of `user` (or every user, with [`REVOKE_ALL`]) issued at or before `at`.
    pub fn revoke_at(mut self, user: impl Into<String>, at: i64) -> Self {
        revoke_at(&mut self.nats.revocations, user.into(), at);
        self
    }

    pub fn default_permissions(mut self, permissions: Permissions) -> Self {
        self.nats.default_permissions = permissions;
        self
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.nats.description = description.into();
        self
    }

    pub fn tag(mut self, tag: &str) -> Self {
        add_tag(&mut self.nats.tags, tag);
        self
    }

    /// Go's `AccountClaims.DidSign` for a user or activation: the account identity, or one of
    /// its signing keys when `issuer_account` names this account.
    pub fn did_sign(&self, issuer: &str, issuer_account: &str) -> bool {
        issuer == self.subject
            || (issuer_account == self.subject && self.nats.signing_keys.contains(issuer))
    }

    /// Whether a user JWT of `user` issued at `issued_at` is revoked by this account.
    pub fn is_user_revoked(&self, user: &str, issued_at: i64) -> bool {
        is_revoked(&self.nats.revocations, user, issued_at)
    }
}

// ---------------------------------------------------------------- user

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct User {
    #[serde(flatten)]
    pub permission_limits: UserPermissionLimits,
    /// The account, when a signing key of it (not its identity) issued this user.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issuer_account: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub claim_type: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub version: i64,
}

impl ClaimBody for User {
    const TYPE: &'static str = "user";
    const SUBJECT_KIND: KeyKind = KeyKind::User;
    const ISSUER_KINDS: &'static [KeyKind] = &[KeyKind::Account];

    fn prepare_encode(&mut self) {
        self.claim_type = Self::TYPE.into();
        self.version = CLAIMS_VERSION;
    }

    fn generic(&self) -> (&str, i64) {
        (&self.claim_type, self.version)
    }

    fn issuer_account(&self) -> Option<&str> {
        Some(&self.issuer_account)
    }
}

pub type UserClaims = Claims<User>;

impl UserClaims {
    /// User claims for `user` with Go's `NewUserClaims` defaults (unlimited subs, data, payload).
    pub fn new(user: impl Into<String>) -> Self {
        Claims {
            subject: user.into(),
            nats: User {
                permission_limits: UserPermissionLimits::unlimited(),
                ..User::default()
            },
            ..Claims::default()
        }
    }

    /// A user for a scoped signing key of `account`: no permissions or limits of its own.
    pub fn new_scoped(user: impl Into<String>, account: impl Into<String>) -> Self {
        Claims {
            subject: user.into(),
            nats: User {
                issuer_account: account.into(),
                ..User::default()
            },
            ..Claims::default()
        }
    }

    /// The whole permission-and-limits body at once.
    pub fn permission_limits(mut self, p: UserPermissionLimits) -> Self {
        self.nats.permission_limits = p;
        self
    }

    pub fn permissions(mut self, permissions: Permissions) -> Self {
        self.nats.permission_limits.permissions = permissions;
        self
    }

    pub fn publish(mut self, permission: Permission) -> Self {
        self.nats.permission_limits.permissions.publish = permission;
        self
    }

    pub fn subscribe(mut self, permission: Permission) -> Self {
        self.nats.permission_limits.permissions.subscribe = permission;
        self
    }

    pub fn response(mut self, response: ResponsePermission) -> Self {
        self.nats.permission_limits.permissions.response = Some(response);
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.nats.permission_limits.limits = limits;
        self
    }

    pub fn bearer(mut self, bearer: bool) -> Self {
        self.nats.permission_limits.bearer = bearer;
        self
    }

    pub fn allowed_connection_types<I, S>(mut self, types: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.nats.permission_limits.allowed_connection_types =
            types.into_iter().map(Into::into).collect();
        self
    }

    /// Marks the user as issued by a signing key of `account`.
    pub fn issuer_account(mut self, account: impl Into<String>) -> Self {
        self.nats.issuer_account = account.into();
        self
    }

    pub fn tag(mut self, tag: &str) -> Self {
        add_tag(&mut self.nats.tags, tag);
        self
    }
}

// ---------------------------------------------------------------- activation

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Activation {
    /// The exported subject the token grants.
    #[serde(rename = "subject", skip_serializing_if = "String::is_empty")]
    pub import_subject: String,
    #[serde(rename = "kind", skip_serializing_if = "Option::is_none")]
    pub import_type: Option<ExportType>,
    /// The exporting account, when one of its signing keys issued the token.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issuer_account: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub claim_type: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub version: i64,
}

impl ClaimBody for Activation {
    const TYPE: &'static str = "activation";
    const SUBJECT_KIND: KeyKind = KeyKind::Account;
    const ISSUER_KINDS: &'static [KeyKind] = &[KeyKind::Account, KeyKind::Operator];

    fn prepare_encode(&mut self) {
        self.claim_type = Self::TYPE.into();
        self.version = CLAIMS_VERSION;
    }

    fn generic(&self) -> (&str, i64) {
        (&self.claim_type, self.version)
    }

    fn issuer_account(&self) -> Option<&str> {
        Some(&self.issuer_account)
    }
}

pub type ActivationClaims = Claims<Activation>;

impl ActivationClaims {
    /// An activation letting `importer` (an account public key) import `subject` of kind `kind`.
    pub fn new(importer: impl Into<String>, subject: impl Into<String>, kind: ExportType) -> Self {
        Claims {
            subject: importer.into(),
            nats: Activation {
                import_subject: subject.into(),
                import_type: Some(kind),
                ..Activation::default()
            },
            ..Claims::default()
        }
    }

    /// Marks the token as issued by a signing key of `account`.
    pub fn issuer_account(mut self, account: impl Into<String>) -> Self {
        self.nats.issuer_account = account.into();
        self
    }
}
