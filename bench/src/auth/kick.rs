//! The kick figures: a connection watched until its server closes it, a NatsUser deleted under
//! it (by the controller), and the floor: the account JWT revoking a user signed with the
//! operator key that signed it and pushed with `$SYS.REQ.CLAIMS.UPDATE` by hand.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::{ConnectOptions, Event};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject};
use nats_claims::{Account, Creds, NKey, decode_unverified};
use serde_json::Value;
use sim::Topology;

use super::{ACCOUNT, NS, WAIT, auth_api, text};

/// A connection with `creds` to `url` and when the server closed it.
pub(super) struct Watched {
    _client: async_nats::Client,
    closed: Arc<Mutex<Option<Instant>>>,
}

pub(super) async fn watched(creds: &str, url: &str) -> anyhow::Result<Watched> {
    let closed = Arc::new(Mutex::new(None));
    let seen = closed.clone();
    let client = ConnectOptions::with_credentials(creds)?
        .ignore_discovered_servers()
        .max_reconnects(Some(1))
        .event_callback(move |e| {
            let seen = seen.clone();
            async move {
                if matches!(e, Event::Disconnected) {
                    seen.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(Instant::now());
                }
            }
        })
        .connect(url)
        .await?;
    client.flush().await?;
    Ok(Watched {
        _client: client,
        closed,
    })
}

impl Watched {
    pub(super) async fn closed_since(&self, since: Instant) -> anyhow::Result<Duration> {
        let closed = &self.closed;
        let at = sim::wait::poll("the connection closed", WAIT, || async move {
            Ok::<_, String>(*closed.lock().unwrap_or_else(|p| p.into_inner()))
        })
        .await?;
        Ok(at.saturating_duration_since(since))
    }
}

/// `times` in milliseconds, for a figure's notes.
pub(super) fn millis(times: &[Duration]) -> String {
    times
        .iter()
        .map(|t| format!("{:.1}", t.as_secs_f64() * 1000.0))
        .collect::<Vec<_>>()
        .join("/")
}

/// NatsUser `name` deleted under its watched connection: the time until the server closed it.
pub(super) async fn deleted(
    users: &Api<DynamicObject>,
    name: &str,
    conn: &Watched,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    users.delete(name, &DeleteParams::default()).await?;
    conn.closed_since(started).await
}

/// Waits until NatsUser `name` is gone (its finalizer released).
pub(super) async fn gone(users: &Api<DynamicObject>, name: &str) -> anyhow::Result<()> {
    sim::wait::poll(&format!("{name} gone"), WAIT, || async move {
        let left = users.get_opt(name).await.map_err(|e| e.to_string())?;
        Ok(left.is_none().then_some(()))
    })
    .await?;
    Ok(())
}

/// The seed of the NatsOperator `demo`'s key `issuer` (identity or signing), read from its
/// seed Secrets.
pub(super) async fn operator_signer(client: &kube::Client, issuer: &str) -> anyhow::Result<NKey> {
    let op = serde_json::to_value(auth_api(client, "NatsOperator").get("demo").await?)?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let mut names: Vec<String> = op
        .pointer("/status/seedSecrets/signing")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect();
    names.extend(text(&op, "/status/seedSecrets/identity").ok());
    for name in names {
        let Some(s) = secrets.get_opt(&name).await? else {
            continue;
        };
        for v in s.data.unwrap_or_default().into_values() {
            if let Ok(k) = NKey::from_seed(&v.0)
                && k.public_key() == issuer
            {
                return Ok(k);
            }
        }
    }
    anyhow::bail!("no seed of {issuer}")
}

/// The issuer of the bench account's JWT: an operator key the servers trust.
pub(super) async fn account_issuer(accounts: &Api<DynamicObject>) -> anyhow::Result<String> {
    let acc = serde_json::to_value(accounts.get(ACCOUNT).await?)?;
    Ok(decode_unverified::<Account>(&text(&acc, "/status/jwt")?)?.issuer)
}

/// The floor of the kick: the account's JWT, bob revoked, signed with the operator key that
/// signed it and pushed with `$SYS.REQ.CLAIMS.UPDATE` as the auth controller's user; the time
/// until the server closed bob's connection.
pub(super) async fn revoke_by_hand(
    client: &kube::Client,
    accounts: &Api<DynamicObject>,
    topo: &Topology,
    controller_creds: &str,
    bob_creds: &str,
    bob: &Watched,
) -> anyhow::Result<Duration> {
    let acc = serde_json::to_value(accounts.get(ACCOUNT).await?)?;
    let jwt = text(&acc, "/status/jwt")?;
    let mut claims = decode_unverified::<Account>(&jwt)?;
    let bob_pk = Creds::parse(bob_creds)?.jwt;
    let bob_pk = decode_unverified::<nats_claims::User>(&bob_pk)?.subject;
    let signer = operator_signer(client, &claims.issuer).await?;
    claims = claims.revoke_at(bob_pk, unix_now());
    let revoking = claims.encode(&signer)?;
    let sys = ConnectOptions::with_credentials(controller_creds)?
        .connect(topo.client_urls())
        .await?;
    let pushed = Instant::now();
    // Published, not requested: the user's permissions admit its own inbox prefix only, and
    // the server acts on the update whether or not anyone reads its answer.
    sys.publish("$SYS.REQ.CLAIMS.UPDATE", revoking.into())
        .await?;
    sys.flush().await?;
    bob.closed_since(pushed).await
}

pub(super) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_in_milliseconds() {
        let ms = Duration::from_millis;
        assert_eq!(millis(&[ms(2), ms(30)]), "2.0/30.0");
    }
}
