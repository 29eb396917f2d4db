//! What every reconcile of the JetStream controller shares: the kit's shared parts, the NATS
//! connection pool and the process settings. Nothing global.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use controller_kit::context::{HasShared, Shared};
use controller_kit::metrics::Metrics;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use nats_api::jetstream::FIELD_MANAGER;
use nats_api::nats::NatsConnection;

use super::census::Census;
pub use super::lock::lock;
use crate::balance::account::SystemCover;
use crate::balance::gate::Sighting;
use crate::lease::{LEASE_LAPSE, Leases};
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
    pub pool: Arc<Pool>,
    /// The process settings.
    pub settings: Settings,
    /// The move lease of each NATS cluster (§6.5).
    pub leases: Arc<Leases>,
    /// What the balancers must leave alone and whom they yield to, as the passes of the
    /// evacuations and system balancers last recorded it.
    pub moving: Arc<Moving>,
    /// How many servers each balancer's and evacuation's JSZ ping was answered by.
    pub census: Arc<Census>,
    /// The stream-backed objects, from their Controllers' stores: what the balancer and
    /// evacuation passes read their owners from ([`super::index`]).
    pub index: Arc<super::index::Index>,
    /// Each NatsConnection's share of a Controller's request slots ([`super::share`]).
    pub shares: Arc<super::connection_shares::Shares>,
    /// The NatsConnections (`ns/name@uid`) this process has seen carry the in-use finalizer
    /// ([`super::in_use`]), so a pass does not read them again.
    pub in_use: Arc<Mutex<BTreeSet<String>>>,
    /// Held while a pass reads a NatsConnection not yet marked in use and adds its finalizer,
    /// so the passes that start together add it once, not in a race of 422s.
    pub in_use_adding: Arc<tokio::sync::Mutex<()>>,
    /// The NatsConnection Controller's store, set once it starts: what a resource's pass reads
    /// its connection from ([`Context::cached_connection`]).
    pub connections: Arc<OnceLock<Store<NatsConnection>>>,
}

impl Context {
    /// The same context for the passes of `kind` (a balancer or evacuation kind): every state
    /// shared, the kit's parts its own, on a client that counts each apiserver request it sends
    /// under `kind` ([`super::requests`]). Call it within the runtime (the client spawns its
    /// buffer).
    pub(crate) fn for_passes(&self, kind: &'static str) -> Arc<Context> {
        let metrics = self.shared.metrics.clone();
        let client = super::requests::counting(self.shared.client.clone(), metrics.clone(), kind);
        Arc::new(Context {
            shared: Shared::new(client, metrics, FIELD_MANAGER).scoped(self.settings.scope.clone()),
            pool: self.pool.clone(),
            settings: self.settings.clone(),
            leases: self.leases.clone(),
            moving: self.moving.clone(),
            census: self.census.clone(),
            index: self.index.clone(),
            shares: self.shares.clone(),
            in_use: self.in_use.clone(),
            in_use_adding: self.in_use_adding.clone(),
            connections: self.connections.clone(),
        })
    }
}

impl Context {
    /// Whether the connection `key` is known to carry the in-use finalizer.
    pub(crate) fn in_use_marked(&self, key: &str) -> bool {
        lock(&self.in_use).contains(key)
    }

    /// Remembers that the connection `key` carries the in-use finalizer.
    pub(crate) fn mark_in_use(&self, key: String) {
        lock(&self.in_use).insert(key);
    }

    /// Forgets the connection `key` (its in-use finalizer was removed).
    pub(crate) fn forget_in_use(&self, key: &str) {
        lock(&self.in_use).remove(key);
    }

