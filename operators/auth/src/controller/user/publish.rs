//! Where the user JWT goes: with a publicKey, status.jwt; with a seed, the creds file written to
//! credentials.secretKeyRef (created, or replaced at the resourceVersion it was read at).

use controller_kit::conditions::Decided;
use nats_api::auth::NatsUser;

use super::gather::AccountView;
use super::key::UserKey;
use super::stop::Stop;
use crate::controller::Context;
use crate::controller::creds::{Written, write_creds};
use crate::user::Issued;

/// The JWT as published: status.jwt (none where it went to the creds Secret) and the Ready
/// message saying where.
pub(super) struct Published {
    pub jwt: Option<String>,
    pub message: String,
}

/// Publishes `issued` (the creds Secret changed since it was read: nothing written).
pub(super) async fn publish(
    ctx: &Context,
    u: &NatsUser,
    view: &AccountView,
    key: &UserKey,
    issued: Issued,
    resolved: &Decided,
) -> Result<Published, Stop> {
    let acc_name = &view.name;
    match issued {
        Issued::JwtOnly(jwt) => Ok(Published {
            jwt: Some(jwt),
            message: format!("user JWT signed by account {acc_name}; published in status.jwt"),
        }),
        Issued::Creds(text) => {
            let Some(creds) = &key.creds else {
                return Err(Stop::Refused(vec![resolved.clone()]));
            };
            let (secret, found) = (&creds.secret, creds.found.as_ref());
            let written = write_creds(ctx, u, secret, found, &creds.key, text.into_bytes()).await?;
            if written == Written::Changed {
                // Deleted or rewritten since it was read: judged again from what is there now.
                return Err(Stop::SecretChanged);
            }
            Ok(Published {
                jwt: None,
                message: format!(
                    "user JWT signed by account {acc_name}; creds written to Secret {secret}"
                ),
            })
        }
    }
}
