//! Malformed input returns typed errors that say what failed.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use nats_claims::*;
use rstest::rstest;

fn account_token() -> (String, NKey) {
    let operator = NKey::generate(KeyKind::Operator);
    let account = NKey::generate(KeyKind::Account);
    let token = AccountClaims::new(account.public_key())
        .name("a")
        .encode(&operator)
        .unwrap();
    (token, operator)
}

fn parts(token: &str) -> Vec<String> {
    token.split('.').map(str::to_string).collect()
}

/// A token with `payload` signed by `key` (any role), bypassing the encoder's checks.
fn hand_signed(header: &str, payload: &str, key: &nkeys::KeyPair) -> String {
    let input = format!("{}.{}", B64.encode(header), B64.encode(payload));
    let sig = key.sign(input.as_bytes()).unwrap();
    format!("{input}.{}", B64.encode(sig))
}

const HEADER: &str = r#"{"typ":"JWT","alg":"ed25519-nkey"}"#;

#[rstest]
#[case::empty("", 1)]
#[case::one_dot("a.b", 2)]
#[case::four_parts("a.b.c.d", 4)]
fn truncated_tokens_name_their_part_count(#[case] token: &str, #[case] parts: usize) {
    match decode_any(token) {
        Err(Error::Truncated { parts: p }) => assert_eq!(p, parts),
        other => panic!("expected Truncated, got {other:?}"),
    }
}

#[test]
fn a_token_cut_short_is_truncated_or_has_a_bad_signature_encoding() {
    let (token, _) = account_token();
    // Cut inside the payload: two parts left.
    let cut = &token[..token.find('.').unwrap() + 10];
    assert!(matches!(
        decode_any(cut),
        Err(Error::Truncated { parts: 2 })
    ));
    // One character off the signature: its base64 no longer has a valid length.
    let cut = &token[..token.len() - 1];
    assert!(matches!(
        decode_any(cut),
        Err(Error::BadBase64 {
            part: Part::Signature,
            ..
        })
    ));
}

#[rstest]
#[case::padding(0, "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ==", Part::Header)]
#[case::standard_alphabet(1, "eyJ+", Part::Payload)]
#[case::bad_char(2, "****", Part::Signature)]
fn bad_base64_names_the_part(#[case] index: usize, #[case] text: &str, #[case] part: Part) {
    let (token, _) = account_token();
    let mut p = parts(&token);
    p[index] = text.to_string();
    match decode_any(&p.join(".")) {
        Err(Error::BadBase64 { part: got, .. }) => assert_eq!(got, part),
        other => panic!("expected BadBase64 in {part}, got {other:?}"),
    }
}

#[test]
fn bad_json_names_the_part() {
    let (token, _) = account_token();
    let mut p = parts(&token);
    p[0] = B64.encode("not json");
    assert!(matches!(
        decode_any(&p.join(".")),
        Err(Error::BadJson {
            part: Part::Header,
            ..
        })
    ));
    let mut p = parts(&token);
    p[1] = B64.encode("[1,2,3]");
    assert!(matches!(
        decode_any(&p.join(".")),
        Err(Error::BadJson {
            part: Part::Payload,
            ..
        })
    ));
    // A field of the wrong JSON type in a signed token.
    let op = nkeys::KeyPair::new_operator();
    let acc = nkeys::KeyPair::new_account();
    let payload = format!(
        r#"{{"iat":1,"iss":"{}","sub":"{}","nats":{{"limits":{{"subs":"many"}},"type":"account","version":2}}}}"#,
        op.public_key(),
        acc.public_key()
    );
    let err = decode::<Account>(&hand_signed(HEADER, &payload, &op)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::BadJson {
                part: Part::Payload,
                ..
            }
        ),
        "{err}"
    );
}

#[rstest]
#[case::v1_alg(r#"{"typ":"JWT","alg":"ed25519"}"#)]
#[case::other_alg(r#"{"typ":"JWT","alg":"HS256"}"#)]
#[case::not_jwt(r#"{"typ":"JWS","alg":"ed25519-nkey"}"#)]
#[case::missing(r#"{}"#)]
fn foreign_headers_are_unsupported(#[case] header: &str) {
    let (token, _) = account_token();
    let mut p = parts(&token);
    p[0] = B64.encode(header);
    assert!(matches!(
        decode_any(&p.join(".")),
        Err(Error::UnsupportedHeader { .. })
    ));
}

