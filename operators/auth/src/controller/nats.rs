//! Distribution (§5.2): the `--system-connection` dialed with the auth-controller preset's
//! inbox, account JWTs pushed with CLAIMS.UPDATE (never an older one, never one signed by a key
//! the operator JWT does not list), and status.distribution from the STATSZ roster and each
//! server's CLAIMS.LOOKUP.

use std::time::Duration;

use controller_kit::conditions::Decided;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use nats_api::auth::Distribution;
use nats_api::nats::NatsConnection;
use nats_claims::{Account, Operator, decode_unverified};
use nats_wire::monitor::Statsz;
use nats_wire::sys::LookupAnswer;
use nats_wire::{Collect, ConnectionConfig, PingReplies, ServerFilter, Wire};

use super::Context;
use super::time::{time_of, unix_now};
use crate::distribution;
use crate::push_rules::{self, Held};
use crate::roster::{self, Roster};

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

/// What keys a roster: the NATS operator's public key, since one deployment trusts one
/// operator (a NatsOperator deleted and made again under its name with new keys is another
/// deployment, as stories 02, 06 and 09 each make `nats-system/demo`); its namespace/name
/// until it has a key.
pub(crate) fn roster_key(op: &nats_api::auth::NatsOperator) -> String {
    use kube::ResourceExt;
    op.status
        .as_ref()
        .and_then(|s| s.public_key.clone())
        .unwrap_or_else(|| format!("{}/{}", op.namespace().unwrap_or_default(), op.name_any()))
}

/// How long a ping collects answers beyond the roster it expects.
pub(super) const PING: Duration = Duration::from_millis(1500);

/// The system connection, dialed (again when the NatsConnection or its Secrets changed).
/// `Ok(None)`: no `--system-connection`. `Err`: why it cannot be dialed, for a condition.
pub(crate) async fn system_wire(ctx: &Context) -> Result<Option<Wire>, String> {
    let Some(sc) = &ctx.settings.system_connection else {
        return Ok(None);
    };
    // From the index's watch of NatsConnections, read from the apiserver where it holds none
    // (the index's doc says why a copy one event behind does no harm).
    let conn =
        match ctx.index.connection(&sc.namespace, &sc.name) {
            Some(conn) => conn,
            None => {
                let conns: Api<NatsConnection> =
                    Api::namespaced(ctx.shared.client.clone(), &sc.namespace);
                let read = conns.get_opt(&sc.name).await.map_err(|e| {
                    format!("reading NatsConnection {}/{}: {e}", sc.namespace, sc.name)
                })?;
                std::sync::Arc::new(read.ok_or_else(|| {
                    format!("NatsConnection {}/{} not found", sc.namespace, sc.name)
                })?)
            }
        };
    let secrets: Api<Secret> = Api::namespaced(ctx.shared.client.clone(), &sc.namespace);
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
        material.push_str(&super::jwt::jwt_hash(&String::from_utf8_lossy(&creds)));
        config = config.with_creds(String::from_utf8_lossy(&creds).into_owned());
    }
    if let Some(ca) = conn.spec.tls.as_ref().and_then(|t| t.ca.as_ref()) {
        let pem = read(&ca.secret_key_ref.name, ca.key()).await?;
        material.push_str(&super::jwt::jwt_hash(&String::from_utf8_lossy(&pem)));
        config = config.with_ca_pem(pem);
    }
    let key = format!("{}/{}", sc.namespace, sc.name);
    if ctx.redial.swap(false, std::sync::atomic::Ordering::Relaxed) {
        ctx.system.forget(&key);
    }
    // Dialed under this connection's own lock: a pass waits for a dial in progress and shares
    // it; a failed dial is answered from memory until its backoff ends.
    ctx.system
        .get(
            &key,
            &material,
            |_| true,
            || async {
                nats_wire::dial(&config).await.map_err(|e| {
                    format!("dialing NatsConnection {}/{}: {e}", sc.namespace, sc.name)
                })
            },
        )
        .await
        .map(Some)
        .map_err(|f| f.failure)
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

