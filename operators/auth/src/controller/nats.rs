//! Distribution (§5.2): the `--system-connection` dialed with the auth-controller preset's
//! inbox, account JWTs pushed with CLAIMS.UPDATE (never an older one, never one signed by a key
//! the operator JWT does not list), and status.distribution from the STATSZ roster and each
//! server's CLAIMS.LOOKUP.

use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use nats_api::auth::Distribution;
use nats_api::nats::NatsConnection;
use nats_claims::{Account, Operator, decode_unverified};
use nats_wire::ServerFilter;
use nats_wire::{Collect, ConnectionConfig, Wire};

use super::{Context, time_of, unix_now};
use crate::distribution;
use crate::push::{self, Held};

/// The NatsConnection JWTs are pushed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemConnection {
    pub namespace: String,
    pub name: String,
}

impl SystemConnection {
    /// Parses `namespace/name`.
    pub fn parse(text: &str) -> Option<SystemConnection> {
        let (ns, name) = text.split_once('/')?;
        (!ns.is_empty() && !name.is_empty() && !name.contains('/')).then(|| SystemConnection {
            namespace: ns.to_string(),
            name: name.to_string(),
        })
    }
}

/// A dialed system connection and what it was dialed from.
pub(crate) struct Dialed {
    material: String,
    wire: Wire,
}

/// How long a ping collects answers beyond the roster it expects.
pub(super) const PING: Duration = Duration::from_millis(1500);

/// The system connection, dialed (again when the NatsConnection or its Secrets changed).
/// `Ok(None)`: no `--system-connection`. `Err`: why it cannot be dialed, for a condition.
pub(crate) async fn system_wire(ctx: &Context) -> Result<Option<Wire>, String> {
    let Some(sc) = &ctx.settings.system_connection else {
        return Ok(None);
    };
    let conns: Api<NatsConnection> = Api::namespaced(ctx.client.clone(), &sc.namespace);
    let conn = conns
        .get_opt(&sc.name)
        .await
        .map_err(|e| format!("reading NatsConnection {}/{}: {e}", sc.namespace, sc.name))?
        .ok_or_else(|| format!("NatsConnection {}/{} not found", sc.namespace, sc.name))?;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &sc.namespace);
    let read = async |name: &str, key: &str| -> Result<Vec<u8>, String> {
        let s = secrets
            .get_opt(name)
            .await
            .map_err(|e| format!("reading Secret {}/{name}: {e}", sc.namespace))?
            .ok_or_else(|| format!("Secret {}/{name} not found", sc.namespace))?;
        s.data
            .and_then(|d| d.get(key).map(|b| b.0.clone()))
            .ok_or_else(|| format!("Secret {}/{name} has no key {key}", sc.namespace))
    };
    let mut config = ConnectionConfig::new(conn.spec.servers.clone())
        .with_inbox_prefix(nats_wire::preset_inbox_prefix(
            nats_api::auth::UserPreset::AuthController.as_str(),
        ))
        .with_name("auth-controller")
        .with_connect_timeout(Duration::from_secs(5));
    let mut material = conn.spec.servers.join(",");
    if let Some(c) = &conn.spec.credentials {
        let creds = read(&c.secret_key_ref.name, c.key()).await?;
        material.push_str(&super::jwt_hash(&String::from_utf8_lossy(&creds)));
        config = config.with_creds(String::from_utf8_lossy(&creds).into_owned());
    }
    if let Some(ca) = conn.spec.tls.as_ref().and_then(|t| t.ca.as_ref()) {
        let pem = read(&ca.secret_key_ref.name, ca.key()).await?;
        material.push_str(&super::jwt_hash(&String::from_utf8_lossy(&pem)));
        config = config.with_ca_pem(pem);
    }
    let mut slot = ctx.system.lock().await;
    if let Some(d) = slot.as_ref()
        && d.material == material
    {
        return Ok(Some(d.wire.clone()));
    }
    let wire = nats_wire::dial(&config)
        .await
        .map_err(|e| format!("dialing NatsConnection {}/{}: {e}", sc.namespace, sc.name))?;
    *slot = Some(Dialed {
        material,
        wire: wire.clone(),
    });
    Ok(Some(wire))
}

