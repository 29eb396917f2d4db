//! The steps on objects and on the clients of an auth plane: `delete`, `wait_gone`,
//! `wipe_status`, `wait_disconnected`, `expect_refused`, `expect_jwt_revokes`,
//! `wait_account_absent`.

use std::time::Duration;

use async_nats::{ConnectErrorKind, ConnectOptions};
use serde_json::Value;

use super::Action;
use super::client_run::ClientRun;
use super::deployed::{Deployed, Done};
use super::step_context::{StepContext, resolve};
use crate::control_plane::ObjectRef;
use crate::server::ProcessState;

/// How long one connection attempt of `expect_refused` may take.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(5);

fn done(target: String) -> Done {
    Done {
        target: Some(target),
        ..Done::default()
    }
}

fn object(text: &str) -> Result<ObjectRef, String> {
    ObjectRef::parse(text).map_err(|e| e.to_string())
}

fn client<'a>(ctx: &'a StepContext, name: &str) -> Result<&'a ClientRun, String> {
    ctx.clients
        .get(name)
        .ok_or_else(|| format!("client {name} is not running (did its workload start?)"))
}

/// Carries out one of this module's steps.
pub(super) async fn run(
    deployed: &Deployed,
    action: &Action,
    last_faulted: &Option<String>,
    ctx: &StepContext,
) -> Result<Done, String> {
    match action {
        Action::Delete { object: o } => {
            let r = object(o)?;
            ctx.host()?.delete(&r).await.map_err(|e| e.to_string())?;
            Ok(done(r.to_string()))
        }
        Action::WaitGone { object: o, timeout } => wait_gone(ctx, o, *timeout).await,
        Action::WipeStatus { object: o } => {
            let r = object(o)?;
            ctx.host()?
                .wipe_status(&r)
                .await
                .map_err(|e| e.to_string())?;
            Ok(done(r.to_string()))
        }
        Action::WaitDisconnected { client: c, timeout } => {
            wait_disconnected(ctx, c, *timeout).await
        }
        Action::ExpectRefused { client: c } => {
            let run = client(ctx, c)?;
            expect_refused(deployed, c, &run.creds).await.map(done)
        }
        Action::ExpectJwtRevokes {
            object: o,
            client: c,
        } => {
            let r = object(o)?;
            let run = client(ctx, c)?;
            let obj = ctx.host()?.get(&r).await.map_err(|e| e.to_string())?;
            jwt_revokes(&obj, &run.user_key, run.issued_at).map_err(|e| format!("{r}: {e}"))?;
            Ok(done(format!("{r} revokes {}", run.user_key)))
        }
        Action::WaitAccountAbsent {
            object: o,
            server,
            timeout,
        } => account_absent_step(deployed, ctx, o, server, last_faulted, *timeout).await,
        other => Err(format!("{} is not a step on objects", other.describe())),
    }
}

