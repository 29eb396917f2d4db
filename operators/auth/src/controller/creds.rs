//! A NatsUser's creds Secret (credentials.secretKeyRef): read only where the user controls it
//! (§5.3, [`crate::creds_secret`]), created or replaced at the resourceVersion it was read at,
//! deleted on the UID it was judged by; and the signing keys that issued the users' live JWTs,
//! which for a user without status.jwt are only in that Secret.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use nats_api::auth::{FIELD_MANAGER, NatsUser};
use nats_claims::{Creds, User};

use super::Context;
use super::error::{Error, kube_err};
use crate::creds_secret::{self, CredsConflict, CredsSecret};

/// The creds Secret `secret` when this user may write it (`None`: absent, to be created), or the
/// conflict naming who holds it (§5.3, [`crate::creds_secret`]).
pub(crate) async fn creds_secret_of(
    ctx: &Context,
    u: &NatsUser,
    secret: &str,
) -> Result<Result<Option<Secret>, CredsConflict>, Error> {
    let ns = u.namespace().unwrap_or_default();
    let found = Api::<Secret>::namespaced(ctx.shared.client.clone(), &ns)
        .get_opt(secret)
        .await
        .map_err(kube_err(format!("Secret {ns}/{secret}")))?;
    let uid = u.uid().unwrap_or_default();
    let owners = found
        .as_ref()
        .map(|s| s.metadata.owner_references.clone().unwrap_or_default());
    Ok(
        creds_secret::creds_secret(secret, owners.as_deref(), &uid).map(|decided| match decided {
            CredsSecret::Absent => None,
            CredsSecret::Controlled => found,
        }),
    )
}

/// What became of a creds write.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Written {
    /// The Secret holds the creds.
    Done,
    /// The Secret was deleted or changed since it was read, and was left as it is now.
    Changed,
}

/// Writes the creds to `secret`: created, controlled by the user, where `found` is `None`;
/// otherwise `found` with the creds under `key` replaces it on the resourceVersion it was found
/// at, so a Secret deleted or rewritten since it was judged is not written (a replace answers
/// 404 or 409, where a server-side apply would have created a deleted Secret again with the
/// key of before — seen in a loaded gate run: a creds Secret deleted while a pass was in flight
/// came back under the old key, and the user was never given a new one).
pub(crate) async fn write_creds(
    ctx: &Context,
    u: &NatsUser,
    secret: &str,
    found: Option<&Secret>,
    key: &str,
    creds: Vec<u8>,
) -> Result<Written, Error> {
    let ns = u.namespace().unwrap_or_default();
    let api = Api::<Secret>::namespaced(ctx.shared.client.clone(), &ns);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    let written = match found {
        None => {
            // Create, never apply: an apply would take over a Secret someone created meanwhile.
            let body = Secret {
                metadata: ObjectMeta {
                    name: Some(secret.to_string()),
                    namespace: Some(ns.clone()),
                    owner_references: u.controller_owner_ref(&()).map(|o| vec![o]),
                    ..ObjectMeta::default()
                },
                type_: Some("Opaque".into()),
                data: Some(BTreeMap::from([(key.to_string(), ByteString(creds))])),
                ..Secret::default()
            };
            api.create(&params, &body).await.map(|_| ())
        }
        Some(found)
            if found
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .is_some_and(|held| held.0 == creds) =>
        {
            // The creds there already: a replace would change nothing.
            Ok(())
        }
        Some(found) => {
            let mut body = found.clone();
            // The server keeps the field owners of before (a request carrying them would reset them).
            body.metadata.managed_fields = None;
            body.data
                .get_or_insert_with(BTreeMap::new)
                .insert(key.to_string(), ByteString(creds));
            api.replace(secret, &params, &body).await.map(|_| ())
        }
    };
    match written {
        Ok(()) => Ok(Written::Done),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Written::Changed),
        Err(e) => Err(kube_err(format!("Secret {ns}/{secret}"))(e)),
    }
}

/// Deletes the creds Secret `secret` only where this user controls it, on the UID it was judged
/// by; a Secret of another owner stays, byte for byte.
pub(crate) async fn delete_creds(ctx: &Context, u: &NatsUser, secret: &str) -> Result<(), Error> {
    let ns = u.namespace().unwrap_or_default();
    let Ok(Some(found)) = creds_secret_of(ctx, u, secret).await? else {
        return Ok(());
    };
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: found.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match Api::<Secret>::namespaced(ctx.shared.client.clone(), &ns)
        .delete(secret, &params)
        .await
    {
        Ok(_) => Ok(()),
        // Gone, or replaced by another Secret since it was read: not ours to delete.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(kube_err(format!("Secret {ns}/{secret}"))(e)),
    }
}

/// The signing keys that issued the live JWTs of `users`: status.jwt, else the creds Secret.
/// Secrets are not in the index (the controller does not hold every Secret of the cluster in
/// memory), so a user whose JWT lives only in its creds Secret costs one read.
pub(crate) async fn issuers(ctx: &Context, users: &[Arc<NatsUser>]) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    for u in users {
        let jwt = match (
            u.status.as_ref().and_then(|s| s.jwt.clone()),
            &u.spec.credentials,
        ) {
            (Some(j), _) => Some(j),
            // Only a Secret the user controls carries its JWT; another owner's is not read.
            (None, Some(c)) => creds_secret_of(ctx, u, &c.secret_key_ref.name)
                .await?
                .ok()
                .flatten()
                .and_then(|s| s.data)
                .and_then(|d| d.get(c.key()).map(|b| b.0.clone()))
                .and_then(|b| Creds::parse(&String::from_utf8_lossy(&b)).ok())
                .map(|c| c.jwt),
            (None, None) => None,
        };
        if let Some(c) = jwt.and_then(|j| nats_claims::decode_unverified::<User>(&j).ok()) {
            out.push(c.issuer);
        }
    }
    Ok(out)
}