/// How a JWT stands on the servers after a pass.
#[derive(Debug)]
pub(crate) enum Spread {
    /// Counted (and pushed first where some server lacked it).
    Counted { d: Distribution, pushed: bool },
    /// Not pushed: a server holds a newer one, or the signer is not trusted.
    Held(Held),
    /// The servers could not be asked.
    Unreachable(String),
}

pub(super) fn collect(ctx: &Context) -> Collect {
    match ctx.roster.load(Ordering::Relaxed) {
        0 => Collect::until(PING),
        n => Collect::expecting(n, PING),
    }
}

/// Counts who holds `jwt` for `account` and pushes it where a server lacks it, unless a server
/// holds a newer one or `operator_jwt` does not list its signer.
pub(crate) async fn spread(
    ctx: &Context,
    wire: &Wire,
    operator_jwt: &str,
    account: &str,
    jwt: &str,
    last_push: Option<&Distribution>,
) -> Spread {
    let roster = match wire.ping_statsz(&ServerFilter::all(), collect(ctx)).await {
        Ok(r) => r.replies.len(),
        Err(e) => return Spread::Unreachable(format!("STATSZ: {e}")),
    };
    ctx.roster.store(roster, Ordering::Relaxed);
    if roster == 0 {
        return Spread::Unreachable("no server answered STATSZ".into());
    }
    let lookup = async || {
        wire.claims_lookup(account, Collect::expecting(roster, PING))
            .await
    };
    let answers = match lookup().await {
        Ok(a) => a,
        Err(e) => return Spread::Unreachable(format!("CLAIMS.LOOKUP: {e}")),
    };
    let mut d = distribution::distribution(roster, &answers, jwt);
    d.last_push_time = last_push.and_then(|p| p.last_push_time.clone());
    if distribution::all_current(&d) {
        return Spread::Counted { d, pushed: false };
    }
    let operator = match decode_unverified::<Operator>(operator_jwt) {
        Ok(o) => o,
        Err(e) => return Spread::Unreachable(format!("the operator JWT does not decode: {e}")),
    };
    let ours = match decode_unverified::<Account>(jwt) {
        Ok(a) => a,
        Err(e) => return Spread::Unreachable(format!("our JWT does not decode: {e}")),
    };
    let held = push::held_issued_at(answers.iter().filter_map(|a| a.jwt()).filter(|j| *j != jwt));
    if let Err(h) = push::may_push(&operator, &ours, &held) {
        if let Held::OlderThanHeld { held, .. } = &h {
            ctx.raise_iat_floor(account, held + 1);
        }
        return Spread::Held(h);
    }
    let pushed = wire
        .claims_update(jwt, Collect::expecting(roster, PING))
        .await;
    // Counted whether or not every answer came: a server may have taken it.
    ctx.pushes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .pushed(account);
    if let Err(e) = pushed {
        return Spread::Unreachable(format!("CLAIMS.UPDATE: {e}"));
    }
    let answers = match lookup().await {
        Ok(a) => a,
        Err(e) => return Spread::Unreachable(format!("CLAIMS.LOOKUP: {e}")),
    };
    let mut d = distribution::distribution(roster, &answers, jwt);
    d.last_push_time = Some(time_of(unix_now()));
    Spread::Counted { d, pushed: true }
}

/// What the servers hold for an account before it is signed.
pub(crate) struct Holding {
    /// The STATSZ roster size.
    pub roster: usize,
    /// How many servers answered CLAIMS.LOOKUP.
    pub answered: usize,
    /// The JWTs they hold.
    pub jwts: Vec<String>,
}

