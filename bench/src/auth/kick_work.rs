//! The work floor of the kick figures (issue #40, item 1): the work a controller cannot avoid
//! for a deleted user, done directly, with the controller stopped — the watch event of a
//! deletion arriving (a ConfigMap the bench watches, deleted), the account JWT with the user
//! revoked signed and pushed with CLAIMS.UPDATE over the auth controller's system connection, and
//! the user's connections found with CONNZ and kicked as the controller does
//! (`auth_controller::kick::targets`, `nats_wire`'s `ping_connz` and `kick`); the time from the
//! delete call until the server closed the user's connection.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, DynamicObject, ObjectMeta, PostParams, WatchEvent, WatchParams,
};
use nats_claims::{Account, Creds, decode_unverified};
use nats_wire::monitor::ConnzOptions;
use nats_wire::{Collect, ConnectionConfig};

use super::kick::{Watched, operator_signer, unix_now};
use super::{ACCOUNT, NS, WAIT, text};

/// How long a ping collects answers beyond the servers it expects, as the controller's.
const PING: Duration = Duration::from_millis(1500);

/// One user of the work floor: its creds and its watched connection.
pub(super) struct Victim<'a> {
    pub creds: String,
    pub conn: &'a Watched,
}

/// Times the work floor once per victim, one at a time; `servers` the client URLs.
pub(super) async fn floor(
    client: &kube::Client,
    accounts: &Api<DynamicObject>,
    servers: &[String],
    controller_creds: &str,
    victims: &[Victim<'_>],
) -> anyhow::Result<Vec<Duration>> {
    let acc = serde_json::to_value(accounts.get(ACCOUNT).await?)?;
    let mut claims = decode_unverified::<Account>(&text(&acc, "/status/jwt")?)?;
    let account_pk = claims.subject.clone();
    let signer = operator_signer(client, &claims.issuer).await?;
    let wire = nats_wire::dial(
        &ConnectionConfig::new(servers.iter().cloned())
            .with_creds(controller_creds)
            .with_inbox_prefix(nats_wire::preset_inbox_prefix(
                nats_api::auth::UserPreset::AuthController.as_str(),
            )),
    )
    .await?;
    let collect = Collect::expecting(servers.len(), PING);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut times = Vec::new();
    for (i, v) in victims.iter().enumerate() {
        let user_pk = decode_unverified::<nats_claims::User>(&Creds::parse(&v.creds)?.jwt)?.subject;
        let name = format!("kick-work-{i}");
        let made = maps
            .create(
                &PostParams::default(),
                &ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await?;
        let rv = made.metadata.resource_version.unwrap_or_default();
        let mut events = maps
            .watch(
                &WatchParams::default().fields(&format!("metadata.name={name}")),
                &rv,
            )
            .await?
            .boxed();

        let started = Instant::now();
        maps.delete(&name, &DeleteParams::default()).await?;
        let arrived = tokio::time::timeout(WAIT, async {
            while let Some(e) = events.next().await {
                if matches!(e?, WatchEvent::Deleted(_)) {
                    return anyhow::Ok(());
                }
            }
            anyhow::bail!("the watch of {name} ended before its deletion")
        })
        .await;
        arrived.map_err(|_| anyhow::anyhow!("no deletion event of {name}"))??;
        claims = claims.revoke_at(user_pk.clone(), unix_now());
        let revoking = claims.encode(&signer)?;
        wire.claims_update(&revoking, collect).await?;
        let connz = wire
            .ping_connz(
                &ConnzOptions::user_of_account(&account_pk, &user_pk),
                collect,
            )
            .await?;
        for (server, cid) in auth_controller::kick::targets(&connz, &user_pk) {
            // A connection the push closed first is unknown by now: refused, as for the controller.
            let _ = wire.kick(&server, cid).await;
        }
        times.push(v.conn.closed_since(started).await?);
    }
    Ok(times)
}

/// The work floor's part of a kick figure's notes: its times and the figure's ratio against
/// their median (`value_ms` the figure's).
pub(super) fn note(value_ms: f64, times: &[Duration]) -> String {
    let floor = super::median_ms(times);
    format!(
        "work floor {floor:.2} ms ({} ms): the deletion's watch event, the revoking account JWT signed and pushed with CLAIMS.UPDATE, CONNZ and KICK, median of {}; ratio {:.1} against it",
        super::kick::millis(times),
        times.len(),
        value_ms / floor
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_gives_the_median_and_the_ratio_against_it() {
        let ms = Duration::from_millis;
        let n = note(30.0, &[ms(4), ms(6), ms(5)]);
        assert!(n.starts_with("work floor 5.00 ms (4.0/6.0/5.0 ms)"), "{n}");
        assert!(n.ends_with("median of 3; ratio 6.0 against it"), "{n}");
    }
}