/// A ping's collection: until as many servers answered as the roster of `operator` (its
/// [`roster_key`]) holds, silent ones included, or [`PING`].
pub(super) fn collect(ctx: &Context, operator: &str) -> Collect {
    match ctx.roster(operator).len() {
        0 => Collect::until(PING),
        n => Collect::expecting(n, PING),
    }
}

/// STATSZ of every server over `wire`. One that hears no server at all (a timeout: even the
/// flush got no answer) says the server this connection is on is hung or cut off, which the
/// client itself notices only once its pings time out, minutes later: the next pass dials again,
/// which picks a server that answers.
pub(super) async fn ping_statsz(
    ctx: &Context,
    wire: &Wire,
    collect: Collect,
) -> Result<PingReplies<Statsz>, String> {
    let heard = wire.ping_statsz(&ServerFilter::all(), collect).await;
    if heard.as_ref().map_or(true, |r| r.replies.is_empty()) {
        tracing::warn!("no server answered STATSZ over the system connection: dialing again");
        ctx.redial.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    heard.map_err(|e| format!("STATSZ: {e}"))
}

/// The roster with memory of this pass under the NATS operator `operator` (its [`roster_key`]):
/// the STATSZ answers, the servers this process has recorded under it, and those `recorded` in
/// the status.distribution of an object of it; kept for its next pass.
pub(super) fn observe_roster(
    ctx: &Context,
    operator: &str,
    statsz: &PingReplies<Statsz>,
    recorded: Option<&Distribution>,
) -> Roster {
    let answered: Vec<roster::Answer> = statsz
        .replies
        .iter()
        .map(|r| roster::Answer {
            name: r.server.name.clone(),
            id: r.server.id.clone(),
        })
        .collect();
    let mut remembered = ctx.roster(operator).servers;
    if let Some(d) = recorded {
        remembered.extend(Roster::from_status(&d.roster).servers);
    }
    let now = unix_now();
    // An announced shutdown is kept as long as any record could name its server silent.
    let shut_down: std::collections::BTreeSet<String> = {
        let mut heard = ctx.shut_down.lock().unwrap_or_else(|p| p.into_inner());
        let keep = roster::keep_shutdown(now);
        heard.retain(|_, at| keep(*at));
        heard.keys().cloned().collect()
    };
    let next = roster::remember(
        &remembered,
        &answered,
        &shut_down,
        now,
        roster::Forget::DEFAULT,
    );
    let mut rosters = ctx.roster.lock().unwrap_or_else(|p| p.into_inner());
    let memory = rosters.entry(operator.to_string()).or_default();
    for name in next.silent() {
        if !memory.silent().contains(&name) {
            tracing::warn!(
                server = name,
                operator,
                "a recorded server does not answer STATSZ: counted as down"
            );
        }
    }
    for m in &memory.servers {
        if !next.servers.iter().any(|n| n.name == m.name) {
            tracing::warn!(server = %m.name, operator, "a server silent past the roster's memory is forgotten");
        }
    }
    *memory = next.clone();
    next
}

/// `distribution` of `roster`: its size, the lookups holding `jwt`, and the roster recorded.
fn counted(roster: &Roster, answers: &[LookupAnswer], jwt: &str) -> Distribution {
    let mut d = distribution::distribution(roster.len(), answers, jwt);
    d.roster = roster.to_status(time_of);
    d
}

/// The roster (STATSZ, with memory of `recorded`) and what each server holds for `account`
/// (CLAIMS.LOOKUP): the two questions a pass asks the servers before it signs or pushes. Where
/// this process knows servers of the operator, both are asked at once, the lookup expecting
/// those (one round trip before a revocation's push, not two); asked again expecting the
/// roster where it gained a server meanwhile ([`roster::lookup_heard_enough`]).
async fn ask(
    ctx: &Context,
    wire: &Wire,
    operator: &str,
    account: &str,
    recorded: Option<&Distribution>,
) -> Result<(Roster, Vec<LookupAnswer>), String> {
    let lookup = async |n: usize| {
        wire.claims_lookup(account, Collect::expecting(n, PING))
            .await
            .map_err(|e| format!("CLAIMS.LOOKUP: {e}"))
    };
    let known = ctx.roster(operator).len();
    let statsz = ping_statsz(ctx, wire, collect(ctx, operator));
    let (statsz, early) = if known > 0 {
        let (statsz, early) = tokio::join!(statsz, lookup(known));
        (statsz?, Some(early))
    } else {
        (statsz.await?, None)
    };
    let roster = observe_roster(ctx, operator, &statsz, recorded);
    if roster.answering() == 0 {
        return Err("no server answered STATSZ".into());
    }
    let answers = match early {
        Some(Ok(a)) if roster::lookup_heard_enough(known, roster.len()) => a,
        _ => lookup(roster.len()).await?,
    };
    Ok((roster, answers))
}

/// Counts who holds `jwt` for `account` of the operator `operator` (its [`roster_key`]) and
/// pushes it where a server lacks it, unless a server holds a newer one or `operator_jwt` does not list
/// its signer.
/// `asked`: what the servers answered this same pass before it signed ([`holding`]), counted
/// instead of asking them again (no other pass of this account runs meanwhile: its lock).
pub(crate) async fn spread(
    ctx: &Context,
    wire: &Wire,
    (operator, operator_jwt): (&str, &str),
    account: &str,
    jwt: &str,
    last_push: Option<&Distribution>,
    asked: Option<&Holding>,
) -> Spread {
    let (roster, answers) = match asked {
        Some(h) => (h.roster.clone(), h.answers.clone()),
        None => match ask(ctx, wire, operator, account, last_push).await {
            Ok(asked) => asked,
            Err(e) => return Spread::Unreachable(e),
        },
    };
    let roster_len = roster.len();
    let lookup = async || {
        wire.claims_lookup(account, Collect::expecting(roster_len, PING))
            .await
    };
    let mut d = counted(&roster, &answers, jwt);
    d.last_push_time = last_push.and_then(|p| p.last_push_time.clone());
    if distribution::all_current(&d) {
        return Spread::Counted { d, pushed: false };
    }
    let claims = match decode_unverified::<Operator>(operator_jwt) {
        Ok(o) => o,
        Err(e) => return Spread::Unreachable(format!("the operator JWT does not decode: {e}")),
    };
    let ours = match decode_unverified::<Account>(jwt) {
        Ok(a) => a,
        Err(e) => return Spread::Unreachable(format!("our JWT does not decode: {e}")),
    };
    let held =
        push_rules::held_issued_at(answers.iter().filter_map(|a| a.jwt()).filter(|j| *j != jwt));
    if let Err(h) = push_rules::may_push(&claims, &ours, &held) {
        if let Held::OlderThanHeld { held, .. } = &h {
            ctx.raise_iat_floor(account, held + 1);
        }
        return Spread::Held(h);
    }
    let pushed = wire
        .claims_update(jwt, Collect::expecting(roster_len, PING))
        .await;
    // Counted whether or not every answer came: a server may have taken it.
    let count = {
        let mut pushes = ctx.pushes.lock().unwrap_or_else(|p| p.into_inner());
        pushes.pushed(account);
        pushes.count(account)
    };
    ctx.shared.metrics.set_gauge(
        controller_kit::metrics::ACCOUNT_JWT_PUSHES,
        "Account JWT pushes (CLAIMS.UPDATE) this process sent, by account public key.",
        &[("account", account)],
        count as f64,
    );
    if let Err(e) = pushed {
        return Spread::Unreachable(format!("CLAIMS.UPDATE: {e}"));
    }
    let answers = match lookup().await {
        Ok(a) => a,
        Err(e) => return Spread::Unreachable(format!("CLAIMS.LOOKUP: {e}")),
    };
    let mut d = counted(&roster, &answers, jwt);
    d.last_push_time = Some(time_of(unix_now()));
    Spread::Counted { d, pushed: true }
}

/// What the servers hold for an account before it is signed.
pub(crate) struct Holding {
    /// The system connection they were asked over: the push of the same pass goes over it.
    pub wire: Wire,
    /// The roster with memory: the servers that answered STATSZ and the recorded silent ones.
    pub roster: Roster,
    /// How many servers answered CLAIMS.LOOKUP.
    pub answered: usize,
    /// The JWTs they hold.
    pub jwts: Vec<String>,
    /// Their answers as given, for counting who holds a JWT.
    pub answers: Vec<LookupAnswer>,
}

impl Holding {
    /// "2 of 3 servers answered; c1-2 does not answer".
    pub fn answered_phrase(&self) -> String {
        let mut s = format!(
            "{} of {} servers answered",
            self.answered,
            self.roster.len()
        );
        if let Some(p) = roster::silent_phrase(&self.roster.silent()) {
            s.push_str("; ");
            s.push_str(&p);
        }
        s
    }
}

/// Asks every server which JWT it holds for `account` of the operator `operator` (its
/// [`roster_key`]; the roster remembering the servers `recorded` names). `Ok(None)` without a system connection; `Err`
/// when the servers cannot be asked (then nothing is pushed either), saying why.
pub(crate) async fn holding(
    ctx: &Context,
    operator: &str,
    account: &str,
    recorded: Option<&Distribution>,
) -> Result<Option<Holding>, String> {
    let Some(wire) = system_wire(ctx).await? else {
        return Ok(None);
    };
    let (roster, answers) = ask(ctx, &wire, operator, account, recorded).await?;
    Ok(Some(Holding {
        wire,
        // A lookup answer carries no server identity: counted, never past the roster.
        answered: answers.len().min(roster.len()),
        roster,
        jwts: answers
            .iter()
            .filter_map(|a| a.jwt().map(str::to_string))
            .collect(),
        answers,
    }))
}

/// Spreads `jwt` under the operator `under` (its [`roster_key`] and JWT) and says so: status.distribution
/// (None keeps none), the Distributed condition, and the JWTPushed / JWTHeld Events about `obj`.
pub(crate) async fn distribute<K>(
    ctx: &Context,
    obj: &K,
    under: (&str, &str),
    account: &str,
    jwt: &str,
    prev: Option<&Distribution>,
    asked: Option<&Holding>,
) -> (Option<Distribution>, Decided)
where
    K: kube::Resource<DynamicType = ()>,
{
    use nats_api::auth::{condition::DISTRIBUTED, event, reason};
    // The connection the servers were just asked over, else dialed (or shared) now.
    let dialed = match asked {
        Some(h) => Ok(Some(h.wire.clone())),
        None => system_wire(ctx).await,
    };
    let wire = match dialed {
        Ok(Some(w)) => w,
        Ok(None) => {
            let (status, reason) = crate::gates::distributed_without_connection(false)
                .unwrap_or((false, reason::NO_SYSTEM_CONNECTION));
            return (
                prev.cloned(),
                Decided::new(
                    DISTRIBUTED,
                    status,
                    reason,
                    "no --system-connection: nothing is pushed to the servers",
                ),
            );
        }
        Err(e) => {
            return (
                prev.cloned(),
                Decided::new(DISTRIBUTED, false, reason::UNREACHABLE, e),
            );
        }
    };
    match spread(ctx, &wire, under, account, jwt, prev, asked).await {
        Spread::Counted { d, pushed } => {
            let message = distribution::describe(&d);
            if pushed {
                ctx.shared
                    .events
                    .publish(
                        obj,
                        false,
                        event::JWT_PUSHED,
                        format!("pushed with CLAIMS.UPDATE; {message}"),
                    )
                    .await;
            }
            let cond = if distribution::all_current(&d) {
                Decided::new(DISTRIBUTED, true, reason::ALL_SERVERS_CURRENT, message)
            } else {
                Decided::new(DISTRIBUTED, false, reason::SERVERS_BEHIND, message)
            };
            (Some(d), cond)
        }
        Spread::Held(h) => {
            let reason = match &h {
                Held::UntrustedSigner { .. } => reason::UNTRUSTED_SIGNER,
                Held::OlderThanHeld { .. } => {
                    ctx.shared
                        .events
                        .publish(obj, true, event::JWT_HELD, h.to_string())
                        .await;
                    reason::DISTRIBUTING
                }
            };
            (
                prev.cloned(),
                Decided::new(DISTRIBUTED, false, reason, h.to_string()),
            )
        }
        Spread::Unreachable(e) => (
            prev.cloned(),
            Decided::new(DISTRIBUTED, false, reason::UNREACHABLE, e),
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
