//! §5.1/§5.2 Account JWTs: a NatsAccount's limits (JetStream account-wide or tiers R1..R5),
//! exports, imports, signing keys (scoped too) and revocations, with its jwtTTL expiry; a
//! NatsSystemAccount's JWT carries no expiry and the stepdown imports.

use std::time::Duration;

use nats_api::auth::{
    AccountLimits as SpecLimits, JetStreamLimits as SpecJs, NatsAccountSpec, Scope, TierName,
};
use nats_api::jetstream::GoDuration;
use nats_claims::{
    AccountClaims, Import, JetStreamLimits, OperatorLimits, Permission, Permissions,
    UserPermissionLimits, UserScope,
};

use crate::units::{UnitError, bytes};

/// One account signing key as the JWT lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct AccountSigningKey {
    pub public_key: String,
    pub scope: Option<Scope>,
}

/// Spec permissions to JWT permissions.
pub fn permissions(p: &nats_api::auth::Permissions) -> Permissions {
    let side = |s: &Option<nats_api::auth::SubjectPermissions>| match s {
        Some(s) => Permission {
            allow: s.allow.clone(),
            deny: s.deny.clone(),
        },
        None => Permission::default(),
    };
    Permissions {
        publish: side(&p.publish),
        subscribe: side(&p.subscribe),
        response: None,
    }
}

/// The template a scoped signing key gives the users it signs.
pub fn scope_template(scope: &Scope) -> Result<UserPermissionLimits, UnitError> {
    let mut t = UserPermissionLimits::unlimited();
    if let Some(p) = &scope.permissions {
        t.permissions = permissions(p);
    }
    t.allowed_connection_types = scope
        .connection_types
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if let Some(l) = &scope.limits {
        if let Some(s) = l.subscriptions {
            t.limits.nats.subs = s;
        }
        if let Some(p) = &l.payload {
            t.limits.nats.payload = bytes("scope.limits.payload", p)?;
        }
    }
    Ok(t)
}

fn jetstream(js: &SpecJs) -> Result<JetStreamLimits, UnitError> {
    let q = |field, v: &Option<_>| v.as_ref().map(|q| bytes(field, q)).transpose();
    Ok(JetStreamLimits {
        memory_storage: q("memoryStorage", &js.memory_storage)?.unwrap_or(0),
        disk_storage: q("diskStorage", &js.disk_storage)?.unwrap_or(0),
        streams: js.streams.unwrap_or(-1),
        consumer: js.consumers.unwrap_or(-1),
        max_ack_pending: js.max_ack_pending.unwrap_or(-1),
        memory_max_stream_bytes: q("memoryMaxStreamBytes", &js.memory_max_stream_bytes)?
            .unwrap_or(0),
        disk_max_stream_bytes: q("diskMaxStreamBytes", &js.disk_max_stream_bytes)?.unwrap_or(0),
        max_bytes_required: js.max_bytes_required.unwrap_or(false),
    })
}

fn tier(name: TierName) -> &'static str {
    match name {
        TierName::R1 => "R1",
        TierName::R2 => "R2",
        TierName::R3 => "R3",
        TierName::R4 => "R4",
        TierName::R5 => "R5",
    }
}

/// A NatsAccount's limits: connections, subscriptions, payload; JetStream account-wide or by tier.
pub fn account_limits(spec: Option<&SpecLimits>) -> Result<OperatorLimits, UnitError> {
    let mut limits = OperatorLimits::unlimited();
    let Some(spec) = spec else {
        return Ok(limits);
    };
    if let Some(c) = spec.connections {
        limits.account.conn = c;
    }
    if let Some(s) = spec.subscriptions {
        limits.nats.subs = s;
    }
    if let Some(p) = &spec.payload {
        limits.nats.payload = bytes("limits.payload", p)?;
    }
    if let Some(js) = &spec.jetstream {
        if js.tiers.is_empty() {
            limits.jetstream = jetstream(js)?;
        } else {
            for t in &js.tiers {
                let as_js = SpecJs {
                    memory_storage: t.memory_storage.clone(),
                    disk_storage: t.disk_storage.clone(),
                    streams: t.streams,
                    consumers: t.consumers,
                    max_ack_pending: t.max_ack_pending,
                    memory_max_stream_bytes: t.memory_max_stream_bytes.clone(),
                    disk_max_stream_bytes: t.disk_max_stream_bytes.clone(),
                    max_bytes_required: t.max_bytes_required,
                    tiers: vec![],
                };
                limits
                    .jetstream_tiers
                    .insert(tier(t.name).to_string(), jetstream(&as_js)?);
            }
        }
    }
    Ok(limits)
}

