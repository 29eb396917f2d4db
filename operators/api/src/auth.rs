//! `auth.nats.mikluko.io`: the kinds the auth controller serves — NatsOperator, NatsSystemAccount,
//! NatsAccount and NatsUser — and the shapes they share (keys, scopes, account references,
//! distribution and revocation records).

mod account;
mod keys;
mod operator;
mod system_account;
mod user;

pub use account::*;
pub use keys::*;
pub use operator::*;
pub use system_account::*;
pub use user::*;

/// The API group of the auth controller.
pub const GROUP: &str = "auth.nats.mikluko.io";

/// The field manager the auth controller writes status with.
pub const FIELD_MANAGER: &str = "auth-controller";

/// Annotation on a generated key Secret naming the object it was generated for, as
/// `<operator|systemaccount|account>/<name>`. A Secret of a generated name without it is never read.
pub const GENERATED_FOR_ANNOTATION: &str = "auth.nats.mikluko.io/generated-for";

/// The finalizer holding a deleted user (or account) until its revocation is distributed and its
/// connections are kicked.
pub const FINALIZER: &str = "auth.nats.mikluko.io/finalizer";

/// The Secret key a generated seed is written under, and read from when secretKeyRef.key is omitted.
pub const DEFAULT_SEED_KEY: &str = "seed";

/// The Secret key of a creds file a NatsUser writes when credentials.secretKeyRef.key is omitted.
pub const DEFAULT_CREDS_KEY: &str = crate::common::DEFAULT_CREDS_KEY;

/// The default lifetime of an account JWT; it is re-signed at half of it.
pub const DEFAULT_JWT_TTL: &str = "48h";
/// The floor of NatsAccount.spec.jwtTTL (other than `0`, never expiring), refused below it by CEL
/// and raised to it by the auth controller for an object stored before the rule. An account JWT
/// is re-signed and pushed to every server at half its TTL, so the floor bounds what one account
/// costs the controller and the servers to a re-sign every 30 s at most, and keeps a JWT alive
/// longer than a pass that distributes it takes, even behind a slow server. Must match the
/// literal of the CEL rule on NatsAccountSpec.
pub const MIN_JWT_TTL: &str = "1m";

/// The most exports one account may declare.
pub const MAX_EXPORTS: u32 = 1000;

/// The name of a generated key Secret: `<name>-<operator|systemaccount|account>-<identity|signing-1>`.
pub fn generated_secret_name(object: &str, kind: GeneratedKind, key: &str) -> String {
    format!("{object}-{}-{key}", kind.as_str())
}

/// The value of [`GENERATED_FOR_ANNOTATION`] for an object: `<operator|systemaccount|account>/<name>`.
pub fn generated_for(kind: GeneratedKind, object: &str) -> String {
    format!("{}/{object}", kind.as_str())
}

/// The kinds the auth controller generates keys for, as generated Secret names spell them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeneratedKind {
    /// A NatsOperator.
    Operator,
    /// A NatsSystemAccount.
    SystemAccount,
    /// A NatsAccount.
    Account,
}

impl GeneratedKind {
    /// The spelling in Secret names and the generated-for annotation.
    pub fn as_str(self) -> &'static str {
        match self {
            GeneratedKind::Operator => "operator",
            GeneratedKind::SystemAccount => "systemaccount",
            GeneratedKind::Account => "account",
        }
    }
}

/// Condition types of the auth kinds.
pub mod condition {
    /// The object's JWT is signed (or mirrored) from its current spec.
    pub const READY: &str = "Ready";
    /// Every reference of the spec resolved and is admitted.
    pub const REFERENCES_RESOLVED: &str = "ReferencesResolved";
    /// Every server of the roster holds the current JWT.
    pub const DISTRIBUTED: &str = "Distributed";
    /// A signing key marked retiring still signs something in use.
    pub const RETIRING_KEYS_IN_USE: &str = "RetiringKeysInUse";
    /// Some roster server has not answered, so revocations newer than the record may exist there.
    pub const REVOCATIONS_UNRECOVERED: &str = "RevocationsUnrecovered";
    /// The key signing this JWT is not listed by the operator JWT the servers run with.
    pub const SIGNING_KEY_UNTRUSTED: &str = "SigningKeyUntrusted";
}