/// Asks every server which JWT it holds for `account`; `None` without a system connection or
/// when the servers cannot be asked (then nothing is pushed either).
pub(crate) async fn holding(ctx: &Context, account: &str) -> Option<Holding> {
    let wire = system_wire(ctx).await.ok()??;
    let roster = wire
        .ping_statsz(&ServerFilter::all(), collect(ctx))
        .await
        .ok()?
        .replies
        .len();
    ctx.roster.store(roster, Ordering::Relaxed);
    if roster == 0 {
        return None;
    }
    let answers = wire
        .claims_lookup(account, Collect::expecting(roster, PING))
        .await
        .ok()?;
    Some(Holding {
        roster,
        answered: answers.len(),
        jwts: answers
            .iter()
            .filter_map(|a| a.jwt().map(str::to_string))
            .collect(),
    })
}

/// Spreads `jwt` and says so: status.distribution (None keeps none), the Distributed
/// condition, and the JWTPushed / JWTHeld Events about `obj`.
pub(crate) async fn distribute<K>(
    ctx: &Context,
    obj: &K,
    operator_jwt: &str,
    account: &str,
    jwt: &str,
    prev: Option<&Distribution>,
) -> (Option<Distribution>, super::Cond)
where
    K: kube::Resource<DynamicType = ()>,
{
    use nats_api::auth::{condition::DISTRIBUTED, event, reason};
    let wire = match system_wire(ctx).await {
        Ok(Some(w)) => w,
        Ok(None) => {
            let (status, reason) = crate::gates::distributed_without_connection(false)
                .unwrap_or((false, reason::NO_SYSTEM_CONNECTION));
            return (
                prev.cloned(),
                super::Cond::new(
                    DISTRIBUTED,
                    status,
                    reason,
                    "no --system-connection: nothing is pushed to the servers".into(),
                ),
            );
        }
        Err(e) => {
            return (
                prev.cloned(),
                super::Cond::new(DISTRIBUTED, false, reason::UNREACHABLE, e),
            );
        }
    };
    match spread(ctx, &wire, operator_jwt, account, jwt, prev).await {
        Spread::Counted { d, pushed } => {
            let message = distribution::describe(&d);
            if pushed {
                ctx.events
                    .publish(
                        obj,
                        false,
                        event::JWT_PUSHED,
                        format!("pushed with CLAIMS.UPDATE; {message}"),
                    )
                    .await;
            }
            let cond = if distribution::all_current(&d) {
                super::Cond::new(DISTRIBUTED, true, reason::ALL_SERVERS_CURRENT, message)
            } else {
                super::Cond::new(DISTRIBUTED, false, reason::SERVERS_BEHIND, message)
            };
            (Some(d), cond)
        }
        Spread::Held(h) => {
            let reason = match &h {
                Held::UntrustedSigner { .. } => reason::UNTRUSTED_SIGNER,
                Held::OlderThanHeld { .. } => {
                    ctx.events
                        .publish(obj, true, event::JWT_HELD, h.to_string())
                        .await;
                    reason::DISTRIBUTING
                }
            };
            (
                prev.cloned(),
                super::Cond::new(DISTRIBUTED, false, reason, h.to_string()),
            )
        }
        Spread::Unreachable(e) => (
            prev.cloned(),
            super::Cond::new(DISTRIBUTED, false, reason::UNREACHABLE, e),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::namespaced("nats-system/auth", Some(("nats-system", "auth")))]
    #[case::no_namespace("auth", None)]
    #[case::empty_name("nats-system/", None)]
    #[case::too_many("a/b/c", None)]
    fn system_connection_flag_is_namespace_slash_name(
        #[case] text: &str,
        #[case] want: Option<(&str, &str)>,
    ) {
        assert_eq!(
            SystemConnection::parse(text),
            want.map(|(ns, name)| SystemConnection {
                namespace: ns.into(),
                name: name.into()
            })
        );
    }
}
