//! The connection pool: one NATS connection per NatsConnection, shared by every resource naming
//! it, re-dialed only when the NatsConnection's spec or the Secrets it reads change. Each
//! connection is dialed under its own lock; a failed dial is answered from memory until its
//! backoff ends.

use std::time::Duration;

use controller_kit::dials::Dials;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use nats_api::nats::NatsConnection;

use crate::connection::{Ready, Secrets, dial_config, ready_after_dial, secret_data};

/// How long a first dial may take before the connection is ConnectFailed.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

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
    dials: Dials<async_nats::Client, Ready>,
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

impl Pool {
    /// The shared client of `namespace/name`, dialing it when it is new or changed (and not
    /// failing within its backoff).
    pub async fn resolve(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Resolved, kube::Error> {
        let key = format!("{namespace}/{name}");
        let api: Api<NatsConnection> = Api::namespaced(client.clone(), namespace);
        let Some(connection) = api.get_opt(name).await? else {
            self.dials.forget(&key);
            return Ok(Resolved::Missing);
        };
        let (secrets, versions) = gather_secrets(client, namespace, &connection).await?;
        let fingerprint = format!(
            "{}|{}",
            serde_json::to_string(&connection.spec).unwrap_or_default(),
            versions.join(",")
        );
        let config = match dial_config(&connection.spec, &secrets) {
            Ok(c) => c
                .with_connect_timeout(DIAL_TIMEOUT)
                .with_name(format!("jetstream-controller {namespace}/{name}")),
            Err(ready) => {
                self.dials.forget(&key);
                return Ok(Resolved::NotReady(ready));
            }
        };
        let dialed = self
            .dials
            .get(
                &key,
                &fingerprint,
                |c: &async_nats::Client| {
                    c.connection_state() == async_nats::connection::State::Connected
                },
                || async {
                    match nats_wire::dial(&config).await {
                        Ok(wire) => Ok(wire.client().clone()),
                        Err(e) => Err(ready_after_dial(&connection.spec, Err(&e))),
                    }
                },
            )
            .await;
        Ok(match dialed {
            Ok(c) => Resolved::Connected(c),
            Err(failed) => Resolved::NotReady(failed.failure),
        })
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