/// `wait_gone`: waits until the object no longer exists, saying what still holds it.
async fn wait_gone(ctx: &StepContext, o: &str, timeout: Duration) -> Result<Done, String> {
    let r = object(o)?;
    let host = ctx.host()?;
    crate::wait::poll(&format!("{r} gone"), timeout, || async {
        match host.exists(&r).await {
            Ok(false) => Ok(Some(())),
            Ok(true) => Err(format!("{r} still exists{}", holding(host, &r).await)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .map_err(|e| e.to_string())?;
    Ok(done(r.to_string()))
}

/// `wait_disconnected`: waits until the server closes client `c`'s connection; observed at
/// the moment it closed.
async fn wait_disconnected(ctx: &StepContext, c: &str, timeout: Duration) -> Result<Done, String> {
    let run = client(ctx, c)?;
    let at = crate::wait::poll(
        &format!("the server closing client {c}'s connection"),
        timeout,
        || async { Ok(run.report().closed_at_ms) },
    )
    .await
    .map_err(|e| e.to_string())?;
    let r = run.report();
    Ok(Done {
        target: Some(format!(
            "{c} closed at {:.1} s{}",
            at as f64 / 1000.0,
            r.closed_because
                .map(|b| format!(" ({b})"))
                .unwrap_or_default()
        )),
        observed_at_ms: Some(at),
        value: None,
    })
}

/// `wait_account_absent`: the account's key (as recorded when the workload started, else from
/// its status), the server the selector names, which must have held its JWT, then the wait
/// until that server holds it no more.
async fn account_absent_step(
    deployed: &Deployed,
    ctx: &StepContext,
    o: &str,
    server: &str,
    last_faulted: &Option<String>,
    timeout: Duration,
) -> Result<Done, String> {
    let r = object(o)?;
    let pk = match ctx.account_keys.get(&r.to_string()) {
        Some(pk) => pk.clone(),
        None => {
            let obj = ctx.host()?.get(&r).await.map_err(|e| e.to_string())?;
            obj.pointer("/status/publicKey")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{r}'s key was not recorded and it has none"))?
                .to_string()
        }
    };
    let s = resolve(deployed.dep(), server, last_faulted).await?;
    // An account the server never held is not "gone" from it: the wait would prove
    // nothing (and a resolver laid out otherwise would pass it unseen).
    if !ctx.resolver_held.get(&pk).is_some_and(|h| h.contains(&s)) {
        return Err(format!(
            "{s} did not hold the JWT of {r} ({pk}) when the workload started"
        ));
    }
    wait_account_absent(deployed, &s, &pk, timeout).await?;
    Ok(done(format!("{s} holds no JWT of {pk}")))
}

/// What holds a deleted object: its finalizers and its Ready condition, for a wait's last text.
async fn holding(host: &crate::control_plane::Objects, r: &ObjectRef) -> String {
    let Ok(obj) = host.get(r).await else {
        return String::new();
    };
    let finalizers = obj
        .pointer("/metadata/finalizers")
        .map(Value::to_string)
        .unwrap_or_default();
    match crate::control_plane::condition_of(&obj, "Ready") {
        Some((s, reason, m)) => format!(" (finalizers {finalizers}; Ready={s} {reason}: {m})"),
        None => format!(" (finalizers {finalizers})"),
    }
}

/// Connects with `creds` to every hub server, one by one: each must refuse with an
/// authorization error. Fails naming every server that admitted the creds or did not say.
async fn expect_refused(deployed: &Deployed, name: &str, creds: &str) -> Result<String, String> {
    let servers = deployed.client_urls_by_server();
    let mut admitted = Vec::new();
    let mut unclear = Vec::new();
    for (server, url) in &servers {
        let options = ConnectOptions::with_credentials(creds)
            .map_err(|e| format!("client {name}'s creds: {e}"))?
            .connection_timeout(REFUSAL_TIMEOUT)
            .ignore_discovered_servers()
            .max_reconnects(Some(0));
        match options.connect(url.as_str()).await {
            Ok(c) => {
                admitted.push(server.clone());
                drop(c);
            }
            Err(e) if e.kind() == ConnectErrorKind::AuthorizationViolation => {}
            Err(e) => unclear.push(format!("{server} ({e})")),
        }
    }
    if admitted.is_empty() && unclear.is_empty() {
        return Ok(format!(
            "refused by all {} servers: {}",
            servers.len(),
            servers
                .iter()
                .map(|(s, _)| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut why = Vec::new();
    if !admitted.is_empty() {
        why.push(format!("admitted by {}", admitted.join(", ")));
    }
    if !unclear.is_empty() {
        why.push(format!(
            "not refused for authorization by {}",
            unclear.join(", ")
        ));
    }
    Err(format!("client {name}'s creds were {}", why.join("; ")))
}

/// Whether the account JWT in `obj`'s `status.jwt` revokes user `key` issued at `issued_at`.
pub(super) fn jwt_revokes(obj: &Value, key: &str, issued_at: i64) -> Result<(), String> {
    let jwt = obj
        .pointer("/status/jwt")
        .and_then(Value::as_str)
        .filter(|j| !j.is_empty())
        .ok_or("no status.jwt")?;
    let claims = nats_claims::decode_unverified::<nats_claims::Account>(jwt)
        .map_err(|e| format!("status.jwt: {e}"))?;
    let list = &claims.nats.revocations;
    if nats_claims::is_revoked(list, key, issued_at) {
        return Ok(());
    }
    Err(match list.get(key) {
        Some(at) => {
            format!("status.jwt revokes {key} only up to {at}, it was issued at {issued_at}")
        }
        None => format!(
            "status.jwt (issued at {}) does not revoke {key} (revocations: {:?})",
            claims.issued_at,
            list.keys().collect::<Vec<_>>()
        ),
    })
}

/// Waits until `server` no longer holds account `pk`'s JWT.
///
/// "Gone from that server" is read from the server's resolver directory (`<server dir>/jwt/
/// <pk>.jwt`; a deletion removes it, or renames it `.jwt.deleted`), since that file is what the
/// server's full resolver answers CLAIMS.LOOKUP from and boots from. The alternatives say less:
/// CLAIMS.LOOKUP over the system account is answered by every server with no name on the
/// answer, so it cannot tell which server still holds the JWT; the monitoring endpoint
/// `/accountz?acc=<pk>` shows the account while it is loaded in memory, and nats-server keeps a
/// deleted account loaded (its clients expired and locked out), so it would say "present" after
/// the deletion took.
async fn wait_account_absent(
    deployed: &Deployed,
    server: &str,
    pk: &str,
    timeout: Duration,
) -> Result<(), String> {
    let topo = deployed.topology().ok_or(
        "wait_account_absent reads a sim server's resolver directory: a sim topology only",
    )?;
    let s = topo.server(server).map_err(|e| e.to_string())?;
    let file = super::auth_plane::resolver_file(topo, server, pk)
        .ok_or_else(|| format!("no server {server}"))?;
    crate::wait::poll(
        &format!("{server} without the JWT of {pk}"),
        timeout,
        || async {
            if file.exists() {
                let state = match s.state() {
                    ProcessState::Running => "",
                    ProcessState::Paused => ", the server is paused",
                    ProcessState::Stopped => ", the server is stopped",
                };
                Err(format!("{} is still there{state}", file.display()))
            } else {
                Ok(Some(()))
            }
        },
    )
    .await
    .map(|_| ())
    .map_err(|e| e.to_string())
}