    /// The NatsConnection `namespace/name` as the NatsConnection Controller's watch last saw
    /// it; None when it has not seen it (or has not started), and the caller reads it from the
    /// apiserver. A pass that finds its connection here sends the apiserver nothing for it.
    pub(crate) fn cached_connection(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<NatsConnection>> {
        self.connections
            .get()?
            .get(&ObjectRef::new(name).within(namespace))
    }
}

/// The streams each evacuation has a move requested on and each system balancer's NATS cluster
/// and pending moves, in memory: a balancer skips streams under evacuation and yields to the
/// system balancer of its NATS cluster.
#[derive(Default)]
pub struct Moving {
    /// Evacuation (`ns/name`) → (account, stream) moves requested.
    pub evacuations: Mutex<BTreeMap<String, BTreeSet<(String, String)>>>,
    /// Evacuation (`ns/name`) → the streams whose move nats-server refused.
    pub refused: Mutex<BTreeMap<String, Refusals>>,
    /// System balancer (`ns/name`) → its claim.
    pub system_balancers: Mutex<BTreeMap<String, SystemClaim>>,
    /// NATS cluster → what the last system-credentials pass saw of it (a system balancer's or
    /// an evacuation's), which an account balancer's Settled gate reads ([`crate::balance::gate`]).
    pub sightings: Mutex<BTreeMap<String, Arc<Sighting>>>,
}

/// (account, stream) whose move nats-server refused, and when.
pub type Refusals = BTreeMap<(String, String), std::time::Instant>;

/// A system balancer's NATS cluster, its age (the oldest of two for one cluster wins), the moves
/// it makes, the streams it has a move pending on, and when it last passed with its NATS cluster
/// in view. A claim lapses a minute after that pass ([`SystemClaim::alive`]), as a move lease
/// does: a balancer that can no longer reach its NATS cluster, or whose controller shard lost
/// it, stops holding the account balancers back and stops refusing its successor.
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
    /// Its last pass that gathered its NATS cluster.
    pub last_pass: Instant,
}

impl SystemClaim {
    /// Whether the claim still stands at `now` (its last pass less than [`LEASE_LAPSE`] ago).
    pub fn alive(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_pass) < LEASE_LAPSE
    }
}

