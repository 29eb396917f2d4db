//! nkeys for the three roles this crate signs with, and a seed type that never prints itself.

use std::fmt;

use crate::error::{Error, Result};

/// The nkey roles NATS JWTs name: operators sign accounts, accounts sign users and activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    Operator,
    Account,
    User,
}

impl KeyKind {
    /// The first character of a public key of this kind.
    pub fn public_prefix(self) -> char {
        match self {
            KeyKind::Operator => 'O',
            KeyKind::Account => 'A',
            KeyKind::User => 'U',
        }
    }

    /// The first two characters of a seed of this kind.
    pub fn seed_prefix(self) -> &'static str {
        match self {
            KeyKind::Operator => "SO",
            KeyKind::Account => "SA",
            KeyKind::User => "SU",
        }
    }

    fn from_nkeys(kind: nkeys::KeyPairType) -> Option<Self> {
        match kind {
            nkeys::KeyPairType::Operator => Some(KeyKind::Operator),
            nkeys::KeyPairType::Account => Some(KeyKind::Account),
            nkeys::KeyPairType::User => Some(KeyKind::User),
            _ => None,
        }
    }

    fn to_nkeys(self) -> nkeys::KeyPairType {
        match self {
            KeyKind::Operator => nkeys::KeyPairType::Operator,
            KeyKind::Account => nkeys::KeyPairType::Account,
            KeyKind::User => nkeys::KeyPairType::User,
        }
    }
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyKind::Operator => "operator",
            KeyKind::Account => "account",
            KeyKind::User => "user",
        })
    }
}

/// Secret text (a seed or a rendered creds file). `Debug` redacts it and there is no `Display`,
/// so a seed cannot reach a log line by accident; `expose` is the one way to read it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretText(String);

impl SecretText {
    pub fn new(text: String) -> Self {
        SecretText(text)
    }

    /// The secret itself, for writing into a Kubernetes Secret or a file.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0.into_bytes()
    }
}

impl fmt::Debug for SecretText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretText(<redacted, {} bytes>)", self.0.len())
    }
}

/// An operator, account or user key pair that holds its seed.
#[derive(Clone)]
pub struct NKey {
    pair: nkeys::KeyPair,
    kind: KeyKind,
}

impl NKey {
    /// A fresh random key of `kind`.
    pub fn generate(kind: KeyKind) -> Self {
        NKey {
            pair: nkeys::KeyPair::new(kind.to_nkeys()),
            kind,
        }
    }

    /// Loads a seed as stored in a Secret: surrounding whitespace (a trailing newline) is ignored.
    pub fn from_seed(seed: &[u8]) -> Result<Self> {
        let text = std::str::from_utf8(seed)
            .map_err(|_| Error::BadSeed {
                reason: "not UTF-8".into(),
            })?
            .trim();
        if !text.starts_with('S') {
            return Err(Error::BadSeed {
                reason: "does not start with S".into(),
            });
        }
        let pair = nkeys::KeyPair::from_seed(text).map_err(|e| Error::BadSeed {
            // nkeys errors name lengths, prefixes and checksums, never the seed.
            reason: e.to_string(),
        })?;
        let kind = KeyKind::from_nkeys(pair.key_pair_type()).ok_or_else(|| Error::BadSeed {
            reason: format!(
                "a {:?} seed, not an operator, account or user seed",
                pair.key_pair_type()
            ),
        })?;
        Ok(NKey { pair, kind })
    }

    /// Loads a seed and insists on its role.
    pub fn from_seed_of(kind: KeyKind, seed: &[u8]) -> Result<Self> {
        let key = Self::from_seed(seed)?;
        if key.kind != kind {
            return Err(Error::WrongKeyPrefix {
                role: "seed",
                key: key.public_key(),
                expected: format!("a {kind} seed ({})", kind.seed_prefix()),
            });
        }
        Ok(key)
    }

    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    pub fn public_key(&self) -> String {
        self.pair.public_key()
    }

    pub fn seed(&self) -> SecretText {
        // A pair built by generate or from_seed always holds its seed.
        SecretText(self.pair.seed().unwrap_or_default())
    }

    pub(crate) fn sign(&self, data: &[u8]) -> Result<Vec<u8>> {
        self.pair.sign(data).map_err(|e| Error::InvalidKey {
            role: "signing",
            key: self.public_key(),
            reason: e.to_string(),
        })
    }
}

impl fmt::Debug for NKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NKey")
            .field("kind", &self.kind)
            .field("public_key", &self.public_key())
            .finish_non_exhaustive()
    }
}

/// The role of a public key, checking its encoding and checksum.
pub fn public_key_kind(role: &'static str, key: &str) -> Result<KeyKind> {
    let pair = nkeys::KeyPair::from_public_key(key).map_err(|e| Error::InvalidKey {
        role,
        key: key.to_string(),
        reason: e.to_string(),
    })?;
    KeyKind::from_nkeys(pair.key_pair_type()).ok_or_else(|| Error::WrongKeyPrefix {
        role,
        key: key.to_string(),
        expected: "an operator, account or user key (O, A or U)".into(),
    })
}

/// Checks that `key` is a valid public key of one of `kinds`.
pub fn expect_public_key(role: &'static str, key: &str, kinds: &[KeyKind]) -> Result<KeyKind> {
    let kind = public_key_kind(role, key).map_err(|e| match e {
        // A valid key of another role (server, cluster, curve) is a prefix problem, not an encoding one.
        Error::WrongKeyPrefix { .. } => wrong_prefix(role, key, kinds),
        other => other,
    })?;
    if kinds.contains(&kind) {
        Ok(kind)
    } else {
        Err(wrong_prefix(role, key, kinds))
    }
}

fn wrong_prefix(role: &'static str, key: &str, kinds: &[KeyKind]) -> Error {
    let expected = kinds
        .iter()
        .map(|k| format!("{k} ({})", k.public_prefix()))
        .collect::<Vec<_>>()
        .join(" or ");
    Error::WrongKeyPrefix {
        role,
        key: key.to_string(),
        expected,
    }
}

pub(crate) fn verify(issuer: &str, data: &[u8], signature: &[u8]) -> Result<()> {
    let pair = nkeys::KeyPair::from_public_key(issuer).map_err(|e| Error::InvalidKey {
        role: "issuer",
        key: issuer.to_string(),
        reason: e.to_string(),
    })?;
    pair.verify(data, signature)
        .map_err(|_| Error::WrongSignature {
            issuer: issuer.to_string(),
        })
}
