//! §5.1 Keys: where each identity and signing seed comes from — adopted from a `keys` Secret,
//! generated into `<name>-<kind>-<identity|signing-1>`, or kept offline — and the refusals
//! (SecretConflict, SeedLost, a missing signing key for an offline identity).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use nats_api::auth::{
    DEFAULT_SEED_KEY, GENERATED_FOR_ANNOTATION, GeneratedKind, Keys, generated_for,
    generated_secret_name,
};
use nats_claims::{KeyKind, NKey};

/// The key name of the identity seed's generated Secret.
pub const IDENTITY: &str = "identity";
/// The key name of the first generated signing seed's Secret.
pub const SIGNING_1: &str = "signing-1";

/// What a Secret under a generated name holds, as far as the key decision cares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeenSecret {
    /// The `generated-for` annotation, if any.
    pub generated_for: Option<String>,
}

/// Where one seed comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeedSource {
    /// Read from a Secret the spec names.
    Adopt { secret: String, key: String },
    /// Read from the Secret generated earlier for this object.
    Generated { secret: String },
    /// Generate a seed into this Secret now (no identity is recorded yet).
    Generate { secret: String },
}

/// Why no key plan can be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefusal {
    /// A Secret under a generated name is not annotated for this object (reason SecretConflict).
    #[error("Secret {secret} exists but is not annotated {GENERATED_FOR_ANNOTATION}: {expected}")]
    SecretConflict { secret: String, expected: String },
    /// The generated identity Secret is gone while status records the identity (reason SeedLost).
    #[error(
        "Secret {secret} holding the identity seed of {public_key} is gone; a new identity would orphan every JWT issued under it"
    )]
    SeedLost { secret: String, public_key: String },
    /// An offline identity with no signing key (reason InvalidKeys).
    #[error("an identity kept offline needs at least one signing key in keys.signing")]
    OfflineWithoutSigningKey,
    /// A seed is not of the kind its place needs (reason InvalidKeys).
    #[error("Secret {secret} key {key} does not hold a {kind:?} seed")]
    WrongSeed {
        secret: String,
        key: String,
        kind: KeyKind,
    },
}

impl KeyRefusal {
    /// The Ready reason this refusal reads as.
    pub fn reason(&self) -> &'static str {
        use nats_api::auth::reason;
        match self {
            KeyRefusal::SecretConflict { .. } => reason::SECRET_CONFLICT,
            KeyRefusal::SeedLost { .. } => reason::SEED_LOST,
            KeyRefusal::OfflineWithoutSigningKey | KeyRefusal::WrongSeed { .. } => {
                reason::INVALID_KEYS
            }
        }
    }
}

/// The identity: a seed, or a public key whose seed is kept elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdentityPlan {
    Seed(SeedSource),
    /// NatsOperator.spec.jwt or an account's spec.publicKey.
    Offline,
}

/// Where every seed of one object comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPlan {
    pub identity: IdentityPlan,
    /// `(name, source)` per signing key; a generated one is named `signing-1`.
    pub signing: Vec<(String, SeedSource)>,
}

/// Decides where the seeds of `kind`/`name` come from.
///
/// `offline` is true with NatsOperator.spec.jwt or an account's spec.publicKey; `recorded` is
/// status.publicKey; `seen` maps each generated Secret name that exists to what it carries.
pub fn key_plan(
    kind: GeneratedKind,
    name: &str,
    keys: Option<&Keys>,
    offline: bool,
    recorded: Option<&str>,
    seen: &BTreeMap<String, SeenSecret>,
) -> Result<KeyPlan, KeyRefusal> {
    let keys = keys.cloned().unwrap_or_default();
    let identity = if offline {
        if keys.signing.is_empty() {
            return Err(KeyRefusal::OfflineWithoutSigningKey);
        }
        IdentityPlan::Offline
    } else if let Some(id) = &keys.identity {
        IdentityPlan::Seed(SeedSource::Adopt {
            secret: id.secret_key_ref.name.clone(),
            key: id.key().to_string(),
        })
    } else {
        IdentityPlan::Seed(generated_source(kind, name, IDENTITY, recorded, seen)?)
    };
    let signing = if keys.signing.is_empty() {
        // A generated signing key is never "lost": a fresh one only re-signs what this object
        // signs, so no recorded key is passed.
        vec![(
            SIGNING_1.to_string(),
            generated_source(kind, name, SIGNING_1, None, seen)?,
        )]
    } else {
        keys.signing
            .iter()
            .map(|k| {
                (
                    k.name.clone(),
                    SeedSource::Adopt {
                        secret: k.secret_key_ref.name.clone(),
                        key: k.key().to_string(),
                    },
                )
            })
            .collect()
    };
    Ok(KeyPlan { identity, signing })
}

