//! Property tests over the decoder: no input panics it, every failure is a typed error, a
//! mutated token never decodes to different claims, and generated claims round-trip exactly.
//! Case counts are fixed so the run is bounded (a few seconds); raise them with PROPTEST_CASES.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use nats_claims::*;
use proptest::prelude::*;
use std::sync::OnceLock;

struct Fixture {
    operator: NKey,
    operator_pair: nkeys::KeyPair,
    account: NKey,
    token: String,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let operator = NKey::generate(KeyKind::Operator);
        let account = NKey::generate(KeyKind::Account);
        let token = AccountClaims::new(account.public_key())
            .name("fuzz")
            .export(Export::stream("a.>").token_required())
            .revoke_at("UABC", 5)
            .encode(&operator)
            .unwrap();
        Fixture {
            operator_pair: nkeys::KeyPair::from_seed(operator.seed().expose()).unwrap(),
            operator,
            account,
            token,
        }
    })
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(cases),
        max_shrink_time: 10_000,
        ..ProptestConfig::default()
    }
}

/// Every entry point over untrusted text.
fn decode_everything(text: &str) {
    let _ = decode_any(text);
    let _ = decode::<Operator>(text);
    let _ = decode_unverified::<Account>(text);
    let _ = decode_unverified::<User>(text);
    let _ = decode_unverified::<Activation>(text);
    if let Ok(raw) = RawToken::parse(text) {
        let _ = raw.verify(text);
        if let Ok(c) = raw.typed::<Account>() {
            let _ = raw.dropped_fields(&c);
        }
    }
    let _ = Creds::parse(text);
    let _ = NKey::from_seed(text.as_bytes());
}

/// The decoding paths of a token that may be validly signed; one signature check per call,
/// since ed25519 in a debug build dominates the run time.
fn decode_signed(text: &str) {
    let _ = decode_any(text);
    if let Ok(raw) = RawToken::parse(text) {
        if let Ok(c) = raw.typed::<Operator>() {
            let _ = raw.dropped_fields(&c);
        }
        if let Ok(c) = raw.typed::<Account>() {
            let _ = raw.dropped_fields(&c);
        }
        if let Ok(c) = raw.typed::<User>() {
            let _ = raw.dropped_fields(&c);
        }
        if let Ok(c) = raw.typed::<Activation>() {
            let _ = raw.dropped_fields(&c);
        }
    }
}

/// Arbitrary JSON of bounded depth.
fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null)),
        "[a-z_*>. ]{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    // Field names the claims know, so type mismatches are exercised.
                    Just("limits".to_string()),
                    Just("subs".to_string()),
                    Just("exports".to_string()),
                    Just("imports".to_string()),
                    Just("signing_keys".to_string()),
                    Just("revocations".to_string()),
                    Just("pub".to_string()),
                    Just("allow".to_string()),
                    Just("resp".to_string()),
                    Just("src".to_string()),
                    Just("kind".to_string()),
                    Just("type".to_string()),
                    Just("service_latency".to_string()),
                    Just("sampling".to_string()),
                    Just("tiered_limits".to_string()),
                    "[a-z_]{1,8}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,300}") {
        decode_everything(&text);
    }

    #[test]
    fn token_shaped_text_never_panics(
        a in "[A-Za-z0-9_=+/-]{0,80}",
        b in "[A-Za-z0-9_=+/-]{0,200}",
        c in "[A-Za-z0-9_=+/-]{0,100}",
    ) {
        decode_everything(&format!("{a}.{b}.{c}"));
        decode_everything(&format!("eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.{b}.{c}"));
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// Flip, drop or insert bytes of a valid token: decoding either fails with a typed error or
    /// (a change in the signature's spare base64 bits) yields exactly the original claims.
    #[test]
    fn mutated_tokens_fail_or_decode_to_the_original(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..4),
    ) {
        let f = fixture();
        let original = decode::<Account>(&f.token).unwrap();
        let mut bytes = f.token.clone().into_bytes();
        for (at, op, byte) in edits {
            let i = at.index(bytes.len().max(1));
            match op {
                0 if !bytes.is_empty() => bytes[i] ^= byte | 1,
                1 if !bytes.is_empty() => { bytes.remove(i); }
                _ => bytes.insert(i.min(bytes.len()), byte),
            }
        }
        let Ok(text) = String::from_utf8(bytes) else { return Ok(()); };
        decode_signed(&text);
        if let Ok(claims) = decode::<Account>(&text) {
            prop_assert_eq!(claims, original);
        }
    }

    /// Validly signed tokens with arbitrary `nats` bodies: typed claims or a typed error.
    #[test]
    fn signed_arbitrary_bodies_never_panic(body in json(), kind in 0usize..4) {
        let f = fixture();
        let mut nats = match body {
            serde_json::Value::Object(m) => m,
            other => {
                let mut m = serde_json::Map::new();
                m.insert("x".into(), other);
                m
            }
        };
        nats.insert("type".into(), ["operator", "account", "user", "activation"][kind].into());
        nats.insert("version".into(), 2.into());
        let payload = serde_json::json!({
            "iat": 1, "iss": f.operator.public_key(), "sub": f.account.public_key(), "nats": nats,
        });
        let input = format!(
            "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.{}",
            B64.encode(payload.to_string())
        );
        let token = format!("{input}.{}", B64.encode(f.operator_pair.sign(input.as_bytes()).unwrap()));
        decode_signed(&token);
    }
}