/// Condition reasons of the auth kinds.
pub mod reason {
    /// The JWT is signed from the current spec.
    pub const SIGNED: &str = "Signed";
    /// An offline-signed JWT (NatsOperator spec.jwt) is published as is.
    pub const MIRRORED: &str = "Mirrored";
    /// Keys are being generated or read.
    pub const KEYS_PENDING: &str = "KeysPending";
    /// A seed Secret holds no valid seed of the expected kind.
    pub const INVALID_KEYS: &str = "InvalidKeys";
    /// spec.jwt does not decode or is not a NATS operator JWT of the keys given.
    pub const INVALID_JWT: &str = "InvalidJWT";
    /// A Secret of a generated name exists whose generated-for annotation names another object.
    pub const SECRET_CONFLICT: &str = "SecretConflict";
    /// A generated identity seed's Secret is gone while status records the identity.
    pub const SEED_LOST: &str = "SeedLost";
    /// Another object records this public key.
    pub const PUBLIC_KEY_IN_USE: &str = "PublicKeyInUse";
    /// Every reference resolved.
    pub const REFERENCES_RESOLVED: &str = "ReferencesResolved";
    /// A referenced object does not exist.
    pub const REFERENCE_NOT_FOUND: &str = "ReferenceNotFound";
    /// A reference crosses namespaces and no NatsReferenceGrant admits it.
    pub const REFERENCE_NOT_PERMITTED: &str = "ReferenceNotPermitted";
    /// The user's account is not admitted to its NatsOperator.
    pub const ACCOUNT_NOT_ADMITTED: &str = "AccountNotAdmitted";
    /// An import does not resolve to an export.
    pub const IMPORTS_UNRESOLVED: &str = "ImportsUnresolved";
    /// An activation token of a private export could not be signed yet.
    pub const ACTIVATIONS_UNSIGNED: &str = "ActivationsUnsigned";
    /// The JWT is being pushed.
    pub const DISTRIBUTING: &str = "Distributing";
    /// NatsUser / NatsAccount being deleted: a NatsConnection still names the user's creds
    /// Secret, so the user is neither revoked nor its Secret deleted (nor the account deleted
    /// on the servers) until that connection is gone (docs/uninstall.md).
    pub const CREDENTIALS_IN_USE: &str = "CredentialsInUse";
    /// Every roster server holds the current JWT.
    pub const ALL_SERVERS_CURRENT: &str = "AllServersCurrent";
    /// Some roster servers hold an older JWT.
    pub const SERVERS_BEHIND: &str = "ServersBehind";
    /// Some roster servers do not answer.
    pub const UNREACHABLE: &str = "Unreachable";
    /// The signing key is not listed by the operator JWT the servers run with.
    pub const UNTRUSTED_SIGNER: &str = "UntrustedSigner";
    /// The controller runs without --system-connection: nothing is pushed and no user is kicked.
    pub const NO_SYSTEM_CONNECTION: &str = "NoSystemConnection";
    /// Revocations are being recovered from the servers before signing.
    pub const RECOVERING_REVOCATIONS: &str = "RecoveringRevocations";
    /// Re-signing an adopted JWT from spec would drop claims it carries (adoption.droppedClaims Refuse).
    pub const ADOPTION_DROPS_CLAIMS: &str = "AdoptionDropsClaims";
    /// A deleted or replaced user's connections are being kicked.
    pub const KICKING: &str = "Kicking";
}

/// Event reasons the auth controller records.
pub mod event {
    /// A JWT was pushed to the servers.
    pub const JWT_PUSHED: &str = "JWTPushed";
    /// A JWT was not pushed (an untrusted signer, unrecovered revocations, no system connection).
    pub const JWT_HELD: &str = "JWTHeld";
    /// A deleted or replaced user's connection was kicked.
    pub const USER_KICKED: &str = "UserKicked";
    /// A deletion waits for NATS or for another object (the note says which, and how to release it).
    pub const DELETION_HELD: &str = "DeletionHeld";
    /// A held deletion was released by the force-delete annotation (the note says what was skipped).
    pub const FORCE_DELETED: &str = "ForceDeleted";
}

/// Annotations the auth controller reads.
pub mod annotation {
    /// Releases a NatsUser or NatsAccount being deleted without waiting for NATS or its NatsOperator.
    /// Read only while the object is being deleted, never cleared (like the cluster's).
    pub const FORCE_DELETE: &str = "auth.nats.mikluko.io/force-delete";
}

/// Prometheus metric names of the auth controller (prefix `nats_operator_`).
pub mod metric {
    /// Gauge: the expiry of an account's current JWT, Unix seconds {namespace, name}.
    pub const ACCOUNT_JWT_EXPIRY: &str = "nats_operator_account_jwt_expiry_timestamp_seconds";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_secret_names_follow_the_design() {
        assert_eq!(
            generated_secret_name("demo", GeneratedKind::Operator, "identity"),
            "demo-operator-identity"
        );
        assert_eq!(
            generated_secret_name("system", GeneratedKind::SystemAccount, "signing-1"),
            "system-systemaccount-signing-1"
        );
        assert_eq!(
            generated_for(GeneratedKind::Account, "orders"),
            "account/orders"
        );
    }

    #[test]
    fn controller_presets_are_the_system_ones() {
        let system: Vec<_> = [
            UserPreset::ClusterController,
            UserPreset::JetStreamController,
            UserPreset::AuthController,
            UserPreset::Readonly,
            UserPreset::Leafnode,
        ]
        .into_iter()
        .filter(|p| p.is_system())
        .map(|p| p.as_str())
        .collect();
        assert_eq!(
            system,
            [
                "cluster-controller",
                "jetstream-controller",
                "auth-controller"
            ]
        );
        assert_eq!(
            UserPreset::JetStreamController.inbox_prefix().as_deref(),
            Some("_INBOX.jetstream-controller")
        );
        assert_eq!(UserPreset::Readonly.inbox_prefix(), None);
    }

    #[test]
    fn preset_spelling_matches_serde() {
        for p in [
            UserPreset::ClusterController,
            UserPreset::JetStreamController,
            UserPreset::AuthController,
            UserPreset::Readonly,
            UserPreset::Leafnode,
        ] {
            assert_eq!(
                serde_json::to_value(p).ok(),
                Some(serde_json::Value::from(p.as_str()))
            );
        }
    }
}
