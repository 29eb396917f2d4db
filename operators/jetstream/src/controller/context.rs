//! What every reconcile of the JetStream controller shares: the kit's shared parts, the NATS
//! connection pool and the process settings. Nothing global.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use controller_kit::context::{HasShared, Shared};
use controller_kit::metrics::Metrics;
use kube::runtime::watcher;
use nats_api::jetstream::FIELD_MANAGER;

use super::census::Census;
use crate::balance::account::SystemCover;
use crate::lease::Leases;
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
    /// `--watch-namespaces` and `--concurrency`.
    pub scope: controller_kit::scope::Scope,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            resync: DEFAULT_RESYNC,
            scope: controller_kit::scope::Scope::default(),
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
    /// The move lease of each NATS cluster (§6.5).
    pub leases: Leases,
    /// What the balancers must leave alone and whom they yield to, as the passes of the
    /// evacuations and system balancers last recorded it.
    pub moving: Moving,
    /// How many servers each balancer's and evacuation's JSZ ping was answered by.
    pub census: Census,
}

/// The streams each evacuation has a move requested on and each system balancer's NATS cluster
/// and pending moves, in memory: a balancer skips streams under evacuation and yields to the
/// system balancer of its NATS cluster.
#[derive(Default)]
pub struct Moving {
    /// Evacuation (`ns/name`) → (account, stream) moves requested.
    pub evacuations: Mutex<BTreeMap<String, BTreeSet<(String, String)>>>,
    /// System balancer (`ns/name`) → its claim.
    pub system_balancers: Mutex<BTreeMap<String, SystemClaim>>,
}

/// A system balancer's NATS cluster, its age (the oldest of two for one cluster wins), the moves
/// it makes and the streams it has a move pending on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemClaim {
    /// The NATS cluster its connection reaches.
    pub cluster: String,
    /// Its creationTimestamp (RFC 3339) and name, the order duplicates are judged in.
    pub age: (String, String),
    /// (account, stream) with a move pending.
    pub pending: BTreeSet<(String, String)>,
    /// Accounts whose leaders it moves (their jetstream-stepdown export reached; none with
    /// leader moves off).
    pub leader_accounts: BTreeSet<String>,
    /// Whether it makes placement moves.
    pub placement: bool,
}

impl Moving {
    /// Every stream under evacuation.
    pub fn under_evacuation(&self) -> BTreeSet<(String, String)> {
        lock(&self.evacuations)
            .values()
            .flatten()
            .cloned()
            .collect()
    }

    /// Every system balancer's claim as the account balancers read it.
    pub fn system_covers(&self) -> Vec<SystemCover> {
        lock(&self.system_balancers)
            .iter()
            .map(|(name, c)| SystemCover {
                name: name.clone(),
                cluster: c.cluster.clone(),
                leader_accounts: c.leader_accounts.clone(),
                placement: c.placement,
                pending: c.pending.clone(),
            })
            .collect()
    }
}

/// A lock of the in-memory records, poisoning ignored (the records are rewritten every pass).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl HasShared for Context {
    fn shared(&self) -> &Shared {
        &self.shared
    }
}

/// A context for `client` with a fresh pool, metrics state and Events.
pub fn context(client: kube::Client, settings: Settings, metrics: Metrics) -> Arc<Context> {
    Arc::new(Context {
        shared: Shared::new(client, metrics, FIELD_MANAGER).scoped(settings.scope.clone()),
        pool: Pool::default(),
        settings,
        leases: Leases::default(),
        moving: Moving::default(),
        census: Census::default(),
    })
}

/// The watcher configuration every controller uses.
pub(crate) fn watch_config() -> watcher::Config {
    watcher::Config::default()
}
