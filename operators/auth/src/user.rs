//! §5.3 User JWTs: permissions or a preset, connection types, a scoped role; signed by an account
//! signing key with issuer_account (the NATS operator requires strict signing). A user with
//! publicKey gets its JWT in status and no Secret; otherwise the creds go to its Secret.

use nats_api::auth::NatsUserSpec;
use nats_claims::{Creds, NKey, UserClaims, UserPermissionLimits};

use crate::account::{AccountSigningKey, permissions};
use crate::presets;

/// Why a user cannot be signed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UserError {
    #[error("role {0} names no scoped signing key of the account")]
    NoSuchRole(String),
    #[error("the account has no signing key that is not scoped and not retiring")]
    NoSigningKey,
}

/// Which account signing key signs the user: the scoped key of its role, else the first plain one.
pub fn signing_key_for<'a>(
    spec: &NatsUserSpec,
    keys: &'a [(AccountSigningKey, bool)],
) -> Result<&'a AccountSigningKey, UserError> {
    match &spec.role {
        Some(role) => keys
            .iter()
            .find(|(k, retiring)| !retiring && k.scope.as_ref().is_some_and(|s| &s.role == role))
            .map(|(k, _)| k)
            .ok_or_else(|| UserError::NoSuchRole(role.clone())),
        None => keys
            .iter()
            .find(|(k, retiring)| !retiring && k.scope.is_none())
            .map(|(k, _)| k)
            .ok_or(UserError::NoSigningKey),
    }
}

/// The user's claims. A role leaves permissions and connection types to the scoped key.
pub fn user_claims(
    name: &str,
    spec: &NatsUserSpec,
    user_key: &str,
    account_key: &str,
) -> UserClaims {
    if spec.role.is_some() {
        return UserClaims::new_scoped(user_key, account_key).name(name);
    }
    let mut body = UserPermissionLimits::unlimited();
    if let Some(p) = &spec.permissions {
        body.permissions = permissions(p);
    }
    let mut types: Vec<String> = spec
        .connection_types
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if let Some(preset) = spec.preset {
        body.permissions = presets::permissions(preset);
        if types.is_empty() {
            types = presets::connection_types(preset)
                .iter()
                .map(|s| s.to_string())
                .collect();
        }
    }
    body.allowed_connection_types = types;
    UserClaims::new(user_key)
        .name(name)
        .permission_limits(body)
        .issuer_account(account_key)
}

/// What the controller hands back for a signed user.
#[derive(Debug)]
pub enum Issued {
    /// spec.publicKey: the JWT goes to status.jwt, no Secret is written.
    JwtOnly(String),
    /// The creds file for credentials.secretKeyRef.
    Creds(nats_claims::SecretText),
}

