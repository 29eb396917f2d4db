//! The work floor of `users.distributed_1000` (issue #40, item 1): per user the writes a
//! controller cannot avoid, done directly, 32 at a time — the user JWT signed, its creds Secret
//! written, the finalizer added and one status write — over NatsUsers created beforehand (with
//! the controller stopped, so nothing else writes them).

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use nats_claims::{Creds, KeyKind, NKey, UserClaims};
use serde_json::json;

use super::{AT_ONCE, user_doc};

/// Creates `count` NatsUsers `w<i>` (untimed), then times their work: sign, creds Secret,
/// finalizer, status.
pub(super) async fn floor(
    users: &Api<DynamicObject>,
    secrets: &Api<Secret>,
    count: usize,
) -> anyhow::Result<Duration> {
    let made: Vec<anyhow::Result<DynamicObject>> = futures::stream::iter(0..count)
        .map(|i| async move {
            let d: DynamicObject = serde_json::from_value(user_doc(&format!("w{i}")))?;
            Ok(users.create(&PostParams::default(), &d).await?)
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    if let Some(Err(e)) = made.into_iter().find(|r| r.is_err()) {
        anyhow::bail!("creating a NatsUser for the work floor: {e}");
    }
    let signer = NKey::generate(KeyKind::Account);
    let signer = &signer;
    let started = Instant::now();
    let done: Vec<anyhow::Result<()>> = futures::stream::iter(0..count)
        .map(|i| async move {
            let name = format!("w{i}");
            let user = NKey::generate(KeyKind::User);
            let jwt = UserClaims::new(user.public_key())
                .name(&name)
                .encode(signer)?;
            let creds = Creds::render(&jwt, &user.seed())?;
            let s = Secret {
                metadata: ObjectMeta {
                    name: Some(format!("{name}-creds")),
                    ..Default::default()
                },
                data: Some(
                    [(
                        "user.creds".to_string(),
                        ByteString(creds.expose().as_bytes().to_vec()),
                    )]
                    .into(),
                ),
                ..Default::default()
            };
            secrets.create(&PostParams::default(), &s).await?;
            let finalizer = json!({"metadata": {"finalizers": [nats_api::auth::FINALIZER]}});
            users
                .patch(&name, &PatchParams::default(), &Patch::Merge(&finalizer))
                .await?;
            let status = json!({"status": {
                "observedGeneration": 1,
                "publicKey": user.public_key(),
                "conditions": [{"type": "Ready", "status": "True", "reason": "Signed",
                                "message": "signed", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            }});
            users
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
            Ok(())
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let took = started.elapsed();
    if let Some(Err(e)) = done.into_iter().find(|r| r.is_err()) {
        anyhow::bail!("the work floor of a user: {e}");
    }
    Ok(took)
}
