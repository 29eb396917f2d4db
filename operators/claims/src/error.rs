//! Typed errors: each variant says what failed and with which token part, key or claim.

use std::fmt;

/// The three dot-separated parts of a JWT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Header,
    Payload,
    Signature,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Header => "header",
            Part::Payload => "payload",
            Part::Signature => "signature",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("JWT is truncated: expected 3 dot-separated parts, found {parts}")]
    Truncated { parts: usize },

    #[error("JWT of {len} bytes exceeds the {max}-byte limit nats-server applies")]
    TooLarge { len: usize, max: usize },

    #[error("JWT {part} is not unpadded base64url: {source}")]
    BadBase64 {
        part: Part,
        #[source]
        source: base64::DecodeError,
    },

    #[error("JWT {part} is not the expected JSON: {source}")]
    BadJson {
        part: Part,
        #[source]
        source: serde_json::Error,
    },

    #[error("JWT header is not a NATS v2 header: typ {typ:?}, alg {alg:?}")]
    UnsupportedHeader { typ: String, alg: String },

    #[error("JWT claims version {version} is not supported; only version 2 is")]
    UnsupportedVersion { version: i64 },

    #[error("JWT holds {found:?} claims where {expected} claims were expected")]
    WrongClaimType {
        expected: &'static str,
        found: String,
    },

    #[error("JWT signature does not verify against its issuer {issuer}")]
    WrongSignature { issuer: String },

    #[error("{role} key {key:?} has the wrong prefix: expected {expected}")]
    WrongKeyPrefix {
        role: &'static str,
        key: String,
        expected: String,
    },

    #[error("{role} key {key:?} is not a valid nkey: {reason}")]
    InvalidKey {
        role: &'static str,
        key: String,
        reason: String,
    },

    /// Never carries the seed itself.
    #[error("seed is not a valid nkey seed: {reason}")]
    BadSeed { reason: String },

    #[error(
        "issuer {issuer} is not allowed to sign the {claim_type} claims for {subject}: {reason}"
    )]
    IssuerNotAllowed {
        claim_type: &'static str,
        issuer: String,
        subject: String,
        reason: String,
    },

    #[error("creds file is malformed: {reason}")]
    BadCreds { reason: String },

    #[error("{claim_type} claims for {subject:?} cannot be encoded: {reason}")]
    Encode {
        claim_type: &'static str,
        subject: String,
        reason: String,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
