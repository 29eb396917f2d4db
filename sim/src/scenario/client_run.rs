//! The `clients:` of a scenario while they run ([`ClientRun`]): each connected with the creds the
//! auth controller wrote, publishing at its rate and recording when the server closed it.
//!
//! The creds are read from their Secret once, when the workload starts, and kept: a step run
//! after the user (and with it the Secret) is gone still connects with them (`expect_refused`).
//! A client the server closed stops publishing and drops its connection; the few reconnects it
//! tries before that (at most [`MAX_RECONNECTS`]) are refused and counted, not retried forever.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::{ClientError, ConnectOptions, Event, ServerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::clients::{ClientDecl, ClientReport};
use crate::control_plane::{ObjectRef, Objects};
use crate::ledger::Ledger;

/// Reconnects a closed client tries before it gives up (each refused when its user is revoked).
pub const MAX_RECONNECTS: usize = 3;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A running client.
pub(super) struct ClientRun {
    /// The creds file as read when the workload started.
    pub(super) creds: String,
    pub(super) user_key: String,
    /// When its JWT was issued (unix s): a revocation at or after it revokes it.
    pub(super) issued_at: i64,
    state: Arc<Mutex<ClientReport>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl ClientRun {
    /// What the client did so far.
    pub(super) fn report(&self) -> ClientReport {
        lock(&self.state).clone()
    }

    /// Stops publishing, closes the connection, and reports.
    pub(super) async fn stop(self) -> ClientReport {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        lock(&self.state).clone()
    }
}

fn lock(m: &Mutex<ClientReport>) -> std::sync::MutexGuard<'_, ClientReport> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The user key and issue time of a creds file's JWT.
pub(super) fn user_of(creds: &str) -> Result<(String, i64), String> {
    let parsed = nats_claims::Creds::parse(creds).map_err(|e| e.to_string())?;
    let claims: nats_claims::UserClaims =
        nats_claims::decode(&parsed.jwt).map_err(|e| e.to_string())?;
    Ok((claims.subject, claims.issued_at))
}

/// Reads the client's creds from its Secret (waiting up to `timeout` for it), connects to
/// `urls` and starts publishing.
pub(super) async fn start(
    decl: &ClientDecl,
    host: &Objects,
    urls: Vec<String>,
    ledger: &Ledger,
    timeout: Duration,
) -> Result<ClientRun, String> {
    let secret = ObjectRef::parse(&decl.creds).map_err(|e| e.to_string())?;
    if secret.kind != "Secret" {
        return Err(format!(
            "client {}: creds {:?} is not Secret/<name>",
            decl.name, decl.creds
        ));
    }
    let creds = crate::wait::poll(
        &format!("{}'s creds in {secret}", decl.name),
        timeout,
        || async {
            match host
                .secret_text(&secret.namespace, &secret.name, &decl.key)
                .await
            {
                Ok(Some(text)) => Ok(Some(text)),
                Ok(None) => Err(format!("no key {} in {secret} yet", decl.key)),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let (user_key, issued_at) =
        user_of(&creds).map_err(|e| format!("client {}: its creds: {e}", decl.name))?;
    let state = Arc::new(Mutex::new(ClientReport {
        name: decl.name.clone(),
        user: user_key.clone(),
        server: decl.server.clone(),
        ..ClientReport::default()
    }));
    let (closed_tx, closed_rx) = watch::channel(false);
    let on_event = {
        let state = state.clone();
        let ledger = ledger.clone();
        let name = decl.name.clone();
        move |event: Event| {
            let state = state.clone();
            let ledger = ledger.clone();
            let name = name.clone();
            let closed_tx = closed_tx.clone();
            async move { record(&state, &ledger, &name, &closed_tx, event) }
        }
    };
    let mut options = ConnectOptions::with_credentials(&creds)
        .map_err(|e| format!("client {}: its creds: {e}", decl.name))?
        .name(format!("sim-{}", decl.name))
        .connection_timeout(CONNECT_TIMEOUT)
        .max_reconnects(Some(MAX_RECONNECTS))
        .event_callback(on_event);
    if decl.server.is_some() {
        options = options.ignore_discovered_servers();
    }
    let addrs: Vec<async_nats::ServerAddr> = urls.iter().filter_map(|u| u.parse().ok()).collect();
    let client = options
        .connect(addrs)
        .await
        .map_err(|e| format!("client {} connecting to {urls:?}: {e}", decl.name))?;
    lock(&state).connected_at_ms.get_or_insert(ledger.now_ms());
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(publish(
        client,
        decl.clone(),
        state.clone(),
        stop_rx,
        closed_rx,
    ));
    Ok(ClientRun {
        creds,
        user_key,
        issued_at,
        state,
        stop,
        task,
    })
}

/// Records one connection event; the first disconnect after connecting is the server closing
/// the connection (the sim never closes a client before the run ends).
fn record(
    state: &Mutex<ClientReport>,
    ledger: &Ledger,
    name: &str,
    closed_tx: &watch::Sender<bool>,
    event: Event,
) {
    let mut s = lock(state);
    let closed = s.closed_at_ms.is_some();
    match event {
        Event::Connected if !closed => {
            s.connected_at_ms.get_or_insert(ledger.now_ms());
        }
        Event::Disconnected if !closed => {
            let at = ledger.now_ms();
            s.closed_at_ms = Some(at);
            ledger.record(crate::ledger::Event::Step {
                at_ms: at,
                text: format!(
                    "client {name}: connection closed by the server{}",
                    s.closed_because
                        .as_ref()
                        .map(|b| format!(" ({b})"))
                        .unwrap_or_default()
                ),
            });
            let _ = closed_tx.send(true);
        }
        Event::ServerError(ServerError::AuthorizationViolation) if closed => {
            s.refused_reconnects += 1
        }
        Event::ClientError(ClientError::Other(e)) if closed && e.contains("authorization") => {
            s.refused_reconnects += 1
        }
        Event::ServerError(e) if !closed => s.closed_because = Some(e.to_string()),
        _ => {}
    }
}

/// Publishes at the client's rate until the run stops it or the server closed the connection.
async fn publish(
    client: async_nats::Client,
    decl: ClientDecl,
    state: Arc<Mutex<ClientReport>>,
    mut stop: watch::Receiver<bool>,
    mut closed: watch::Receiver<bool>,
) {
    let period = Duration::from_secs_f64(1.0 / f64::from(decl.rate.max(1)));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = closed.changed() => break,
            _ = tick.tick() => {}
        }
        if *stop.borrow() || *closed.borrow() {
            break;
        }
        n += 1;
        let sent = client
            .publish(decl.subject.clone(), format!("{}-{n}", decl.name).into())
            .await;
        let mut s = lock(&state);
        match sent {
            Ok(()) => s.published += 1,
            Err(_) => s.publish_errors += 1,
        }
    }
    // Dropping the last handle ends the connection (and any reconnect once it is refused).
    drop(client);
}
