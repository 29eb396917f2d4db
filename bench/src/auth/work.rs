//! The work floor of `users.distributed_1000` (issue #40, item 1): per user the writes a
//! controller cannot avoid, done directly, 32 at a time — the user JWT signed, its creds Secret
//! written, the finalizer added and one status write — with the controller stopped, so nothing
//! else writes the NatsUsers. Where the figure's clock starts at the first apply, each NatsUser
//! is applied in the floor too, just before its work (as the streams' floor applies each
//! NatsStream); where it starts at the last apply (`--scale`), they are created beforehand.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use nats_claims::{Creds, KeyKind, NKey, UserClaims};
use serde_json::json;

use super::{AT_ONCE, user_doc};

/// Where the figure's clock starts, and so whether the floor applies its NatsUsers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Clock {
    /// At the first apply: each NatsUser applied, timed, just before its work.
    FirstApply,
    /// At the last apply: the NatsUsers created beforehand, untimed.
    LastApply,
}

/// Times the work of `count` NatsUsers `w<i>` (applied first where `clock` says): sign, creds
/// Secret, finalizer, status.
pub(super) async fn floor(
    users: &Api<DynamicObject>,
    secrets: &Api<Secret>,
    count: usize,
    clock: Clock,
) -> anyhow::Result<Duration> {
    let create = |i: usize| async move {
        let d: DynamicObject = serde_json::from_value(user_doc(&format!("w{i}")))?;
        Ok::<_, anyhow::Error>(users.create(&PostParams::default(), &d).await?)
    };
    if clock == Clock::LastApply {
        let made: Vec<anyhow::Result<DynamicObject>> = futures::stream::iter(0..count)
            .map(create)
            .buffer_unordered(AT_ONCE)
            .collect()
            .await;
        if let Some(Err(e)) = made.into_iter().find(|r| r.is_err()) {
            anyhow::bail!("creating a NatsUser for the work floor: {e}");
        }
    }
    let signer = NKey::generate(KeyKind::Account);
    let signer = &signer;
    let started = Instant::now();
    let done: Vec<anyhow::Result<()>> = futures::stream::iter(0..count)
        .map(|i| async move {
            let name = format!("w{i}");
            if clock == Clock::FirstApply {
                create(i).await?;
            }
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
