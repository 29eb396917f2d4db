//! Encoding (sign with an nkey) and decoding (verify signature and issuer role) of NATS JWTs.

use base64::Engine as _;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha512_256};

use crate::claims::{
    Account, AccountClaims, Activation, ActivationClaims, CLAIMS_VERSION, ClaimBody, Claims,
    Operator, OperatorClaims, User, UserClaims,
};
use crate::error::{Error, Part, Result};
use crate::keys::{self, NKey};

/// The only header this crate writes: `{"typ":"JWT","alg":"ed25519-nkey"}`.
pub const HEADER_JSON: &str = r#"{"typ":"JWT","alg":"ed25519-nkey"}"#;

/// nats-server refuses longer tokens (jwt v2 `MaxTokenSize`).
pub const MAX_TOKEN_SIZE: usize = 1024 * 1024;

/// Go's `base64.RawURLEncoding`: no padding accepted, non-zero trailing bits tolerated.
const B64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// JSON as Go's `encoding/json` writes it: serde_json's output with Go's HTML escaping of
/// `<`, `>`, `&` and of U+2028/U+2029. Those characters only occur inside strings, so the
/// replacement is safe, and it makes our payloads byte-identical to nats-io/jwt's.
pub(crate) fn go_json<T: Serialize>(value: &T) -> serde_json::Result<String> {
    let plain = serde_json::to_string(value)?;
    if !plain.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return Ok(plain);
    }
    let mut out = String::with_capacity(plain.len() + 16);
    for c in plain.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// The registered fields Go hashes for `jti` (its `ClaimsData`), in Go's order; the `nats`
/// body is not part of the hash.
#[derive(Serialize)]
struct ClaimsData<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    aud: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    exp: i64,
    #[serde(skip_serializing_if = "str::is_empty")]
    jti: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    iat: i64,
    #[serde(skip_serializing_if = "str::is_empty")]
    iss: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    nbf: i64,
    #[serde(skip_serializing_if = "str::is_empty")]
    sub: &'a str,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The `jti` nats-io/jwt v2 (Go, used by nsc) computes: base32 (standard alphabet, no padding)
/// of SHA-512/256 over the JSON of the registered claims with `jti` empty; `iss` and `iat` are
/// already set. (@nats-io/jwt in JavaScript instead stores base64 of SHA-512 over the whole
/// claims; nothing verifies a `jti`, it only has to be unique.)
pub fn claims_hash<N>(claims: &Claims<N>) -> String {
    let data = ClaimsData {
        aud: &claims.audience,
        exp: claims.expires,
        jti: "",
        iat: claims.issued_at,
        iss: &claims.issuer,
        name: &claims.name,
        nbf: claims.not_before,
        sub: &claims.subject,
    };
    // Serializing strings and integers cannot fail.
    let json = go_json(&data).unwrap_or_default();
    let digest = Sha512_256::digest(json.as_bytes());
    data_encoding::BASE32_NOPAD.encode(&digest)
}

fn now_unix() -> i64 {
    chrono::Utc::now().timestamp()
}

impl<N: ClaimBody> Claims<N> {
    /// Signs these claims with `signer`, issued now. The signer's role must be one the claim
    /// type allows (operator: operator; account: operator or account; user: account;
    /// activation: account or operator), and the subject must be a key of the claim's role.
    pub fn encode(&self, signer: &NKey) -> Result<String> {
        self.encode_issued_at(signer, now_unix())
    }

    /// As [`Claims::encode`] with a fixed `iat`, for reproducible tokens (ed25519 signatures
    /// are deterministic, so equal inputs give equal tokens).
    pub fn encode_issued_at(&self, signer: &NKey, issued_at: i64) -> Result<String> {
        self.sealed(signer, issued_at)?.encode_sealed(signer)
    }

    /// The claims exactly as [`Claims::encode_issued_at`] would sign them (`iss`, `iat`, `jti`,
    /// `type`, `version` set; exports and imports sorted).
    pub fn sealed(&self, signer: &NKey, issued_at: i64) -> Result<Claims<N>> {
        let fail = |reason: String| Error::Encode {
            claim_type: N::TYPE,
            subject: self.subject.clone(),
            reason,
        };
        keys::expect_public_key("subject", &self.subject, &[N::SUBJECT_KIND])?;
        if !N::ISSUER_KINDS.contains(&signer.kind()) {
            return Err(Error::WrongKeyPrefix {
                role: "signer",
                key: signer.public_key(),
                expected: N::ISSUER_KINDS
                    .iter()
                    .map(|k| format!("{k} ({})", k.public_prefix()))
                    .collect::<Vec<_>>()
                    .join(" or "),
            });
        }
        if issued_at == 0 {
            return Err(fail("issued-at time is zero".into()));
        }
        let mut c = self.clone();
        c.issuer = signer.public_key();
        c.issued_at = issued_at;
        c.id = String::new();
        c.id = claims_hash(&c);
        c.nats.prepare_encode();
        Ok(c)
    }

