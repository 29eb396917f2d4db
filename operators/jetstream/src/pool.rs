//! The connection pool: one NATS connection per NatsConnection, shared by every resource naming
//! it, re-dialed only when the NatsConnection's spec or the Secrets it reads change. Each
//! connection is dialed under its own lock; a failed dial is answered from memory until its
//! backoff ends.
//!
//! A connection once dialed is kept: async-nats reconnects it on its own (at most 4 s between
//! attempts), and while it is not connected every resource naming it reads
//! [`Ready::Disconnected`] with what went wrong and since when. The client PINGs its server every
//! [`PING_INTERVAL`] and gives the connection up after three PINGs without a PONG: a paused or cut
//! off server keeps TCP open, and only the PINGs notice it (within 15 s). Each lost or regained
//! connection is told to [`Pool::changes`], so the NatsConnection's Ready follows at once.

use std::time::Duration;

use controller_kit::dials::Dials;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use nats_api::nats::NatsConnection;

use crate::dialing::{Ready, Secrets, dial_config, ready_after_dial, ready_of_held, secret_data};

/// How long a first dial may take before the connection is ConnectFailed.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an idle connection PINGs its server: three unanswered make it Disconnected, so a
/// hung server is noticed within 15 s, well inside the 30 s the NatsConnection's Ready promises.
pub const PING_INTERVAL: Duration = Duration::from_secs(5);

/// A dialed connection: the client, and what its events say went wrong since it was last up.
#[derive(Clone)]
struct Held {
    client: async_nats::Client,
    trouble: Option<Trouble>,
}

/// What went wrong since a connection was last up ([`nats_wire::Trouble`]), as it changes.
type Trouble = tokio::sync::watch::Receiver<Option<nats_wire::Trouble>>;

/// Who hears of a connection lost or regained: `(namespace, name)`.
type Listener = futures::channel::mpsc::UnboundedSender<(String, String)>;

/// What resolving a NatsConnection found.
#[derive(Debug, Clone)]
pub enum Resolved {
    /// Connected (new or shared).
    Connected(async_nats::Client),
    /// The NatsConnection does not exist.
    Missing,
    /// It exists but could not be dialed; the connection's Ready says why.
    NotReady(Ready),
}

/// The pool, keyed by namespace/name of the NatsConnection: one slot per connection, each
/// dialed under its own lock, a failed dial remembered with a backoff ([`controller_kit::dials`]),
/// so an unreachable NATS delays only the resources naming it.
#[derive(Default)]
pub struct Pool {
    dials: Dials<Held, Ready>,
    listeners: std::sync::Arc<std::sync::Mutex<Vec<Listener>>>,
}

/// The Secrets a connection names, with their resourceVersions (the fingerprint's part).
async fn gather_secrets(
    client: &kube::Client,
    namespace: &str,
    connection: &NatsConnection,
) -> Result<(Secrets, Vec<String>), kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let spec = &connection.spec;
    let names = spec
        .credentials
        .iter()
        .map(|c| c.secret_key_ref.name.clone())
        .chain(
            spec.tls
                .iter()
                .filter_map(|t| t.ca.as_ref())
                .map(|c| c.secret_key_ref.name.clone()),
        );
    let mut secrets = Secrets::new();
    let mut versions = Vec::new();
    for name in names {
        if let Some(s) = api.get_opt(&name).await? {
            versions.push(format!(
                "{name}@{}",
                s.metadata.resource_version.clone().unwrap_or_default()
            ));
            secrets.insert(name, secret_data(&s));
        }
    }
    Ok((secrets, versions))
}

/// Whether a connection that cannot be dialed again because of `ready` keeps the client it
/// already holds: only while it is being deleted and only for a Secret gone. A namespace
/// deletion removes its Secrets at once, while the connection itself stays (its in-use
/// finalizer) until the Delete-policy resources naming it ran their deletion over it.
pub fn keeps_held_client(deleting: bool, ready: &Ready) -> bool {
    deleting && matches!(ready, Ready::SecretNotFound { .. })
}