/// The JWT lifetime of jwtTTL: `None` for `0` (no expiry); 48h when unset; never under the
/// floor (`nats_api::auth::MIN_JWT_TTL`), to which a TTL stored before the CEL rule is raised
/// ([`jwt_ttl_raised`] says so).
pub fn jwt_ttl(ttl: Option<&GoDuration>) -> Result<Option<Duration>, UnitError> {
    let text = ttl
        .map(GoDuration::as_str)
        .unwrap_or(nats_api::auth::DEFAULT_JWT_TTL);
    if text == "0" {
        return Ok(None);
    }
    let d = GoDuration::new(text)
        .parse()
        .map_err(|_| UnitError::Duration {
            field: "jwtTTL",
            text: text.to_string(),
        })?;
    Ok((!d.is_zero()).then_some(d.max(min_jwt_ttl())))
}

/// The floor of jwtTTL as a Duration.
fn min_jwt_ttl() -> Duration {
    GoDuration::new(nats_api::auth::MIN_JWT_TTL)
        .parse()
        .unwrap_or(Duration::from_secs(60))
}

/// Where jwtTTL is under the floor (an object stored by an apiserver without the CEL rule), the
/// note that says it was raised; `None` otherwise.
pub fn jwt_ttl_raised(ttl: Option<&GoDuration>) -> Option<String> {
    let text = ttl?.as_str();
    let d = GoDuration::new(text).parse().ok()?;
    let floor = nats_api::auth::MIN_JWT_TTL;
    (!d.is_zero() && d < min_jwt_ttl())
        .then(|| format!("spec.jwtTTL {text} is below the floor of {floor}; signed with {floor}"))
}

/// Whether an account JWT issued at `issued_at` and expiring at `expires` (0: never) must be
/// re-signed at `now`: at half its TTL, so a home outage costs nothing for half a TTL.
pub fn needs_resign(issued_at: i64, expires: i64, now: i64) -> bool {
    expires != 0 && now >= issued_at + (expires - issued_at) / 2
}

/// What an account JWT is built from besides its spec.
pub struct AccountInput<'a> {
    pub name: &'a str,
    pub public_key: &'a str,
    pub signing_keys: &'a [AccountSigningKey],
    /// Resolved imports (see [`crate::exports::resolve_import`]).
    pub imports: Vec<Import>,
    /// `(public key, at)` from the revocation record.
    pub revocations: &'a [(String, i64)],
    /// The issue time; the expiry counts from it.
    pub issued_at: i64,
}

fn signing_keys(
    mut claims: AccountClaims,
    keys: &[AccountSigningKey],
) -> Result<AccountClaims, UnitError> {
    for k in keys {
        claims = match &k.scope {
            None => claims.signing_key(k.public_key.clone()),
            Some(s) => claims.scoped_signing_key(UserScope::new(
                k.public_key.clone(),
                s.role.clone(),
                scope_template(s)?,
            )),
        };
    }
    Ok(claims)
}

/// A NatsAccount's claims.
pub fn account_claims(
    spec: &NatsAccountSpec,
    input: AccountInput<'_>,
) -> Result<AccountClaims, UnitError> {
    let mut claims = AccountClaims::new(input.public_key)
        .name(input.name)
        .limits(account_limits(spec.limits.as_ref())?);
    claims = signing_keys(claims, input.signing_keys)?;
    for e in crate::exports::jwt_exports(&spec.exports) {
        claims = claims.export(e);
    }
    for i in input.imports {
        claims = claims.import(i);
    }
    for (key, at) in input.revocations {
        claims = claims.revoke_at(key.clone(), *at);
    }
    if let Some(ttl) = jwt_ttl(spec.jwt_ttl.as_ref())? {
        let secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
        claims = claims.expires(input.issued_at.saturating_add(secs));
    }
    Ok(claims)
}