    fn encode_sealed(&self, signer: &NKey) -> Result<String> {
        let payload = payload_json(self)?;
        let signing_input = format!(
            "{}.{}",
            B64.encode(HEADER_JSON.as_bytes()),
            B64.encode(payload.as_bytes())
        );
        let signature = signer.sign(signing_input.as_bytes())?;
        Ok(format!("{signing_input}.{}", B64.encode(signature)))
    }
}

/// A token split into its parts, with the payload parsed but not yet typed.
#[derive(Debug, Clone)]
pub struct RawToken {
    /// The payload JSON as the token holds it.
    pub payload: Value,
    /// `nats.type`.
    pub claim_type: String,
    /// The `iss` field.
    pub issuer: String,
    signing_input_len: usize,
    signature: Vec<u8>,
}

impl RawToken {
    /// Splits and parses `token`; checks the header, the version and that `iss` is a public key.
    /// The signature is decoded but not verified.
    pub fn parse(token: &str) -> Result<Self> {
        if token.len() > MAX_TOKEN_SIZE {
            return Err(Error::TooLarge {
                len: token.len(),
                max: MAX_TOKEN_SIZE,
            });
        }
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() != 3 {
            return Err(Error::Truncated { parts: parts.len() });
        }
        let header_bytes = b64(Part::Header, parts[0])?;
        let header: Header =
            serde_json::from_slice(&header_bytes).map_err(|source| Error::BadJson {
                part: Part::Header,
                source,
            })?;
        if !header.typ.eq_ignore_ascii_case("JWT")
            || !header.alg.eq_ignore_ascii_case("ed25519-nkey")
        {
            // "ed25519" alone is the v1 format, which signs the payload only; not supported.
            return Err(Error::UnsupportedHeader {
                typ: header.typ,
                alg: header.alg,
            });
        }
        let payload_bytes = b64(Part::Payload, parts[1])?;
        let mut payload: Value =
            serde_json::from_slice(&payload_bytes).map_err(|source| Error::BadJson {
                part: Part::Payload,
                source,
            })?;
        if !payload.is_object() {
            return Err(Error::BadJson {
                part: Part::Payload,
                source: serde::de::Error::custom("payload is not a JSON object"),
            });
        }
        // Go's encoding/json treats null as absent for every field this crate models.
        strip_nulls(&mut payload);
        let signature = b64(Part::Signature, parts[2])?;

        // v1 tokens carry `type` at the top level (jwt v2 `identifier`).
        if payload
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty())
        {
            return Err(Error::UnsupportedVersion { version: 1 });
        }
        let nats = payload.get("nats");
        let version = match nats.and_then(|n| n.get("version")) {
            None => 0,
            Some(v) => v.as_i64().ok_or_else(|| Error::BadJson {
                part: Part::Payload,
                source: serde::de::Error::custom("nats.version is not an integer"),
            })?,
        };
        if version != CLAIMS_VERSION {
            return Err(Error::UnsupportedVersion { version });
        }
        let claim_type = match nats.and_then(|n| n.get("type")) {
            None => String::new(),
            Some(t) => t
                .as_str()
                .ok_or_else(|| Error::BadJson {
                    part: Part::Payload,
                    source: serde::de::Error::custom("nats.type is not a string"),
                })?
                .to_string(),
        };
        let issuer = match payload.get("iss") {
            None => String::new(),
            Some(i) => i
                .as_str()
                .ok_or_else(|| Error::BadJson {
                    part: Part::Payload,
                    source: serde::de::Error::custom("iss is not a string"),
                })?
                .to_string(),
        };
        Ok(RawToken {
            payload,
            claim_type,
            issuer,
            signing_input_len: parts[0].len() + 1 + parts[1].len(),
            signature,
        })
    }

    /// Verifies the signature over `header.payload` with the `iss` key.
    pub fn verify(&self, token: &str) -> Result<()> {
        keys::public_key_kind("issuer", &self.issuer)?;
        keys::verify(
            &self.issuer,
            &token.as_bytes()[..self.signing_input_len],
            &self.signature,
        )
    }

    /// Types the payload as `N`, checking `nats.type`.
    pub fn typed<N: ClaimBody>(&self) -> Result<Claims<N>> {
        if self.claim_type != N::TYPE {
            return Err(Error::WrongClaimType {
                expected: N::TYPE,
                found: self.claim_type.clone(),
            });
        }
        let mut claims: Claims<N> =
            serde_json::from_value(self.payload.clone()).map_err(|source| Error::BadJson {
                part: Part::Payload,
                source,
            })?;
        claims.nats.normalize_decoded();
        Ok(claims)
    }

    /// JSON paths the payload holds with a non-zero value that the typed claims do not carry:
    /// fields this crate (and any re-signing from these claims) would drop.
    pub fn dropped_fields<N: ClaimBody>(&self, claims: &Claims<N>) -> Vec<String> {
        let typed = serde_json::to_value(claims).unwrap_or(Value::Null);
        let mut out = Vec::new();
        diff_fields(&self.payload, &typed, "", &mut out);
        out
    }
}

