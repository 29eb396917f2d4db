//! What every reconcile of the JetStream controller shares: the kit's shared parts, the NATS
//! connection pool and the process settings. Nothing global.

use std::sync::Arc;
use std::time::Duration;

use controller_kit::context::{HasShared, Shared};
use controller_kit::metrics::Metrics;
use kube::runtime::watcher;
use nats_api::jetstream::FIELD_MANAGER;

use crate::pool::Pool;

/// The default resync period: every resource is re-read and compared this often.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(300);

/// How often a resource waiting for a reference (a consumer's stream) looks again.
pub const WAIT_RETRY: Duration = Duration::from_secs(5);

/// Settings of a controller process.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The resync period.
    pub resync: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            resync: DEFAULT_RESYNC,
        }
    }
}

/// What every reconcile shares.
pub struct Context {
    /// The client, metrics, Events, backoff and due times (the kit's).
    pub shared: Shared,
    /// One NATS connection per NatsConnection.
    pub pool: Pool,
    /// The process settings.
    pub settings: Settings,
}

impl HasShared for Context {
    fn shared(&self) -> &Shared {
        &self.shared
    }
}

/// A context for `client` with a fresh pool, metrics state and Events.
pub fn context(client: kube::Client, settings: Settings, metrics: Metrics) -> Arc<Context> {
    Arc::new(Context {
        shared: Shared::new(client, metrics, FIELD_MANAGER),
        pool: Pool::default(),
        settings,
    })
}

/// The watcher configuration every controller uses.
pub(crate) fn watch_config() -> watcher::Config {
    watcher::Config::default()
}
