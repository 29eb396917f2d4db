//! A NatsUser's key: its own spec.publicKey, else the seed in its creds Secret (only a Secret the
//! user controls, §5.3), else a new one (the creds Secret is then written afresh); the Secret
//! read first only for a user signed before ([`read_first`]).

use controller_kit::blocked::Blocked;
use controller_kit::conditions::Decided;
use k8s_openapi::api::core::v1::Secret;
use nats_api::auth::{DEFAULT_CREDS_KEY, NatsUser, NatsUserStatus, condition, reason};
use nats_claims::{Creds, KeyKind, NKey};

use super::stop::{Stop, not_ready};
use crate::controller::Context;
use crate::controller::creds::creds_secret_of;

/// Where the creds go: credentials.secretKeyRef, and the Secret as found there.
pub(super) struct CredsRef {
    pub secret: String,
    pub key: String,
    /// `None`: absent, to be created.
    pub found: Option<Secret>,
}

/// The user's key as this pass signs it.
pub(super) struct UserKey {
    pub public_key: String,
    /// The seed, where the creds are written (none for a publicKey).
    pub seed: Option<NKey>,
    pub creds: Option<CredsRef>,
    /// The JWT signed before: status.jwt, or the one in the creds Secret.
    pub prev_jwt: Option<String>,
}

/// Whether the creds Secret is read before the pass signs: only for a user signed before
/// (status.publicKey recorded), whose Secret holds the seed it keeps. A user never signed has no
/// Secret of its own (a create is the only write of one it does not control, and it comes after
/// this phase): its pass signs a new seed and creates the Secret, which never overwrites one;
/// only where that create finds a Secret there (the pass that created it ended before its
/// status, or another owner's) is it read, and the pass signs again from what it holds
/// (SecretConflict where another owner holds it), as a pass that read it first would have.
pub(super) fn read_first(prev: &NatsUserStatus) -> bool {
    prev.public_key.is_some()
}

/// The user's key (SecretConflict where another owner holds the creds Secret; InvalidKeys where
/// neither publicKey nor credentials is set); the creds Secret read only where `read`, else
/// taken as absent ([`read_first`]).
pub(super) async fn user_key(
    ctx: &Context,
    u: &NatsUser,
    prev: &NatsUserStatus,
    resolved: &Decided,
    read: bool,
) -> Result<UserKey, Stop> {
    let creds_ref = u.spec.credentials.as_ref().map(|c| {
        let key = c.secret_key_ref.key.clone();
        (
            c.secret_key_ref.name.clone(),
            key.unwrap_or_else(|| DEFAULT_CREDS_KEY.to_string()),
        )
    });
    let prev_jwt = prev.jwt.clone();
    match (&u.spec.public_key, creds_ref) {
        (Some(pk), creds) => Ok(UserKey {
            public_key: pk.clone(),
            seed: None,
            creds: creds.map(|(secret, key)| CredsRef {
                secret,
                key,
                found: None,
            }),
            prev_jwt,
        }),
        (None, Some((secret, key))) if !read => Ok(from_creds(
            CredsRef {
                secret,
                key,
                found: None,
            },
            prev_jwt,
        )),
        (None, Some((secret, key))) => {
            let found = creds_secret_of(ctx, u, &secret)
                .await?
                .map_err(|conflict| {
                    not_ready(reason::SECRET_CONFLICT, conflict.to_string(), resolved)
                })?;
            Ok(from_creds(CredsRef { secret, key, found }, prev_jwt))
        }
        (None, None) => Err(Stop::Refused(vec![
            Blocked::new(
                reason::INVALID_KEYS,
                "neither publicKey nor credentials is set",
            )
            .condition(condition::READY),
        ])),
    }
}

/// The key of the creds in the Secret found, with the JWT they carry, else a new key.
fn from_creds(creds: CredsRef, prev_jwt: Option<String>) -> UserKey {
    let existing = creds
        .found
        .as_ref()
        .and_then(|s| s.data.clone())
        .and_then(|d| d.get(&creds.key).map(|b| b.0.clone()))
        .and_then(|b| Creds::parse(&String::from_utf8_lossy(&b)).ok());
    let (seed, prev_jwt) = match existing
        .as_ref()
        .and_then(|c| c.key().ok().map(|k| (c.jwt.clone(), k)))
    {
        Some((jwt, k)) => (k, Some(jwt)),
        None => (NKey::generate(KeyKind::User), prev_jwt),
    };
    UserKey {
        public_key: seed.public_key(),
        seed: Some(seed),
        creds: Some(creds),
        prev_jwt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::never_signed_its_secret_is_created_not_read(None, false)]
    #[case::signed_before_its_secret_holds_the_seed_it_keeps(Some("UA"), true)]
    fn the_creds_secret_is_read_first_only_for_a_user_signed_before(
        #[case] public_key: Option<&str>,
        #[case] want: bool,
    ) {
        let prev = NatsUserStatus {
            public_key: public_key.map(str::to_string),
            ..NatsUserStatus::default()
        };
        assert_eq!(read_first(&prev), want);
    }
}