#[test]
fn lower_case_typ_is_accepted_as_go_does() {
    let op = nkeys::KeyPair::new_operator();
    let payload = format!(
        r#"{{"iat":1,"iss":"{0}","sub":"{0}","nats":{{"type":"operator","version":2}}}}"#,
        op.public_key()
    );
    let token = hand_signed(r#"{"typ":"jwt","alg":"ed25519-nkey"}"#, &payload, &op);
    assert!(decode::<Operator>(&token).is_ok());
}

#[rstest]
#[case::v1_top_level_type(r#""type":"account","nats":{}"#, 1)]
#[case::no_version(r#""nats":{"type":"account"}"#, 0)]
#[case::newer(r#""nats":{"type":"account","version":3}"#, 3)]
fn other_claim_versions_are_unsupported(#[case] fields: &str, #[case] version: i64) {
    let op = nkeys::KeyPair::new_operator();
    let acc = nkeys::KeyPair::new_account();
    let payload = format!(
        r#"{{"iat":1,"iss":"{}","sub":"{}",{fields}}}"#,
        op.public_key(),
        acc.public_key()
    );
    match decode_any(&hand_signed(HEADER, &payload, &op)) {
        Err(Error::UnsupportedVersion { version: v }) => assert_eq!(v, version),
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
}

#[test]
fn a_changed_payload_fails_the_signature() {
    let (token, operator) = account_token();
    let mut p = parts(&token);
    let payload = String::from_utf8(B64.decode(&p[1]).unwrap()).unwrap();
    p[1] = B64.encode(payload.replace(r#""name":"a""#, r#""name":"b""#));
    match decode_any(&p.join(".")) {
        Err(Error::WrongSignature { issuer }) => assert_eq!(issuer, operator.public_key()),
        other => panic!("expected WrongSignature, got {other:?}"),
    }
    // Decoding without verification still reads it (for JWTs a server already holds).
    assert_eq!(
        decode_unverified::<Account>(&p.join(".")).unwrap().name,
        "b"
    );
}

#[test]
fn a_signature_by_another_key_fails() {
    let (token, _) = account_token();
    let (other, _) = account_token();
    let mut p = parts(&token);
    p[2] = parts(&other)[2].clone();
    assert!(matches!(
        decode_any(&p.join(".")),
        Err(Error::WrongSignature { .. })
    ));
}

#[test]
fn an_issuer_of_the_wrong_role_has_the_wrong_key_prefix() {
    // An account JWT signed (validly) by a user key.
    let user = nkeys::KeyPair::new_user();
    let acc = nkeys::KeyPair::new_account();
    let payload = format!(
        r#"{{"iat":1,"iss":"{}","sub":"{}","nats":{{"type":"account","version":2}}}}"#,
        user.public_key(),
        acc.public_key()
    );
    match decode::<Account>(&hand_signed(HEADER, &payload, &user)) {
        Err(Error::WrongKeyPrefix { role, key, .. }) => {
            assert_eq!(role, "issuer");
            assert_eq!(key, user.public_key());
        }
        other => panic!("expected WrongKeyPrefix, got {other:?}"),
    }
    // A user JWT signed by an operator.
    let op = nkeys::KeyPair::new_operator();
    let u = nkeys::KeyPair::new_user();
    let payload = format!(
        r#"{{"iat":1,"iss":"{}","sub":"{}","nats":{{"type":"user","version":2}}}}"#,
        op.public_key(),
        u.public_key()
    );
    assert!(matches!(
        decode::<User>(&hand_signed(HEADER, &payload, &op)),
        Err(Error::WrongKeyPrefix { role: "issuer", .. })
    ));
}

#[test]
fn an_issuer_that_is_no_key_is_an_invalid_key() {
    let op = nkeys::KeyPair::new_operator();
    let payload = format!(
        r#"{{"iat":1,"iss":"OBOGUS","sub":"{}","nats":{{"type":"operator","version":2}}}}"#,
        op.public_key()
    );
    assert!(matches!(
        decode::<Operator>(&hand_signed(HEADER, &payload, &op)),
        Err(Error::InvalidKey { role: "issuer", .. })
    ));
}

#[test]
fn encoding_checks_subject_and_signer_roles() {
    let operator = NKey::generate(KeyKind::Operator);
    let account = NKey::generate(KeyKind::Account);
    let user = NKey::generate(KeyKind::User);
    // Subject of the wrong role.
    assert!(matches!(
        AccountClaims::new(user.public_key()).encode(&operator),
        Err(Error::WrongKeyPrefix {
            role: "subject",
            ..
        })
    ));
    // Signer of the wrong role: users are signed by accounts only.
    assert!(matches!(
        UserClaims::new(user.public_key()).encode(&operator),
        Err(Error::WrongKeyPrefix { role: "signer", .. })
    ));
    // Operator JWTs by operators only.
    assert!(matches!(
        OperatorClaims::new(operator.public_key()).encode(&account),
        Err(Error::WrongKeyPrefix { role: "signer", .. })
    ));
}

#[test]
fn decoding_as_the_wrong_claim_type_says_which() {
    let (token, _) = account_token();
    match decode::<User>(&token) {
        Err(Error::WrongClaimType { expected, found }) => {
            assert_eq!(expected, "user");
            assert_eq!(found, "account");
        }
        other => panic!("expected WrongClaimType, got {other:?}"),
    }
}

#[test]
fn oversized_tokens_are_refused_before_parsing() {
    let huge = "a".repeat(jwt::MAX_TOKEN_SIZE + 1);
    assert!(matches!(decode_any(&huge), Err(Error::TooLarge { .. })));
}

#[rstest]
#[case::operator_under_strict(true, "operator", false)]
#[case::operator_not_strict(false, "operator", true)]
#[case::operator_signing_key(true, "signing", true)]
#[case::stranger(false, "stranger", false)]
fn account_issuer_must_be_trusted_by_the_operator(
    #[case] strict: bool,
    #[case] signer: &str,
    #[case] allowed: bool,
) {
    let operator = NKey::generate(KeyKind::Operator);
    let signing = NKey::generate(KeyKind::Operator);
    let stranger = NKey::generate(KeyKind::Operator);
    let op = OperatorClaims::new(operator.public_key())
        .signing_key(signing.public_key())
        .strict_signing(strict);
    let key = match signer {
        "operator" => &operator,
        "signing" => &signing,
        _ => &stranger,
    };
    let account = NKey::generate(KeyKind::Account);
    let claims = decode::<Account>(
        &AccountClaims::new(account.public_key())
            .encode(key)
            .unwrap(),
    )
    .unwrap();
    match trust::check_account(&op, &claims) {
        Ok(()) => assert!(allowed, "{signer} should be refused"),
        Err(Error::IssuerNotAllowed {
            claim_type, issuer, ..
        }) => {
            assert!(!allowed, "{signer} should be allowed");
            assert_eq!(claim_type, "account");
            assert_eq!(issuer, key.public_key());
        }
        Err(e) => panic!("unexpected {e}"),
    }
}

#[test]
fn user_issuers_follow_the_account_signing_keys_and_scopes() {
    let account = NKey::generate(KeyKind::Account);
    let plain = NKey::generate(KeyKind::Account);
    let scoped = NKey::generate(KeyKind::Account);
    let stranger = NKey::generate(KeyKind::Account);
    let acc = AccountClaims::new(account.public_key())
        .signing_key(plain.public_key())
        .scoped_signing_key(UserScope::new(
            scoped.public_key(),
            "ro",
            UserPermissionLimits::unlimited(),
        ));
    let user = NKey::generate(KeyKind::User);
    let sign =
        |claims: UserClaims, key: &NKey| decode::<User>(&claims.encode(key).unwrap()).unwrap();
    let u = || UserClaims::new(user.public_key());
    let a = account.public_key();

    assert!(trust::check_user(&acc, &sign(u(), &account), false).is_ok());
    assert!(trust::check_user(&acc, &sign(u().issuer_account(&a), &plain), false).is_ok());
    // A signing key without issuer_account is not the account's.
    assert!(trust::check_user(&acc, &sign(u(), &plain), false).is_err());
    assert!(trust::check_user(&acc, &sign(u().issuer_account(&a), &stranger), false).is_err());
    // Scoped: no permissions of its own, then accepted; with them, refused.
    let scoped_user = UserClaims::new_scoped(user.public_key(), &a);
    assert!(trust::check_user(&acc, &sign(scoped_user, &scoped), false).is_ok());
    assert!(matches!(
        trust::check_user(&acc, &sign(u().issuer_account(&a), &scoped), false),
        Err(Error::IssuerNotAllowed {
            claim_type: "user",
            ..
        })
    ));
    // Activations: identity, or a signing key with issuer_account.
    let importer = NKey::generate(KeyKind::Account);
    let act =
        |c: ActivationClaims, key: &NKey| decode::<Activation>(&c.encode(key).unwrap()).unwrap();
    let new_act = || ActivationClaims::new(importer.public_key(), "x.>", ExportType::Stream);
    assert!(trust::check_activation(&acc, &act(new_act(), &account)).is_ok());
    assert!(trust::check_activation(&acc, &act(new_act().issuer_account(&a), &plain)).is_ok());
    assert!(trust::check_activation(&acc, &act(new_act(), &stranger)).is_err());
}

#[test]
fn dropped_fields_lists_what_an_adopted_jwt_carries_beyond_these_types() {
    let op = nkeys::KeyPair::new_operator();
    let acc = nkeys::KeyPair::new_account();
    let payload = format!(
        r#"{{"iat":1,"iss":"{}","sub":"{}","nats":{{"limits":{{"subs":-1,"future_limit":5}},"shiny":{{"a":1}},"empty_future":"","type":"account","version":2}}}}"#,
        op.public_key(),
        acc.public_key()
    );
    let token = hand_signed(HEADER, &payload, &op);
    let claims = decode::<Account>(&token).unwrap();
    let raw = RawToken::parse(&token).unwrap();
    assert_eq!(
        raw.dropped_fields(&claims),
        vec![
            "nats.limits.future_limit".to_string(),
            "nats.shiny".to_string()
        ]
    );
}

#[test]
fn go_decoding_quirks_are_mirrored() {
    let op = nkeys::KeyPair::new_operator();
    let acc = nkeys::KeyPair::new_account();
    let scoped = nkeys::KeyPair::new_account();
    // Tiered limits clear flat JetStream limits; a scope template without subs/data/payload
    // reads them as unlimited; nulls are absent; `src` may be a comma-separated string.
    let payload = format!(
        r#"{{"iat":1,"iss":"{}","sub":"{}","name":null,"nats":{{"limits":{{"disk_storage":5,"tiered_limits":{{"R1":{{"disk_storage":7}}}}}},"signing_keys":[{{"kind":"user_scope","key":"{}","role":"r","template":{{"src":"10.0.0.0/8, 10.0.0.0/8 ,192.168.0.0/16"}}}}],"type":"account","version":2}}}}"#,
        op.public_key(),
        acc.public_key(),
        scoped.public_key()
    );
    let claims = decode::<Account>(&hand_signed(HEADER, &payload, &op)).unwrap();
    assert_eq!(claims.nats.limits.jetstream, JetStreamLimits::default());
    assert_eq!(claims.nats.limits.jetstream_tiers["R1"].disk_storage, 7);
    let scope = claims
        .nats
        .signing_keys
        .scope(&scoped.public_key())
        .unwrap();
    assert_eq!(scope.template.limits.nats, NatsLimits::unlimited());
    assert_eq!(
        scope.template.limits.src,
        vec!["10.0.0.0/8", "192.168.0.0/16"]
    );
    assert_eq!(claims.name, "");
}

#[test]
fn keys_load_from_secret_bytes_and_never_print_their_seed() {
    let key = NKey::generate(KeyKind::Account);
    let seed = key.seed();
    let with_newline = format!("{}\n", seed.expose());
    let loaded = NKey::from_seed(with_newline.as_bytes()).unwrap();
    assert_eq!(loaded.public_key(), key.public_key());
    assert_eq!(loaded.kind(), KeyKind::Account);
    for shown in [
        format!("{key:?}"),
        format!("{seed:?}"),
        format!("{loaded:?}"),
    ] {
        assert!(!shown.contains(seed.expose()), "{shown}");
        assert!(!shown.contains(&seed.expose()[..10]), "{shown}");
    }
    assert!(matches!(
        NKey::from_seed_of(KeyKind::User, seed.expose().as_bytes()),
        Err(Error::WrongKeyPrefix { role: "seed", .. })
    ));
    assert!(matches!(
        NKey::from_seed(b"SAnotaseed"),
        Err(Error::BadSeed { .. })
    ));
    assert!(matches!(
        NKey::from_seed(&[0xff, 0xfe]),
        Err(Error::BadSeed { .. })
    ));
    // A public key is not a seed, and the error does not echo what it was given.
    let err = NKey::from_seed(key.public_key().as_bytes()).unwrap_err();
    assert!(matches!(err, Error::BadSeed { .. }));
}
