//! The Kubernetes shell of the auth controller: one kube-rs `Controller` per kind (NatsOperator,
//! NatsSystemAccount, NatsAccount, NatsUser, NatsOperatorTrust, NatsAccountTrust) over one
//! [`index`] of the auth kinds. A pass gathers its inputs (its object read fresh, what it
//! references from the index, key Secrets), asks the pure core what to sign and what to refuse,
//! and writes what it decided: generated key Secrets and creds Secrets, status through the status
//! subresource, Events, and account JWTs pushed over `--system-connection`.
//!
//! Each kind's pass lives in a directory of its name ([`operator`], [`system_account`],
//! [`account`], [`user`]; the trust objects' in [`trust_objects`]), its module doc listing the
//! phases and one file per phase; no pass imports another. The pieces several passes share live in
//! modules named for what they hold ([`index`], [`pass`], [`write_status`], [`finalizer`],
//! [`error`], [`refs`], [`creds`], [`seeds`], [`nats`], [`claims_delete`], [`shutdowns`],
//! [`revocation`], [`jwt`], [`time`]); a deleted user's revocation, push and kick also run in the
//! revocation [`lane`], beside the Controllers' queues.
//!
//! Every pass runs on the kit's skeleton: its Controller driven by the kit's run loop
//! ([`pass::drive`]), the kit's finalizer path ([`finalizer::reconcile`]), its conditions the
//! kit's `Decided`, refusals its `Blocked`. A refusal or a missing reference is a condition and a
//! requeue with backoff; only a failure of the Kubernetes API (a finalizer write among them) or
//! of the index is an [`Error`], retried by the kit's error policy. Seeds never leave Secrets:
//! nothing here formats an [`NKey`](nats_claims::NKey) or a creds file into a log, an Event, a
//! status or an error.

mod account;
mod change;
mod claims_delete;
mod creds;
mod error;
mod finalizer;
mod index;
mod jwt;
mod lane;
mod locks;
mod nats;
mod operator;
mod pass;
mod refs;
mod revocation;
mod seeds;
mod shutdowns;
mod system_account;
mod time;
mod trust_objects;
mod user;
mod wakes;
mod write_status;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use controller_kit::context::{HasShared, Shared};
use controller_kit::metrics::Metrics;
use nats_api::auth::FIELD_MANAGER;

pub use error::Error;
pub use nats::SystemConnection;

/// The default resync period: every object is re-read and re-checked this often.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(300);

/// How soon an object waiting on another (its NatsOperator's keys, an exporter's activation)
/// looks again at the latest, besides the watch that wakes it.
pub const WAIT_RETRY: Duration = Duration::from_secs(5);

/// Settings of a controller process.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The resync period.
    pub resync: Duration,
    /// The NatsConnection (namespace, name) JWTs are pushed over; `None`: nothing is pushed and
    /// every account and user reads Distributed False, reason NoSystemConnection.
    pub system_connection: Option<SystemConnection>,
    /// `--watch-namespaces` and `--concurrency`.
    pub scope: controller_kit::scope::Scope,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            resync: DEFAULT_RESYNC,
            system_connection: None,
            scope: controller_kit::scope::Scope::default(),
        }
    }
}