/// One generated seed: read it where its Secret is annotated for this object, refuse a Secret
/// annotated otherwise, and generate only where none exists and no identity is recorded.
pub fn generated_source(
    kind: GeneratedKind,
    name: &str,
    which: &str,
    recorded: Option<&str>,
    seen: &BTreeMap<String, SeenSecret>,
) -> Result<SeedSource, KeyRefusal> {
    let secret = generated_secret_name(name, kind, which);
    let expected = generated_for(kind, name);
    match seen.get(&secret) {
        Some(s) if s.generated_for.as_deref() == Some(expected.as_str()) => {
            Ok(SeedSource::Generated { secret })
        }
        Some(_) => Err(KeyRefusal::SecretConflict { secret, expected }),
        None => match recorded {
            Some(public_key) => Err(KeyRefusal::SeedLost {
                secret,
                public_key: public_key.to_string(),
            }),
            None => Ok(SeedSource::Generate { secret }),
        },
    }
}

impl SeedSource {
    /// The Secret the seed lives in.
    pub fn secret(&self) -> &str {
        match self {
            SeedSource::Adopt { secret, .. }
            | SeedSource::Generated { secret }
            | SeedSource::Generate { secret } => secret,
        }
    }
}

/// status.seedSecrets: the names of the Secrets holding the seeds (never the seeds).
pub fn seed_secrets(plan: &KeyPlan) -> nats_api::auth::SeedSecrets {
    nats_api::auth::SeedSecrets {
        identity: match &plan.identity {
            IdentityPlan::Seed(s) => Some(s.secret().to_string()),
            IdentityPlan::Offline => None,
        },
        signing: plan
            .signing
            .iter()
            .map(|(_, s)| s.secret().to_string())
            .collect(),
    }
}

/// The NKey kind every seed of `kind` holds.
pub fn seed_kind(kind: GeneratedKind) -> KeyKind {
    match kind {
        GeneratedKind::Operator => KeyKind::Operator,
        GeneratedKind::SystemAccount | GeneratedKind::Account => KeyKind::Account,
    }
}

/// A generated Secret: the seed under `seed`, annotated for its object, with no owner
/// reference, so it outlives the object and the same kind and name applied again takes it.
pub fn generated_secret(
    kind: GeneratedKind,
    name: &str,
    namespace: &str,
    which: &str,
    seed: &NKey,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(generated_secret_name(name, kind, which)),
            namespace: Some(namespace.to_string()),
            annotations: Some(BTreeMap::from([(
                GENERATED_FOR_ANNOTATION.to_string(),
                generated_for(kind, name),
            )])),
            owner_references: None,
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            DEFAULT_SEED_KEY.to_string(),
            ByteString(seed.seed().into_bytes()),
        )])),
        ..Secret::default()
    }
}