/// Of the claims standing at `now` on NATS cluster `cluster`, the one that balances it: the
/// oldest (then the first by name).
pub fn claim_winner(
    claims: &BTreeMap<String, SystemClaim>,
    cluster: &str,
    now: Instant,
) -> Option<String> {
    claims
        .iter()
        .filter(|(_, c)| c.cluster == cluster && c.alive(now))
        .min_by(|a, b| a.1.age.cmp(&b.1.age))
        .map(|(k, _)| k.clone())
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

    /// Records `sighting` as the last one of each NATS cluster of `clusters`.
    pub fn sight<'a>(&self, clusters: impl IntoIterator<Item = &'a str>, sighting: Sighting) {
        let sighting = Arc::new(sighting);
        let mut all = lock(&self.sightings);
        for c in clusters {
            all.insert(c.to_owned(), sighting.clone());
        }
    }

    /// Forgets the sightings `by` left (a system balancer or evacuation deleted): an account
    /// balancer's gate then judges from its own streams at once, instead of from a view no pass
    /// refreshes, until it ages out.
    pub fn unsight(&self, by: &str) {
        lock(&self.sightings).retain(|_, s| s.by != by);
    }

    /// The last sighting of NATS cluster `cluster`, if any.
    pub fn sighting(&self, cluster: &str) -> Option<Arc<Sighting>> {
        lock(&self.sightings).get(cluster).cloned()
    }

    /// Every system balancer's claim standing at `now`, as the account balancers read it.
    pub fn system_covers(&self, now: Instant) -> Vec<SystemCover> {
        lock(&self.system_balancers)
            .iter()
            .filter(|(_, c)| c.alive(now))
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

impl HasShared for Context {
    fn shared(&self) -> &Shared {
        &self.shared
    }
}

/// A context for `client` with a fresh pool, metrics state and Events.
pub fn context(client: kube::Client, settings: Settings, metrics: Metrics) -> Arc<Context> {
    Arc::new(Context {
        shared: Shared::new(client, metrics, FIELD_MANAGER).scoped(settings.scope.clone()),
        shares: Arc::new(super::connection_shares::Shares::new(
            settings.scope.concurrency,
        )),
        pool: Arc::default(),
        settings,
        leases: Arc::default(),
        moving: Arc::default(),
        census: Arc::default(),
        index: Arc::default(),
        in_use: Arc::default(),
        in_use_adding: Arc::default(),
        connections: Arc::default(),
    })
}

/// The watcher configuration every controller uses.
pub(crate) fn watch_config() -> watcher::Config {
    watcher::Config::default()
}

/// The Controller of `K` over the namespaces of `ctx`'s scope, less the echoes of the writes
/// of the passes run with `passes` ([`controller_kit::watch::controller_less_echoes`]): a pass
/// runs on its interval, or on a change by someone else.
pub(crate) fn controller_of<K: controller_kit::watched::Watched>(
    ctx: &Context,
    passes: Arc<Context>,
) -> kube::runtime::Controller<K> {
    controller_kit::watch::controller_less_echoes::<K, _>(
        &ctx.shared.client,
        &ctx.shared.scope,
        watch_config(),
        passes,
    )
}

/// `obj` to pass at once: its due time forgotten (a pass woken by a change runs now, not when
/// its interval says), and its reference for the Controller's trigger.
pub(crate) fn due_now<K>(ctx: &Context, obj: &K) -> kube::runtime::reflector::ObjectRef<K>
where
    K: kube::Resource<DynamicType = ()>,
{
    ctx.shared.due.forget(obj);
    kube::runtime::reflector::ObjectRef::from_obj(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_sighters_sightings_go_with_it() {
        let moving = Moving::default();
        let seen = |by: &str| {
            Sighting::of(
                by.into(),
                Instant::now(),
                crate::system_view::SystemView::default(),
                &[],
            )
        };
        moving.sight(["c1", "c2"], seen("NatsSystemBalancer nats/a"));
        moving.sight(["c3"], seen("NatsClusterEvacuation nats/e"));
        moving.unsight("NatsSystemBalancer nats/a");
        assert!(moving.sighting("c1").is_none() && moving.sighting("c2").is_none());
        assert_eq!(
            moving.sighting("c3").map(|s| s.by.clone()).as_deref(),
            Some("NatsClusterEvacuation nats/e")
        );
    }

    fn claim(cluster: &str, created: &str, last_pass: Instant) -> SystemClaim {
        SystemClaim {
            cluster: cluster.into(),
            age: (created.into(), String::new()),
            pending: BTreeSet::from([("APP".into(), "ORDERS".into())]),
            leader_accounts: BTreeSet::new(),
            placement: false,
            last_pass,
        }
    }

    /// Each row: the claims (name, cluster, creation, seconds since its last pass), the cluster
    /// judged, and who balances it.
    #[test]
    fn the_oldest_standing_claim_balances_a_nats_cluster() {
        type Row = (
            &'static [(&'static str, &'static str, &'static str, u64)],
            &'static str,
            Option<&'static str>,
        );
        let rows: &[Row] = &[
            (&[("nats/a", "c1", "2026-01-01", 0)], "c1", Some("nats/a")),
            // The older wins while both stand.
            (
                &[
                    ("nats/a", "c1", "2026-01-02", 0),
                    ("nats/b", "c1", "2026-01-01", 5),
                ],
                "c1",
                Some("nats/b"),
            ),
            // The older has not passed for a minute: its claim lapsed, the younger balances.
            (
                &[
                    ("nats/a", "c1", "2026-01-02", 0),
                    ("nats/b", "c1", "2026-01-01", 60),
                ],
                "c1",
                Some("nats/a"),
            ),
            (
                &[
                    ("nats/a", "c1", "2026-01-02", 59),
                    ("nats/b", "c1", "2026-01-01", 61),
                ],
                "c1",
                Some("nats/a"),
            ),
            // Every claim lapsed: nobody.
            (&[("nats/a", "c1", "2026-01-01", 600)], "c1", None),
            // Another NATS cluster's claim is not this one's.
            (&[("nats/a", "c2", "2026-01-01", 0)], "c1", None),
        ];
        let now = Instant::now() + Duration::from_secs(3600);
        for (i, (claims, cluster, want)) in rows.iter().enumerate() {
            let map: BTreeMap<String, SystemClaim> = claims
                .iter()
                .map(|(name, c, created, ago)| {
                    (
                        (*name).into(),
                        claim(c, created, now - Duration::from_secs(*ago)),
                    )
                })
                .collect();
            assert_eq!(
                claim_winner(&map, cluster, now).as_deref(),
                *want,
                "row {i}: {claims:?}"
            );
        }
    }

    #[test]
    fn a_lapsed_claim_holds_no_account_balancer_back() {
        let now = Instant::now() + Duration::from_secs(3600);
        let moving = Moving::default();
        lock(&moving.system_balancers).insert("nats/sys".into(), claim("c1", "t", now));
        assert_eq!(moving.system_covers(now).len(), 1);
        let later = now + LEASE_LAPSE;
        assert!(
            moving.system_covers(later).is_empty(),
            "lapsed a minute after its last pass"
        );
    }
}