/// What every reconcile shares.
pub struct Context {
    /// The client, metrics, Events, backoff and due times (the kit's).
    pub shared: Shared,
    /// The process settings.
    pub settings: Settings,
    /// The system connection under its own lock, re-dialed when what it is dialed from changes,
    /// a failed dial remembered with a backoff.
    system: controller_kit::dials::Dials<nats_wire::Wire, String>,
    /// Set when a ping over the system connection heard no server at all: the server it is
    /// connected to is hung or cut off (the client would notice only after its pings time out),
    /// so the next pass dials again, which picks a server that answers.
    redial: std::sync::atomic::AtomicBool,
    /// Per NATS operator ([`nats::roster_key`]), the roster with memory as its last ping left it: the
    /// next ping waits for that many, and a recorded server that stops answering is counted as
    /// down (see [`crate::roster`]). Per operator because one NATS deployment trusts one
    /// operator: the servers of another's records are not this deployment's, and counted as its
    /// silent servers they would hold its accounts for good.
    roster: std::sync::Mutex<BTreeMap<String, crate::roster::Roster>>,
    /// The ids of the servers heard announcing their shutdown ([`shutdowns`]) and the unix
    /// second each was heard, kept while a record could still name them silent.
    shut_down: std::sync::Mutex<BTreeMap<String, i64>>,
    /// Per NatsOperator (namespace/name), which deleted accounts each server (by its id) has
    /// confirmed deleting.
    confirmed: std::sync::Mutex<BTreeMap<String, crate::deletions::Confirmed>>,
    /// How often each account's JWT was pushed, which voids the confirmations before it.
    pushes: std::sync::Mutex<crate::deletions::Pushes>,
    /// Per NatsOperator (namespace/name), its deleted accounts and the key that signs their
    /// CLAIMS.DELETE, as its last pass left them: what the rejoin watch sends between passes.
    deletions: std::sync::Mutex<BTreeMap<String, claims_delete::Deletions>>,
    /// Per account key, the least iat a new JWT may carry: one past a newer JWT a server holds.
    iat_floor: std::sync::Mutex<HashMap<String, i64>>,
    /// Signing keys as passes read them, kept per object version ([`seeds::kept`]): an
    /// account's for its users' passes, a NatsOperator's for its accounts' passes.
    kept_keys: seeds::kept::Kept,
    /// Per object, the lock its pass holds: the revocation lane's and the Controllers'.
    locks: locks::Locks,
    /// The stores every pass reads its references from.
    index: index::Index,
    /// The watches that fill [`Context::index`], until [`run`] takes them.
    feeds: std::sync::Mutex<Option<index::Feeds>>,
}

impl HasShared for Context {
    fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl Context {
    /// The roster with memory as the last ping under the NATS operator `operator`
    /// ([`nats::roster_key`]) left it.
    pub(crate) fn roster(&self, operator: &str) -> crate::roster::Roster {
        self.roster
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(operator)
            .cloned()
            .unwrap_or_default()
    }

    pub(crate) fn iat_floor(&self, account: &str) -> i64 {
        self.iat_floor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(account)
            .copied()
            .unwrap_or(0)
    }

    pub(crate) fn raise_iat_floor(&self, account: &str, at_least: i64) {
        let mut map = self.iat_floor.lock().unwrap_or_else(|p| p.into_inner());
        let e = map.entry(account.to_string()).or_insert(0);
        *e = (*e).max(at_least);
    }
}

/// Runs every controller of the auth controller until they end (they run forever).
pub async fn run(ctx: Arc<Context>) {
    let taken = ctx.feeds.lock().unwrap_or_else(|p| p.into_inner()).take();
    let Some(feeds) = taken else {
        tracing::error!("the controllers of this context run already");
        return;
    };
    let index::Feeds {
        operators,
        system_accounts,
        accounts,
        users,
        grants,
        connections,
    } = feeds;
    futures::join!(
        ctx.index.report_until_ready(),
        index::follow(
            grants,
            ctx.shared.client.clone(),
            ctx.shared.scope.namespaces.clone()
        ),
        index::follow(
            connections,
            ctx.shared.client.clone(),
            ctx.shared.scope.namespaces.clone()
        ),
        operator::controller(ctx.clone(), operators),
        system_account::controller(ctx.clone(), system_accounts),
        account::controller(ctx.clone(), accounts),
        user::controller(ctx.clone(), users),
        trust_objects::operator_trust_controller(ctx.clone()),
        trust_objects::account_trust_controller(ctx.clone()),
        claims_delete::rejoin_watch(ctx.clone()),
        shutdowns::shutdown_watch(ctx.clone()),
        lane::run(ctx.clone()),
    );
}

/// A context for `client` with fresh metrics state and Events.
pub fn context(client: kube::Client, settings: Settings, metrics: Metrics) -> Arc<Context> {
    let (index, feeds) = index::new();
    Arc::new(Context {
        shared: Shared::new(client, metrics, FIELD_MANAGER).scoped(settings.scope.clone()),
        settings,
        system: controller_kit::dials::Dials::default(),
        roster: std::sync::Mutex::new(BTreeMap::new()),
        shut_down: std::sync::Mutex::default(),
        redial: std::sync::atomic::AtomicBool::new(false),
        confirmed: std::sync::Mutex::default(),
        pushes: std::sync::Mutex::default(),
        deletions: std::sync::Mutex::default(),
        iat_floor: std::sync::Mutex::default(),
        kept_keys: seeds::kept::Kept::default(),
        locks: locks::Locks::default(),
        index,
        feeds: std::sync::Mutex::new(Some(feeds)),
    })
}
