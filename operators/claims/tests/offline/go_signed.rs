//! JWTs the Go library signed: they decode, their payload re-encodes byte-for-byte, and their
//! `jti` is the hash this crate computes.

use base64::Engine as _;
use nats_claims::jwt::{claims_hash, payload_json};
use nats_claims::{AnyClaims, ClaimBody, Claims, RawToken, decode_any};

fn tokens() -> Vec<String> {
    include_str!("../fixtures/go-signed.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn raw_payload(token: &str) -> String {
    let part = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

fn check<N: ClaimBody>(token: &str, claims: &Claims<N>) {
    assert_eq!(claims_hash(claims), claims.id, "jti of {token}");
    let raw = raw_payload(token);
    let mut ours = payload_json(claims).unwrap();
    // These tokens predate jwt v2's `authorization` field, which the Go library now always
    // writes (encoding/json's omitempty never omits a struct), as this crate does.
    if !raw.contains("\"authorization\"") {
        ours = ours.replace(",\"authorization\":{}", "");
    }
    assert_eq!(ours, raw, "payload of {token}");
    let raw = RawToken::parse(token).unwrap();
    assert!(
        raw.dropped_fields(claims).is_empty(),
        "{:?}",
        raw.dropped_fields(claims)
    );
}

#[test]
fn go_signed_tokens_decode_hash_and_reencode_identically() {
    let tokens = tokens();
    assert_eq!(tokens.len(), 7);
    let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
    for token in &tokens {
        match decode_any(token).unwrap_or_else(|e| panic!("{token}: {e}")) {
            AnyClaims::Operator(c) => {
                *kinds.entry("operator").or_default() += 1;
                check(token, &c)
            }
            AnyClaims::Account(c) => {
                *kinds.entry("account").or_default() += 1;
                check(token, &c)
            }
            AnyClaims::User(c) => {
                *kinds.entry("user").or_default() += 1;
                check(token, &c)
            }
            AnyClaims::Activation(c) => {
                *kinds.entry("activation").or_default() += 1;
                check(token, &c)
            }
        }
    }
    assert_eq!(kinds.get("operator"), Some(&2));
    assert_eq!(kinds.get("account"), Some(&4));
    assert_eq!(kinds.get("user"), Some(&1));
}