/// Signs the user: with the client's own key the JWT only, with a seed the controller holds the
/// creds file.
pub fn issue(
    claims: &UserClaims,
    signer: &NKey,
    user_seed: Option<&NKey>,
    issued_at: i64,
) -> Result<Issued, nats_claims::Error> {
    let jwt = claims.encode_issued_at(signer, issued_at)?;
    match user_seed {
        None => Ok(Issued::JwtOnly(jwt)),
        Some(seed) => Ok(Issued::Creds(Creds::render_key(&jwt, seed)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::auth::{
        AccountKind, AccountReference, ConnectionType, Permissions, Scope, SubjectPermissions,
        UserPreset,
    };
    use nats_claims::KeyKind;
    use rstest::rstest;

    fn spec() -> NatsUserSpec {
        NatsUserSpec {
            account_ref: AccountReference {
                kind: AccountKind::NatsAccount,
                name: "orders".into(),
                namespace: None,
            },
            permissions: None,
            preset: None,
            connection_types: vec![],
            role: None,
            public_key: None,
            credentials: None,
        }
    }

    /// Story 02's orders-app (04-orders.yaml).
    fn orders_app() -> NatsUserSpec {
        NatsUserSpec {
            permissions: Some(Permissions {
                publish: Some(SubjectPermissions {
                    allow: vec![
                        "orders.>".into(),
                        "$JS.API.>".into(),
                        "$JS.ACK.ORDERS.>".into(),
                    ],
                    deny: vec![],
                }),
                subscribe: Some(SubjectPermissions {
                    allow: vec!["_INBOX.>".into(), "orders.>".into()],
                    deny: vec![],
                }),
            }),
            ..spec()
        }
    }

    #[test]
    fn story_02_orders_app_permissions() {
        let c = user_claims("orders-app", &orders_app(), "UAPP", "AORDERS");
        let p = &c.nats.permission_limits.permissions;
        assert_eq!(
            p.publish.allow,
            ["orders.>", "$JS.API.>", "$JS.ACK.ORDERS.>"]
        );
        assert_eq!(p.subscribe.allow, ["_INBOX.>", "orders.>"]);
        assert_eq!(c.nats.issuer_account, "AORDERS");
    }

    #[rstest]
    #[case::readonly_preset(UserPreset::Readonly, "$JS.API.STREAM.INFO.*", &[])]
    #[case::auth_controller_preset(UserPreset::AuthController, "$SYS.REQ.CLAIMS.UPDATE", &[])]
    #[case::leafnode_preset_restricts_connection_types(UserPreset::Leafnode, "", &["LEAFNODE", "LEAFNODE_WS"])]
    fn a_preset_gives_its_table(
        #[case] preset: UserPreset,
        #[case] some_publish: &str,
        #[case] types: &[&str],
    ) {
        let s = NatsUserSpec {
            preset: Some(preset),
            ..spec()
        };
        let c = user_claims("u", &s, "UX", "AX");
        let body = &c.nats.permission_limits;
        if !some_publish.is_empty() {
            assert!(
                body.permissions
                    .publish
                    .allow
                    .iter()
                    .any(|a| a == some_publish)
            );
        }
        assert_eq!(body.allowed_connection_types, types);
    }

    #[test]
    fn connection_types_from_spec() {
        let s = NatsUserSpec {
            connection_types: vec![ConnectionType::Websocket, ConnectionType::Mqtt],
            ..spec()
        };
        let c = user_claims("u", &s, "UX", "AX");
        assert_eq!(
            c.nats.permission_limits.allowed_connection_types,
            ["WEBSOCKET", "MQTT"]
        );
    }

    fn key(pk: &str, role: Option<&str>) -> AccountSigningKey {
        AccountSigningKey {
            public_key: pk.into(),
            scope: role.map(|r| Scope {
                role: r.into(),
                ..Scope::default()
            }),
        }
    }

    // "Signed with the scoped key `batch`: the role replaces permissions, connectionTypes and preset."
    #[rstest]
    #[case::plain_user_takes_the_first_plain_key(None, Ok("AUSERS"))]
    #[case::role_takes_its_scoped_key(Some("batch"), Ok("ABATCH"))]
    #[case::unknown_role(Some("nope"), Err(UserError::NoSuchRole("nope".into())))]
    fn which_key_signs(#[case] role: Option<&str>, #[case] want: Result<&str, UserError>) {
        let keys = [
            (key("AOLD", None), true),
            (key("ABATCH", Some("batch")), false),
            (key("AUSERS", None), false),
        ];
        let s = NatsUserSpec {
            role: role.map(str::to_string),
            ..spec()
        };
        assert_eq!(
            signing_key_for(&s, &keys).map(|k| k.public_key.as_str()),
            want
        );
    }

    #[test]
    fn a_scoped_user_carries_no_permissions_of_its_own() {
        let s = NatsUserSpec {
            role: Some("batch".into()),
            ..spec()
        };
        let c = user_claims("orders-batch", &s, "UB", "AORDERS");
        assert!(c.nats.permission_limits.is_empty());
        assert_eq!(c.nats.issuer_account, "AORDERS");
    }

    // "with publicKey instead, receives only a signed JWT in status and no Secret"
    #[test]
    fn public_key_only_user_gets_a_jwt_and_no_creds() {
        let account = NKey::generate(KeyKind::Account);
        let signing = NKey::generate(KeyKind::Account);
        let device = NKey::generate(KeyKind::User);
        let c = user_claims("d", &spec(), &device.public_key(), &account.public_key());
        assert!(matches!(
            issue(&c, &signing, None, 1).unwrap(),
            Issued::JwtOnly(_)
        ));
        match issue(&c, &signing, Some(&device), 1).unwrap() {
            Issued::Creds(text) => {
                let parsed = Creds::parse(text.expose()).unwrap();
                let back: UserClaims = nats_claims::decode(&parsed.jwt).unwrap();
                assert_eq!(back.subject, device.public_key());
                assert_eq!(back.issuer, signing.public_key());
            }
            Issued::JwtOnly(_) => panic!("a seed gives creds"),
        }
    }
}