fn subject() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,6}(\\.[a-z*]{1,4}){0,3}",
        "[a-z]{1,6}\\.>",
        Just("<&>\u{2028}".to_string())
    ]
}

fn permission() -> impl Strategy<Value = Permission> {
    (
        prop::collection::vec(subject(), 0..3),
        prop::collection::vec(subject(), 0..3),
    )
        .prop_map(|(allow, deny)| Permission { allow, deny })
}

fn user_limits() -> impl Strategy<Value = UserPermissionLimits> {
    (
        permission(),
        permission(),
        prop::option::of((0i64..100, 0i64..10_000_000_000)),
        prop::collection::vec("[0-9]{1,3}\\.[0-9]{1,3}\\.0\\.0/16", 0..3),
        (-1i64..1000, -1i64..1_000_000, -1i64..65536),
        any::<bool>(),
        prop::collection::vec(
            prop::sample::select(vec!["STANDARD", "WEBSOCKET", "LEAFNODE", "MQTT"]),
            0..3,
        ),
    )
        .prop_map(
            |(publish, subscribe, resp, src, (subs, data, payload), bearer, types)| {
                UserPermissionLimits {
                    permissions: Permissions {
                        publish,
                        subscribe,
                        response: resp.map(|(max, ttl)| ResponsePermission { max, ttl }),
                    },
                    limits: Limits {
                        src,
                        nats: NatsLimits {
                            subs,
                            data,
                            payload,
                        },
                        ..Limits::default()
                    },
                    bearer,
                    allowed_connection_types: types.into_iter().map(String::from).collect(),
                    ..UserPermissionLimits::default()
                }
            },
        )
}

proptest! {
    #![proptest_config(config(128))]

    /// Generated user claims encode and decode back to exactly what was sealed, and the payload
    /// re-encodes byte-for-byte.
    #[test]
    fn user_claims_round_trip(p in user_limits(), name in "[ -~]{0,20}", exp in 0i64..5_000_000_000) {
        let f = fixture();
        let user = NKey::generate(KeyKind::User);
        let claims = UserClaims::new(user.public_key()).name(name).expires(exp).permission_limits(p);
        let token = claims.encode_issued_at(&f.account, 1_700_000_000).unwrap();
        let decoded = decode::<User>(&token).unwrap();
        prop_assert_eq!(&decoded, &claims.sealed(&f.account, 1_700_000_000).unwrap());
        prop_assert_eq!(jwt::claims_hash(&decoded), decoded.id.clone());
        let raw = B64.decode(token.split('.').nth(1).unwrap()).unwrap();
        prop_assert_eq!(jwt::payload_json(&decoded).unwrap().into_bytes(), raw);
    }

    /// Generated account claims (limits, exports, imports, revocations, scoped keys) round-trip.
    #[test]
    fn account_claims_round_trip(
        js in (0i64..1 << 40, 0i64..1 << 40, -1i64..100),
        tiers in prop::collection::btree_map("R[1-5]", (0i64..1 << 30, any::<bool>()), 0..3),
        exports in prop::collection::vec((subject(), any::<bool>(), any::<bool>(), 0u8..101), 0..4),
        imports in prop::collection::vec((subject(), subject(), any::<bool>()), 0..4),
        revoked in prop::collection::btree_map("U[A-Z]{4}", 0i64..2_000_000_000, 0..4),
        scope in prop::option::of(user_limits()),
    ) {
        let f = fixture();
        let mut claims = AccountClaims::new(f.account.public_key()).name("gen");
        claims.nats.limits.jetstream = JetStreamLimits {
            memory_storage: js.0, disk_storage: js.1, streams: js.2, ..JetStreamLimits::default()
        };
        for (tier, (disk, req)) in tiers {
            claims = claims.jetstream_tier(tier, JetStreamLimits {
                disk_storage: disk, max_bytes_required: req, ..JetStreamLimits::default()
            });
        }
        for (subj, service, private, sampling) in exports {
            let mut e = if service { Export::service(subj) } else { Export::stream(subj) };
            if private { e = e.token_required(); }
            if service && sampling > 0 {
                e = e.latency(Sampling::Percent(sampling), "lat").response_type(ResponseType::Stream);
            }
            claims = claims.export(e);
        }
        for (subj, local, service) in imports {
            let acc = f.account.public_key();
            let i = if service { Import::service(acc, subj) } else { Import::stream(acc, subj) };
            claims = claims.import(i.local_subject(local));
        }
        for (key, at) in revoked {
            claims = claims.revoke_at(key, at);
        }
        if let Some(template) = scope {
            claims = claims.scoped_signing_key(UserScope::new(f.operator.public_key(), "r", template));
        }
        let token = claims.encode_issued_at(&f.operator, 1_700_000_000).unwrap();
        let mut want = claims.sealed(&f.operator, 1_700_000_000).unwrap();
        // A scope template's zero subs/data/payload are omitted and read back as -1, as in Go.
        for scope in want.nats.signing_keys.0.values_mut().flatten() {
            let n = &mut scope.template.limits.nats;
            for v in [&mut n.subs, &mut n.data, &mut n.payload] {
                if *v == 0 { *v = -1; }
            }
        }
        prop_assert_eq!(decode::<Account>(&token).unwrap(), want);
    }
}