impl Pool {
    /// The shared client of `namespace/name`, dialing it when it is new or changed (and not
    /// failing within its backoff).
    pub async fn resolve(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Resolved, kube::Error> {
        self.resolve_with(client, namespace, name, None).await
    }

    /// [`Pool::resolve`] from `known`, the NatsConnection as a watch cache holds it, when there
    /// is one: then the NatsConnection itself is not read from the apiserver (its Secrets are).
    pub async fn resolve_with(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
        known: Option<&NatsConnection>,
    ) -> Result<Resolved, kube::Error> {
        let key = format!("{namespace}/{name}");
        let read;
        let connection = match known {
            Some(c) => c,
            None => {
                let api: Api<NatsConnection> = Api::namespaced(client.clone(), namespace);
                let Some(c) = api.get_opt(name).await? else {
                    self.dials.forget(&key);
                    return Ok(Resolved::Missing);
                };
                read = c;
                &read
            }
        };
        let (secrets, versions) = gather_secrets(client, namespace, connection).await?;
        let fingerprint = format!(
            "{}|{}",
            serde_json::to_string(&connection.spec).unwrap_or_default(),
            versions.join(",")
        );
        let config = match dial_config(&connection.spec, &secrets) {
            Ok(c) => c
                .with_connect_timeout(DIAL_TIMEOUT)
                .with_ping_interval(PING_INTERVAL)
                .with_name(format!("jetstream-controller {namespace}/{name}")),
            Err(ready) => {
                // A connection being deleted whose Secrets are gone (a namespace deletion removes
                // them at once) keeps the client it holds, so the Delete-policy resources that
                // keep it (the in-use finalizer) can still run their deletion (issue 43).
                let deleting = connection.metadata.deletion_timestamp.is_some();
                // The client stays held (unused while live) when only a Secret is gone: the
                // namespace controller may delete the Secret before the connection itself.
                if keeps_held_client(deleting, &ready)
                    && let Some(held) = self.dials.held(&key)
                    && held.client.connection_state() == async_nats::connection::State::Connected
                {
                    return Ok(Resolved::Connected(held.client));
                }
                if !matches!(ready, Ready::SecretNotFound { .. }) {
                    self.dials.forget(&key);
                }
                return Ok(Resolved::NotReady(ready));
            }
        };
        let dialed = self
            .dials
            .get(
                &key,
                &fingerprint,
                // Kept while it reconnects on its own; its state says whether it is up.
                |_: &Held| true,
                || async {
                    match nats_wire::dial(&config).await {
                        Ok(wire) => {
                            let trouble = wire.trouble();
                            if let Some(t) = &trouble {
                                self.tell_changes(namespace, name, t.clone());
                            }
                            Ok(Held {
                                client: wire.client().clone(),
                                trouble,
                            })
                        }
                        Err(e) => Err(ready_after_dial(&connection.spec, Err(&e))),
                    }
                },
            )
            .await;
        Ok(match dialed {
            Ok(held) => {
                let connected =
                    held.client.connection_state() == async_nats::connection::State::Connected;
                let trouble = held.trouble.as_ref().and_then(|t| t.borrow().clone());
                match ready_of_held(&connection.spec.servers, connected, trouble.as_ref()) {
                    Ready::Connected => Resolved::Connected(held.client),
                    lost => Resolved::NotReady(lost),
                }
            }
            Err(failed) => Resolved::NotReady(failed.failure),
        })
    }

    /// Every connection lost or regained from now on, as `(namespace, name)` of its
    /// NatsConnection.
    pub fn changes(&self) -> futures::channel::mpsc::UnboundedReceiver<(String, String)> {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(tx);
        rx
    }

    /// Tells the listeners each change of a new connection's trouble, until the connection is
    /// gone (its event callback, holding the sender, ends with it).
    fn tell_changes(&self, namespace: &str, name: &str, mut trouble: Trouble) {
        let listeners = self.listeners.clone();
        let who = (namespace.to_string(), name.to_string());
        tokio::spawn(async move {
            while trouble.changed().await.is_ok() {
                let mut l = listeners.lock().unwrap_or_else(|p| p.into_inner());
                l.retain(|tx| tx.unbounded_send(who.clone()).is_ok());
            }
        });
    }

    /// How many connections are open (one per NatsConnection in use).
    pub fn len(&self) -> usize {
        self.dials.connected()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod keeps_held_tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::deleting_and_its_secret_gone(true, Ready::SecretNotFound { secret: "creds".into() }, true)]
    #[case::live_and_its_secret_gone(false, Ready::SecretNotFound { secret: "creds".into() }, false)]
    #[case::deleting_but_connected(true, Ready::Connected, false)]
    fn a_connection_being_deleted_keeps_its_client_when_its_secrets_go(
        #[case] deleting: bool,
        #[case] ready: Ready,
        #[case] want: bool,
    ) {
        assert_eq!(keeps_held_client(deleting, &ready), want);
    }
}