#[derive(serde::Deserialize)]
struct Header {
    #[serde(default)]
    typ: String,
    #[serde(default)]
    alg: String,
}

fn b64(part: Part, text: &str) -> Result<Vec<u8>> {
    B64.decode(text)
        .map_err(|source| Error::BadBase64 { part, source })
}

fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

fn is_zero_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_zero_value),
    }
}

fn diff_fields(raw: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    match (raw, typed) {
        (Value::Object(r), Value::Object(t)) => {
            for (k, rv) in r {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match t.get(k) {
                    Some(tv) => diff_fields(rv, tv, &p, out),
                    None if is_zero_value(rv) => {}
                    None => out.push(p),
                }
            }
        }
        (Value::Array(r), Value::Array(t)) => {
            for (i, rv) in r.iter().enumerate() {
                let p = format!("{path}[{i}]");
                match t.get(i) {
                    Some(tv) => diff_fields(rv, tv, &p, out),
                    None => out.push(p),
                }
            }
        }
        _ => {}
    }
}

/// The payload JSON of `claims` exactly as they are signed (Go field order and escaping).
pub fn payload_json<N: ClaimBody>(claims: &Claims<N>) -> Result<String> {
    go_json(claims).map_err(|e| Error::Encode {
        claim_type: N::TYPE,
        subject: claims.subject.clone(),
        reason: e.to_string(),
    })
}

/// Decodes `token` as claims of type `N`, verifying its signature against its `iss` key and
/// that the issuer's role is allowed for `N`. Whether that issuer is *trusted* is the caller's
/// question (see [`crate::trust`]).
pub fn decode<N: ClaimBody>(token: &str) -> Result<Claims<N>> {
    let raw = RawToken::parse(token)?;
    let claims = raw.typed::<N>()?;
    raw.verify(token)?;
    keys::expect_public_key("issuer", &claims.issuer, N::ISSUER_KINDS)?;
    Ok(claims)
}

/// Decodes without checking the signature, for reading JWTs a server or a Secret already holds.
pub fn decode_unverified<N: ClaimBody>(token: &str) -> Result<Claims<N>> {
    RawToken::parse(token)?.typed::<N>()
}

/// Any of the four claim types.
// Decoded one at a time and matched at once; boxing the account variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum AnyClaims {
    Operator(OperatorClaims),
    Account(AccountClaims),
    User(UserClaims),
    Activation(ActivationClaims),
}

impl AnyClaims {
    pub fn subject(&self) -> &str {
        match self {
            AnyClaims::Operator(c) => &c.subject,
            AnyClaims::Account(c) => &c.subject,
            AnyClaims::User(c) => &c.subject,
            AnyClaims::Activation(c) => &c.subject,
        }
    }

    pub fn issuer(&self) -> &str {
        match self {
            AnyClaims::Operator(c) => &c.issuer,
            AnyClaims::Account(c) => &c.issuer,
            AnyClaims::User(c) => &c.issuer,
            AnyClaims::Activation(c) => &c.issuer,
        }
    }
}

/// Decodes a token of any claim type, verifying signature and issuer role.
pub fn decode_any(token: &str) -> Result<AnyClaims> {
    let raw = RawToken::parse(token)?;
    match raw.claim_type.as_str() {
        t if t == Operator::TYPE => decode::<Operator>(token).map(AnyClaims::Operator),
        t if t == Account::TYPE => decode::<Account>(token).map(AnyClaims::Account),
        t if t == User::TYPE => decode::<User>(token).map(AnyClaims::User),
        t if t == Activation::TYPE => decode::<Activation>(token).map(AnyClaims::Activation),
        other => Err(Error::WrongClaimType {
            expected: "operator, account, user or activation",
            found: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeyKind;

    #[test]
    fn header_encodes_as_every_nats_library_writes_it() {
        assert_eq!(
            B64.encode(HEADER_JSON),
            "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ"
        );
    }

    #[test]
    fn go_json_escapes_html_characters_like_encoding_json() {
        let s = go_json(&"a.> & <b> \u{2028}").unwrap();
        assert_eq!(s, r#""a.\u003e \u0026 \u003cb\u003e \u2028""#);
    }

    #[test]
    fn key_kind_is_checked_by_decode() {
        assert_eq!(KeyKind::Account.public_prefix(), 'A');
    }
}