/// Reads a seed of `kind` from Secret bytes.
pub fn read_seed(secret: &str, key: &str, kind: KeyKind, bytes: &[u8]) -> Result<NKey, KeyRefusal> {
    let trimmed = std::str::from_utf8(bytes).map(str::trim).unwrap_or("");
    NKey::from_seed_of(kind, trimmed.as_bytes()).map_err(|_| KeyRefusal::WrongSeed {
        secret: secret.to_string(),
        key: key.to_string(),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::auth::{IdentityKey, SigningKey};
    use nats_api::common::SecretKeyRef;
    use rstest::rstest;

    fn seen(entries: &[(&str, Option<&str>)]) -> BTreeMap<String, SeenSecret> {
        entries
            .iter()
            .map(|(n, a)| {
                (
                    n.to_string(),
                    SeenSecret {
                        generated_for: a.map(str::to_string),
                    },
                )
            })
            .collect()
    }

    fn adopted() -> Keys {
        Keys {
            identity: Some(IdentityKey {
                secret_key_ref: SecretKeyRef {
                    name: "orders-keys".into(),
                    key: None,
                },
            }),
            signing: vec![SigningKey {
                name: "users".into(),
                secret_key_ref: SecretKeyRef {
                    name: "orders-signing-keys".into(),
                    key: Some("users.nk".into()),
                },
                ..SigningKey::default()
            }],
        }
    }

    fn signing_only() -> Keys {
        Keys {
            identity: None,
            ..adopted()
        }
    }

    #[rstest]
    #[case::omitted_keys_are_generated(None, false, None, &[], Ok(IdentityPlan::Seed(SeedSource::Generate { secret: "orders-account-identity".into() })))]
    #[case::generated_secret_annotated_for_this_object_is_read(None, false, Some("AOLD"), &[("orders-account-identity", Some("account/orders"))], Ok(IdentityPlan::Seed(SeedSource::Generated { secret: "orders-account-identity".into() })))]
    #[case::any_other_secret_under_that_name_is_secret_conflict(None, false, None, &[("orders-account-identity", Some("account/other"))], Err(KeyRefusal::SecretConflict { secret: "orders-account-identity".into(), expected: "account/orders".into() }))]
    #[case::unannotated_secret_is_secret_conflict(None, false, None, &[("orders-account-identity", None)], Err(KeyRefusal::SecretConflict { secret: "orders-account-identity".into(), expected: "account/orders".into() }))]
    #[case::identity_secret_gone_while_status_records_it_is_seed_lost(None, false, Some("AOLD"), &[], Err(KeyRefusal::SeedLost { secret: "orders-account-identity".into(), public_key: "AOLD".into() }))]
    #[case::set_keys_are_adopted(Some(adopted()), false, Some("AOLD"), &[], Ok(IdentityPlan::Seed(SeedSource::Adopt { secret: "orders-keys".into(), key: "seed".into() })))]
    #[case::offline_identity_with_a_signing_key(Some(signing_only()), true, None, &[], Ok(IdentityPlan::Offline))]
    #[case::offline_identity_requires_at_least_one_signing_key(None, true, None, &[], Err(KeyRefusal::OfflineWithoutSigningKey))]
    fn identity_plan(
        #[case] keys: Option<Keys>,
        #[case] offline: bool,
        #[case] recorded: Option<&str>,
        #[case] secrets: &[(&str, Option<&str>)],
        #[case] want: Result<IdentityPlan, KeyRefusal>,
    ) {
        let got = key_plan(
            GeneratedKind::Account,
            "orders",
            keys.as_ref(),
            offline,
            recorded,
            &seen(secrets),
        )
        .map(|p| p.identity);
        assert_eq!(got, want);
    }

    #[rstest]
    #[case::omitted_signing_keys_generate_signing_1(GeneratedKind::Operator, "demo", None, vec![("signing-1".to_string(), SeedSource::Generate { secret: "demo-operator-signing-1".into() })])]
    #[case::system_account_names_its_kind_systemaccount(GeneratedKind::SystemAccount, "system", None, vec![("signing-1".to_string(), SeedSource::Generate { secret: "system-systemaccount-signing-1".into() })])]
    #[case::listed_signing_keys_are_adopted(GeneratedKind::Account, "orders", Some(adopted()), vec![("users".to_string(), SeedSource::Adopt { secret: "orders-signing-keys".into(), key: "users.nk".into() })])]
    fn signing_plan(
        #[case] kind: GeneratedKind,
        #[case] name: &str,
        #[case] keys: Option<Keys>,
        #[case] want: Vec<(String, SeedSource)>,
    ) {
        let plan = key_plan(kind, name, keys.as_ref(), false, None, &BTreeMap::new()).unwrap();
        assert_eq!(plan.signing, want);
    }

    #[test]
    fn generated_secret_is_annotated_and_has_no_owner() {
        let seed = NKey::generate(KeyKind::Account);
        let s = generated_secret(GeneratedKind::Account, "orders", "team", IDENTITY, &seed);
        assert_eq!(s.metadata.name.as_deref(), Some("orders-account-identity"));
        assert_eq!(
            s.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(GENERATED_FOR_ANNOTATION))
                .map(String::as_str),
            Some("account/orders")
        );
        assert!(s.metadata.owner_references.is_none());
        let bytes = &s.data.as_ref().unwrap()["seed"].0;
        let back = read_seed("orders-account-identity", "seed", KeyKind::Account, bytes).unwrap();
        assert_eq!(back.public_key(), seed.public_key());
    }

    #[rstest]
    #[case::generated(None, false, Some("demo-operator-identity"), &["demo-operator-signing-1"])]
    #[case::offline_identity_has_no_identity_secret(Some(signing_only()), true, None, &["orders-signing-keys"])]
    fn status_seed_secrets(
        #[case] keys: Option<Keys>,
        #[case] offline: bool,
        #[case] identity: Option<&str>,
        #[case] signing: &[&str],
    ) {
        let plan = key_plan(
            GeneratedKind::Operator,
            "demo",
            keys.as_ref(),
            offline,
            None,
            &BTreeMap::new(),
        )
        .unwrap();
        let s = seed_secrets(&plan);
        assert_eq!(s.identity.as_deref(), identity);
        assert_eq!(s.signing, signing);
    }

    #[rstest]
    #[case::operator_seed_where_an_account_seed_belongs(KeyKind::Operator, KeyKind::Account)]
    #[case::user_seed_where_an_operator_seed_belongs(KeyKind::User, KeyKind::Operator)]
    fn a_seed_of_the_wrong_kind_is_refused(#[case] have: KeyKind, #[case] want: KeyKind) {
        let seed = NKey::generate(have).seed();
        let got = read_seed("s", "seed", want, seed.expose().as_bytes());
        assert!(matches!(got, Err(KeyRefusal::WrongSeed { .. })), "{got:?}");
    }
}