/// The NatsSystemAccount's claims: no expiry (its literal copies in NatsOperatorTrust would go
/// stale), and the prefixed imports of every account that exports jetstream-stepdown.
pub fn system_account_claims(
    input: AccountInput<'_>,
    stepdown_exporters: &[String],
) -> Result<AccountClaims, UnitError> {
    let mut claims = AccountClaims::new(input.public_key).name(input.name);
    claims = signing_keys(claims, input.signing_keys)?;
    for i in input
        .imports
        .into_iter()
        .chain(crate::exports::stepdown_imports(
            stepdown_exporters.iter().map(String::as_str),
        ))
    {
        claims = claims.import(i);
    }
    for (key, at) in input.revocations {
        claims = claims.revoke_at(key.clone(), *at);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use nats_api::auth::{Export, ExportPreset, JetStreamTier, UserLimits};
    use nats_api::common::ObjectReference;
    use rstest::rstest;

    const T0: i64 = 1_700_000_000;

    fn q(s: &str) -> Option<Quantity> {
        Some(Quantity(s.into()))
    }

    fn spec() -> NatsAccountSpec {
        NatsAccountSpec {
            operator_ref: ObjectReference {
                name: "demo".into(),
                namespace: None,
            },
            keys: None,
            public_key: None,
            jwt_ttl: None,
            adoption: None,
            limits: None,
            exports: vec![],
            imports: vec![],
        }
    }

    fn input<'a>(keys: &'a [AccountSigningKey], rev: &'a [(String, i64)]) -> AccountInput<'a> {
        AccountInput {
            name: "orders",
            public_key: "AORDERS",
            signing_keys: keys,
            imports: vec![],
            revocations: rev,
            issued_at: T0,
        }
    }

    /// Story 02's orders account (04-orders.yaml).
    fn story_02_limits() -> SpecLimits {
        SpecLimits {
            connections: Some(200),
            subscriptions: Some(10000),
            payload: q("1048576"),
            jetstream: Some(SpecJs {
                memory_storage: q("1073741824"),
                disk_storage: q("53687091200"),
                streams: Some(20),
                consumers: Some(200),
                max_ack_pending: Some(10000),
                ..SpecJs::default()
            }),
        }
    }

    #[test]
    fn story_02_orders_limits_account_wide() {
        let l = account_limits(Some(&story_02_limits())).unwrap();
        assert_eq!(l.account.conn, 200);
        assert_eq!(l.nats.subs, 10000);
        assert_eq!(l.nats.payload, 1_048_576);
        assert_eq!(l.jetstream.memory_storage, 1_073_741_824);
        assert_eq!(l.jetstream.disk_storage, 53_687_091_200);
        assert_eq!(l.jetstream.streams, 20);
        assert_eq!(l.jetstream.consumer, 200);
        assert_eq!(l.jetstream.max_ack_pending, 10000);
        assert!(l.jetstream_tiers.is_empty());
    }

    #[test]
    fn tiers_replace_account_wide_jetstream() {
        let spec = SpecLimits {
            jetstream: Some(SpecJs {
                tiers: vec![
                    JetStreamTier {
                        name: TierName::R1,
                        memory_storage: q("1Gi"),
                        disk_storage: q("10Gi"),
                        streams: Some(5),
                        consumers: None,
                        max_ack_pending: None,
                        memory_max_stream_bytes: None,
                        disk_max_stream_bytes: None,
                        max_bytes_required: None,
                    },
                    JetStreamTier {
                        name: TierName::R3,
                        memory_storage: None,
                        disk_storage: q("30Gi"),
                        streams: Some(2),
                        consumers: Some(10),
                        max_ack_pending: None,
                        memory_max_stream_bytes: None,
                        disk_max_stream_bytes: q("1Gi"),
                        max_bytes_required: Some(true),
                    },
                ],
                ..SpecJs::default()
            }),
            ..SpecLimits::default()
        };
        let l = account_limits(Some(&spec)).unwrap();
        assert_eq!(l.jetstream, JetStreamLimits::default());
        assert_eq!(l.jetstream_tiers.keys().collect::<Vec<_>>(), ["R1", "R3"]);
        assert_eq!(l.jetstream_tiers["R1"].disk_storage, 10 << 30);
        assert_eq!(l.jetstream_tiers["R1"].consumer, -1);
        assert_eq!(l.jetstream_tiers["R3"].disk_max_stream_bytes, 1 << 30);
        assert!(l.jetstream_tiers["R3"].max_bytes_required);
    }

    #[test]
    fn no_limits_are_unlimited_without_jetstream() {
        let l = account_limits(None).unwrap();
        assert_eq!(l, OperatorLimits::unlimited());
        assert!(!l.is_jetstream_enabled());
    }

    // "every account JWT carries an expiry, NatsAccount.spec.jwtTTL (default 48h)"; "jwtTTL: 0
    // signs an account JWT with no expiry".
    #[rstest]
    #[case::default_48h(None, T0 + 48 * 3600)]
    #[case::explicit_1h(Some("1h"), T0 + 3600)]
    #[case::zero_means_none(Some("0"), 0)]
    #[case::zero_seconds_means_none(Some("0s"), 0)]
    #[case::the_floor(Some("1m"), T0 + 60)]
    #[case::below_the_floor_is_raised_to_it(Some("1s"), T0 + 60)]
    #[case::a_nanosecond_is_raised_too(Some("1ns"), T0 + 60)]
    fn jwt_ttl_sets_the_expiry(#[case] ttl: Option<&str>, #[case] exp: i64) {
        let mut s = spec();
        s.jwt_ttl = ttl.map(GoDuration::new);
        let c = account_claims(&s, input(&[], &[])).unwrap();
        assert_eq!(c.expires, exp);
    }

    #[rstest]
    #[case::unset(None, false)]
    #[case::never_expiring(Some("0"), false)]
    #[case::at_the_floor(Some("1m"), false)]
    #[case::below_it(Some("4s"), true)]
    fn a_ttl_below_the_floor_is_said_to_be_raised(#[case] ttl: Option<&str>, #[case] said: bool) {
        let ttl = ttl.map(GoDuration::new);
        let note = jwt_ttl_raised(ttl.as_ref());
        assert_eq!(note.is_some(), said, "{note:?}");
        if let Some(n) = note {
            assert!(
                n.contains("spec.jwtTTL 4s") && n.contains("floor of 1m"),
                "{n}"
            );
        }
    }

    // "re-signed at half its TTL"
    #[rstest]
    #[case::fresh(T0, T0 + 100, T0 + 10, false)]
    #[case::just_before_half(T0, T0 + 100, T0 + 49, false)]
    #[case::at_half(T0, T0 + 100, T0 + 50, true)]
    #[case::expired(T0, T0 + 100, T0 + 200, true)]
    #[case::no_expiry_never(T0, 0, T0 + 1_000_000, false)]
    fn resign_at_half_ttl(
        #[case] iat: i64,
        #[case] exp: i64,
        #[case] now: i64,
        #[case] want: bool,
    ) {
        assert_eq!(needs_resign(iat, exp, now), want);
    }

    #[test]
    fn signing_keys_plain_and_scoped() {
        let keys = [
            AccountSigningKey {
                public_key: "AUSERS".into(),
                scope: None,
            },
            AccountSigningKey {
                public_key: "ABATCH".into(),
                scope: Some(Scope {
                    role: "batch".into(),
                    permissions: Some(nats_api::auth::Permissions {
                        publish: Some(nats_api::auth::SubjectPermissions {
                            allow: vec!["orders.batch.>".into()],
                            deny: vec![],
                        }),
                        subscribe: None,
                    }),
                    connection_types: vec![nats_api::auth::ConnectionType::Standard],
                    limits: Some(UserLimits {
                        subscriptions: Some(100),
                        payload: q("1Mi"),
                    }),
                }),
            },
        ];
        let c = account_claims(&spec(), input(&keys, &[])).unwrap();
        let sk = &c.nats.signing_keys;
        assert!(sk.contains("AUSERS") && sk.scope("AUSERS").is_none());
        let scope = sk.scope("ABATCH").unwrap();
        assert_eq!(scope.role, "batch");
        assert_eq!(scope.template.permissions.publish.allow, ["orders.batch.>"]);
        assert_eq!(scope.template.allowed_connection_types, ["STANDARD"]);
        assert_eq!(scope.template.limits.nats.subs, 100);
        assert_eq!(scope.template.limits.nats.payload, 1 << 20);
    }

    #[test]
    fn revocations_come_from_the_record() {
        let rev = [("UGONE".to_string(), T0 - 5), ("*".to_string(), T0 - 1)];
        let c = account_claims(&spec(), input(&[], &rev)).unwrap();
        assert!(c.is_user_revoked("UGONE", T0 - 10));
        assert!(!c.is_user_revoked("UGONE", T0));
        assert!(c.is_user_revoked("UANY", T0 - 2));
    }

    #[test]
    fn account_exports_include_the_stepdown_preset() {
        let mut s = spec();
        s.exports = vec![Export {
            preset: Some(ExportPreset::JetStreamStepdown),
            ..Export::default()
        }];
        let c = account_claims(&s, input(&[], &[])).unwrap();
        assert_eq!(c.nats.exports.len(), 2);
    }

    // "System account JWTs carry no expiry"
    #[test]
    fn system_account_has_no_expiry_and_imports_stepdowns() {
        let c = system_account_claims(input(&[], &[]), &["AONE".into(), "ATWO".into()]).unwrap();
        assert_eq!(c.expires, 0);
        assert_eq!(c.nats.imports.len(), 4);
        assert!(
            c.nats
                .imports
                .iter()
                .all(|i| i.local_subject.starts_with("$JS.A"))
        );
    }
}
