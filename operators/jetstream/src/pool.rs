//! The connection pool: one NATS connection per NatsConnection, shared by every resource naming
//! it, re-dialed only when the NatsConnection's spec or the Secrets it reads change.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use nats_api::nats::NatsConnection;
use tokio::sync::Mutex;

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

struct Entry {
    fingerprint: String,
    client: async_nats::Client,
}

/// The pool, keyed by (namespace, name) of the NatsConnection.
#[derive(Default)]
pub struct Pool {
    entries: Mutex<HashMap<(String, String), Entry>>,
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
    /// The shared client of `namespace/name`, dialing it when it is new or changed.
    pub async fn resolve(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Resolved, kube::Error> {
        let api: Api<NatsConnection> = Api::namespaced(client.clone(), namespace);
        let Some(connection) = api.get_opt(name).await? else {
            self.entries
                .lock()
                .await
                .remove(&(namespace.to_string(), name.to_string()));
            return Ok(Resolved::Missing);
        };
        let (secrets, versions) = gather_secrets(client, namespace, &connection).await?;
        let fingerprint = format!(
            "{}|{}",
            serde_json::to_string(&connection.spec).unwrap_or_default(),
            versions.join(",")
        );
        let key = (namespace.to_string(), name.to_string());
        let mut entries = self.entries.lock().await;
        if let Some(e) = entries.get(&key)
            && e.fingerprint == fingerprint
            && e.client.connection_state() == async_nats::connection::State::Connected
        {
            return Ok(Resolved::Connected(e.client.clone()));
        }
        let config = match dial_config(&connection.spec, &secrets) {
            Ok(c) => c
                .with_connect_timeout(DIAL_TIMEOUT)
                .with_name(format!("jetstream-controller {namespace}/{name}")),
            Err(ready) => {
                entries.remove(&key);
                return Ok(Resolved::NotReady(ready));
            }
        };
        match nats_wire::dial(&config).await {
            Ok(wire) => {
                let c = wire.client().clone();
                entries.insert(
                    key,
                    Entry {
                        fingerprint,
                        client: c.clone(),
                    },
                );
                Ok(Resolved::Connected(c))
            }
            Err(e) => {
                entries.remove(&key);
                Ok(Resolved::NotReady(ready_after_dial(
                    &connection.spec,
                    Err(&e),
                )))
            }
        }
    }

    /// How many connections are open (one per NatsConnection in use).
    pub async fn len(&self) -> usize {
        self.entries.lock().await.len()
    }

    /// Whether no connection is open.
    pub async fn is_empty(&self) -> bool {
        self.entries.lock().await.is_empty()
    }
}
