//! The index: one watch per auth kind (NatsOperator, NatsSystemAccount, NatsAccount, NatsUser,
//! NatsReferenceGrant) and of NatsConnections, each feeding an in-memory store every controller reads, so a pass asks
//! its cross-object questions of memory instead of listing the cluster (with 1,000 users, a LIST
//! of every NatsUser per user pass was O(N²)).
//!
//! # Feeds
//!
//! The watch of a controller's own kind is the index's: [`Feed::trigger`] applies each event to
//! the store, then hands the applied objects to `Controller::for_stream`, so the controller and
//! the index share one watch and one store. The grants and the NatsConnections have no
//! controller here; their watches are driven by [`follow`]. Every event that changes a store (an object applied or deleted, a relist done)
//! then wakes the controllers that depend on that kind, after the store took it in, so a wake
//! always finds the store holding the change that caused it: every object of theirs
//! ([`Index::wakes`]), or only those the changed object concerns ([`Index::changes`], each
//! change naming its object; [`super::wakes`] says which). No pass runs before every store has had its first list
//! ([`Index::ready`], awaited before each pass): a store still empty would read as "no grant",
//! "no user". That wait is on a signal of the feed's own, set once the first list is in the
//! store: the store's `wait_until_ready` wakes only the last of several waiters, and its
//! Controller's runner is one already.
//!
//! # Under `--watch-namespaces`
//!
//! Each store still has one writer, fed by one watch per listed namespace merged into the
//! events of a single watch ([`controller_kit::scope`]): one `InitDone`, once every namespace
//! has listed, so `listed` (and [`Index::ready`]) still means "no namespace missing", and a
//! later relist of one namespace comes as applies and deletes, each a wake. Chosen over one
//! store per namespace, which every question here (grants of a target's namespace, users of an
//! account in another) would have to ask of each in turn, and over one Controller per
//! namespace, whose wakes would cross controllers. A namespace not listed has nothing in the
//! index: a reference into it reads as absent, and nothing there is read or written.
//!
//! # Questions
//!
//! - "operator of": [`Index::operator`], [`Index::system_account`], [`Index::account`] by name;
//!   [`Index::accounts_of`] a NatsOperator.
//! - "users of this account": [`Index::users_of`], for the revocation record, the RetiringKeysInUse
//!   issuers ([`super::creds::issuers`]) and PublicKeyInUse among users.
//! - "under which NatsOperator is this account key": [`Index::operators_recording`], for an
//!   import by publicKey (an import crosses no NatsOperator).
//! - "admitted": [`Index::admits`], [`Index::account_admitted`], [`Index::grants_in`], from the
//!   grants of the target's namespace (§7).
//! - "who reads these creds": [`Index::creds_readers`], the NatsConnections of a namespace and
//!   the Secret each names, for a deleted user's creds in use ([`super::user::in_use`]).
//!
//! Results come in the order a LIST gives (by `namespace/name`), so what is derived from them
//! (the order of status.revocations and status.deletedAccounts, the holder a refusal names, the
//! grant a message names) is what it was when each pass listed.
//!
//! # Why reading the index is safe
//!
//! A store lags the apiserver by at most the events still on their way, and only moves forward
//! (a relist swaps in a newer list whole). A pass reading it reads what a LIST would have
//! returned a moment before, and a LIST too was stale by the time the pass wrote; a change the
//! store has not seen wakes the pass again once it has. What the object of a pass says of itself
//! is never read here: each pass reads its own object fresh ([`super::pass::drive`]),
//! since its own last status write is what a lagging read would undo. Secrets are not indexed:
//! keys, activation tokens and creds are read from the apiserver as before. Each read, and why a
//! read one event behind does no harm:
//!
//! - Users of an account, for the revocation record: a user is revoked only where the store
//!   shows it with a deletionTimestamp (which never goes away) and the finalizer, or lists a key
//!   it replaced; a user missing from the store revokes nothing and removes nothing (the record
//!   keeps its entries until their signing keys go), so a lag delays a revocation by one wake,
//!   never drops one, and never revokes a user that is not being deleted. A user just created
//!   changes nothing in the account JWT (it names no users), so signing without it is right.
//! - A user's account, for its deletion: the finalizer is released only on an account status
//!   whose JWT revokes the user from its deletion time and whose distribution counts every
//!   server current. A copy the store still holds is a status an account pass wrote whole, one a
//!   pass reading the apiserver could have read a moment before; the revocation stays in every
//!   later JWT (the record keeps it) and a server never goes back to an older JWT, so what such a
//!   copy says stays true, and a copy that does not say it yet only holds the finalizer longer.
//! - Grants, for admission: the account pass and the NatsOperator's deletedAccounts read the
//!   same store, which moves forward only, so an account signed because a grant admitted it is
//!   not recorded deleted by a later operator pass unless that grant was withdrawn. A grant the
//!   store has not seen refuses for one wake (a condition, then a wake when it arrives); a
//!   withdrawal not yet seen lets one more push through, which a LIST-based pass could do as
//!   well: the deletion voids confirmations of a push after it ([`crate::deletions::Pushes`]).
//! - The `--system-connection`, for dialing it ([`super::nats::system_wire`]): a spec one event
//!   behind is dialed once more before the change reaches the store, as a GET read just before
//!   the change would have been; the next dial finds the new spec and dials again (its material
//!   changed). One the store lacks (its namespace not watched, not listed yet) is read from the
//!   apiserver. Its Secrets are read from the apiserver as before.
//! - A NatsOperator's status (deletedAccounts, its JWT, the system account JWT it signed,
//!   RevocationsUnrecovered): deletedAccounts only grows until entries expire, so an older copy
//!   holds an account's finalizer longer and never releases it early. The system account pass
//!   pushes the JWT of the copy it reads, held back by that same copy's RevocationsUnrecovered,
//!   and copies come in the order they were written, so no JWT is pushed after a newer one (a
//!   server takes no older JWT either).
//! - NatsConnections, for a deleted user's creds in use: a NatsConnection deleted is gone from
//!   the store only once it is gone from the apiserver (its finalizers done), so a lag holds the
//!   user longer, never releases it early; one created a moment before the user's deletion and
//!   not in the store yet lets it go, as a LIST sent a moment earlier would have (a LIST too
//!   raced a creation). Its deletion wakes the users held for it ([`super::wakes`]) instead of
//!   their looking again every few seconds.
//! - Accounts and users, for PublicKeyInUse, imports, activation tokens, stepdown imports and
//!   RetiringKeysInUse (a condition only): each decision is made again on the wake of the change
//!   it missed, as after a LIST that preceded the change; PublicKeyInUse refuses the newer holder
//!   of a key whichever pass sees the other first, and settles the same way.
//! - A NatsSystemAccount's revocation record, which the NatsOperator signs into the system
//!   account JWT: the store moves forward, so no pass signs from an older record than an earlier
//!   pass did; an entry not yet seen is signed on its wake.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use controller_kit::scope::Namespaces;
use futures::{Stream, StreamExt};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use nats_api::auth::{AccountKind, NatsAccount, NatsOperator, NatsSystemAccount, NatsUser};
use nats_api::nats::{NatsConnection, NatsReferenceGrant};
use tokio::sync::{broadcast, watch};

use super::change::{self, Change, Touch};
use super::error::Error;
use super::refs::{is_of_account, operator_of, operator_of_system_account};
use super::user::in_use::CredsReader;
use crate::grants::{self, Referrer, Target};

/// The changes a kind's broadcast holds for a slow receiver before it lags.
pub(crate) const CHANGES: usize = 4096;

/// A kind the index watches; a controller wakes on the kinds its passes read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Operator,
    SystemAccount,
    Account,
    User,
    Grant,
    Connection,
}

/// The stores every pass reads, and the signals of each kind.
pub(crate) struct Index {
    operators: Store<NatsOperator>,
    system_accounts: Store<NatsSystemAccount>,
    accounts: Store<NatsAccount>,
    users: Store<NatsUser>,
    grants: Store<NatsReferenceGrant>,
    connections: Store<NatsConnection>,
    signals: [Signals; 6],
}

/// What a kind's feed tells the passes besides its store.
struct Signals {
    kind: Kind,
    /// Moves on every change the store took in: a wake is a counter that moved.
    changed: Arc<watch::Sender<u64>>,
    /// Each change, saying which object it was ([`super::wakes`]).
    changes: broadcast::Sender<Change>,
    /// True once the store has had its first list. Not the store's own `wait_until_ready`: that
    /// keeps the waker of one waiter only (its Controller's runner), and a second waiter, such as
    /// a pass, takes it over, so one of them would never wake.
    listed: watch::Receiver<bool>,
}

/// The write side of the index: one feed per kind, taken once by `run`.
pub(crate) struct Feeds {
    pub operators: Feed<NatsOperator>,
    pub system_accounts: Feed<NatsSystemAccount>,
    pub accounts: Feed<NatsAccount>,
    pub users: Feed<NatsUser>,
    pub grants: Feed<NatsReferenceGrant>,
    pub connections: Feed<NatsConnection>,
}

/// The writer of one kind's store and the signals its events move.
pub(crate) struct Feed<K: Resource<DynamicType = ()> + Clone + 'static> {
    writer: Writer<K>,
    changed: Arc<watch::Sender<u64>>,
    changes: broadcast::Sender<Change>,
    listed: watch::Sender<bool>,
    /// What a change of one `K` says to the kinds that read it.
    touch: fn(&K) -> Touch,
}

/// The bounds of a kind the index watches: the kit's, as every watch of the workspace.
pub(crate) use controller_kit::watch::Watched;

fn feed<K: Watched>(kind: Kind, touch: fn(&K) -> Touch) -> (Store<K>, Feed<K>, Signals) {
    let (store, writer) = reflector::store();
    let changed = Arc::new(watch::channel(0u64).0);
    let (changes, _) = broadcast::channel(CHANGES);
    let (listed, listed_rx) = watch::channel(false);
    let signals = Signals {
        kind,
        changed: changed.clone(),
        changes: changes.clone(),
        listed: listed_rx,
    };
    let feed = Feed {
        writer,
        changed,
        changes,
        listed,
        touch,
    };
    (store, feed, signals)
}

/// An empty index and the feeds that fill it.
pub(crate) fn new() -> (Index, Feeds) {
    let (operators, operators_feed, operators_signals) = feed(Kind::Operator, Touch::plain);
    let (system_accounts, system_accounts_feed, system_accounts_signals) =
        feed(Kind::SystemAccount, change::system_account_touch);
    let (accounts, accounts_feed, accounts_signals) = feed(Kind::Account, change::account_touch);
    let (users, users_feed, users_signals) = feed(Kind::User, change::user_touch);
    let (grants, grants_feed, grants_signals) = feed(Kind::Grant, Touch::plain);
    let (connections, connections_feed, connections_signals) = feed(Kind::Connection, Touch::plain);
    let index = Index {
        operators,
        system_accounts,
        accounts,
        users,
        grants,
        connections,
        signals: [
            operators_signals,
            system_accounts_signals,
            accounts_signals,
            users_signals,
            grants_signals,
            connections_signals,
        ],
    };
    let feeds = Feeds {
        operators: operators_feed,
        system_accounts: system_accounts_feed,
        accounts: accounts_feed,
        users: users_feed,
        grants: grants_feed,
        connections: connections_feed,
    };
    (index, feeds)
}

impl Kind {
    /// The kind's name, for logs and errors.
    fn name(self) -> &'static str {
        match self {
            Kind::Operator => "NatsOperator",
            Kind::SystemAccount => "NatsSystemAccount",
            Kind::Account => "NatsAccount",
            Kind::User => "NatsUser",
            Kind::Grant => "NatsReferenceGrant",
            Kind::Connection => "NatsConnection",
        }
    }
}

impl<K: Watched> Feed<K> {
    /// The store reader this feed writes.
    pub fn store(&self) -> Store<K> {
        self.writer.as_reader()
    }

    /// The watch of every `K` in `namespaces`, each event applied to the store and then waking
    /// the controllers of the kinds that read `K` (a first list done also says the store is
    /// listed), as the stream of events. Over several namespaces it is one watch's events
    /// ([`controller_kit::scope`]): one `InitDone`, once every namespace is listed, so `listed`
    /// keeps its meaning (no pass reads a store missing a namespace), and a later relist of
    /// one namespace comes as applies and deletes, each a wake.
    fn events(
        self,
        client: kube::Client,
        namespaces: &Namespaces,
    ) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + use<K> {
        // No pass reads managedFields (each reads its own object fresh, and a question of the
        // index asks of specs and statuses): the store keeps objects without them, as the kit's
        // own watches do ([`controller_kit::watch`]). With a finalizer and a status apply, a
        // NatsUser's entries were most of what 1,000 of them cost in memory.
        let events = namespaces.watch(
            &client,
            watcher::Config::default(),
            self.writer.as_reader(),
            |o: &mut K| {
                o.meta_mut().managed_fields = None;
            },
        );
        self.apply(events)
    }

    /// `events` applied to the store, then moving the signals: the counter on every change,
    /// and on the broadcast the object each change was ([`Touched`]), or that the kind was
    /// listed again ([`Change::Relisted`]). Whether an object's digest changed is judged against
    /// the last event of the same object this feed saw.
    fn apply(
        self,
        events: impl Stream<Item = watcher::Result<watcher::Event<K>>>,
    ) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> {
        let (changed, listed, changes, touch) =
            (self.changed, self.listed, self.changes, self.touch);
        let reader = self.writer.as_reader();
        let mut digests: HashMap<ObjectRef<K>, u64> = HashMap::new();
        reflector::reflector(self.writer, events).inspect(move |event| match event {
            Ok(watcher::Event::InitDone) => {
                digests = reader
                    .state()
                    .iter()
                    .map(|o| (ObjectRef::from_obj(&**o), touch(o).digest))
                    .collect();
                listed.send_replace(true);
                changed.send_modify(|n| *n = n.wrapping_add(1));
                let _ = changes.send(Change::Relisted);
            }
            Ok(watcher::Event::Apply(o)) => {
                let t = touch(o);
                let was = digests.insert(ObjectRef::from_obj(o), t.digest);
                changed.send_modify(|n| *n = n.wrapping_add(1));
                let changed_digest = t.changed_from(was);
                let _ = changes.send(Change::Touched(Box::new(t.touched(o, changed_digest))));
            }
            Ok(watcher::Event::Delete(o)) => {
                digests.remove(&ObjectRef::from_obj(o));
                changed.send_modify(|n| *n = n.wrapping_add(1));
                let _ = changes.send(Change::Touched(Box::new(touch(o).touched(o, true))));
            }
            _ => {}
        })
    }

    /// The objects the watch applied, for `Controller::for_stream` of the kind's own controller.
    pub fn trigger(
        self,
        client: kube::Client,
        namespaces: &Namespaces,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static {
        self.events(client, namespaces).applied_objects()
    }
}

/// Drives the watch of a kind no controller here owns (the grants, the NatsConnections) for the
/// life of the process.
pub(crate) async fn follow<K: Watched>(
    feed: Feed<K>,
    client: kube::Client,
    namespaces: Namespaces,
) {
    let kind = K::kind(&()).to_string();
    feed.events(client, &namespaces)
        .default_backoff()
        .for_each(|event| {
            if let Err(e) = event {
                tracing::warn!(kind, error = %e, "watching for the index failed");
            }
            futures::future::ready(())
        })
        .await;
}

/// The objects of `store` that `keep`, in the order a LIST gives (by `namespace/name`).
fn listed<K: Watched>(store: &Store<K>, keep: impl Fn(&K) -> bool) -> Vec<Arc<K>> {
    let mut out = store.state_filter(|o| keep(o));
    out.sort_by_cached_key(|o| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any()));
    out
}

fn named<K: Watched>(store: &Store<K>, namespace: &str, name: &str) -> Option<Arc<K>> {
    store.get(&ObjectRef::new(name).within(namespace))
}

impl Index {
    /// Waits until every store has had its first list.
    pub async fn ready(&self) -> Result<(), Error> {
        for s in &self.signals {
            let mut listed = s.listed.clone();
            listed
                .wait_for(|l| *l)
                .await
                .map_err(|_| Error::IndexStopped {
                    kind: s.kind.name(),
                })?;
        }
        Ok(())
    }

    /// The kinds whose store has not had its first list yet.
    fn unready(&self) -> Vec<&'static str> {
        self.signals
            .iter()
            .filter(|s| !*s.listed.borrow())
            .map(|s| s.kind.name())
            .collect()
    }

    /// Says, every 30 s until it is, which stores are not filled yet (no pass runs before).
    pub async fn report_until_ready(&self) {
        while tokio::time::timeout(Duration::from_secs(30), self.ready())
            .await
            .is_err()
        {
            tracing::warn!(kinds = ?self.unready(), "no pass runs until the index has listed every kind");
        }
    }

    /// One item per change of `kind` the stores took in (changes close together may be one).
    pub fn wakes(&self, kind: Kind) -> impl Stream<Item = ()> + Send + 'static {
        let changed = self
            .signals
            .iter()
            .find(|s| s.kind == kind)
            .map(|s| s.changed.subscribe());
        futures::stream::unfold(changed, |rx| async move {
            let mut rx = rx?;
            rx.changed().await.ok()?;
            Some(((), Some(rx)))
        })
    }

    /// The changes of `kind`, each naming its object ([`super::wakes`]). A receiver that falls
    /// more than [`CHANGES`] behind is told it lagged, and must take it as "anything changed".
    pub fn changes(&self, kind: Kind) -> Option<broadcast::Receiver<Change>> {
        self.signals
            .iter()
            .find(|s| s.kind == kind)
            .map(|s| s.changes.subscribe())
    }

    /// NatsOperator `namespace`/`name`.
    pub fn operator(&self, namespace: &str, name: &str) -> Option<Arc<NatsOperator>> {
        named(&self.operators, namespace, name)
    }

    /// NatsSystemAccount `namespace`/`name`.
    pub fn system_account(&self, namespace: &str, name: &str) -> Option<Arc<NatsSystemAccount>> {
        named(&self.system_accounts, namespace, name)
    }

    /// NatsAccount `namespace`/`name`.
    pub fn account(&self, namespace: &str, name: &str) -> Option<Arc<NatsAccount>> {
        named(&self.accounts, namespace, name)
    }

    /// Every NatsAccount naming NatsOperator `namespace`/`name`.
    pub fn accounts_of(&self, namespace: &str, name: &str) -> Vec<Arc<NatsAccount>> {
        listed(&self.accounts, |a| {
            let (ns, n) = operator_of(a);
            ns == namespace && n == name
        })
    }

    /// Every NatsSystemAccount of NatsOperator `namespace`/`name`.
    pub fn system_accounts_of(&self, namespace: &str, name: &str) -> Vec<Arc<NatsSystemAccount>> {
        listed(&self.system_accounts, |a| {
            let (ns, n) = operator_of_system_account(a);
            ns == namespace && n == name
        })
    }

    /// The NatsOperators (`namespace/name`) under which a NatsAccount or NatsSystemAccount
    /// records the account key `public_key` in its status: where an import by publicKey points.
    pub fn operators_recording(&self, public_key: &str) -> Vec<String> {
        let records = |k: Option<&String>| k.is_some_and(|k| k == public_key);
        let mut out: Vec<String> = listed(&self.accounts, |a| {
            records(a.status.as_ref().and_then(|s| s.public_key.as_ref()))
        })
        .iter()
        .map(|a| operator_of(a))
        .chain(
            listed(&self.system_accounts, |a| {
                records(a.status.as_ref().and_then(|s| s.public_key.as_ref()))
            })
            .iter()
            .map(|a| operator_of_system_account(a)),
        )
        .map(|(ns, name)| format!("{ns}/{name}"))
        .collect();
        out.sort();
        out.dedup();
        out
    }

    /// NatsUser `namespace`/`name`.
    pub fn user(&self, namespace: &str, name: &str) -> Option<Arc<NatsUser>> {
        named(&self.users, namespace, name)
    }

    /// Every NatsUser of account `kind` `namespace`/`name`.
    pub fn users_of(&self, kind: AccountKind, namespace: &str, name: &str) -> Vec<Arc<NatsUser>> {
        listed(&self.users, |u| is_of_account(u, kind, namespace, name))
    }

    /// The NatsUsers of account `kind` `namespace`/`name` whose status holds `public_key`: what
    /// a user's key is checked against for uniqueness, found without listing the account's
    /// other users (each pass of 10,000 users of one account would copy and sort them all).
    pub fn users_holding(
        &self,
        kind: AccountKind,
        namespace: &str,
        name: &str,
        public_key: &str,
    ) -> Vec<Arc<NatsUser>> {
        listed(&self.users, |u| {
            let key = u.status.as_ref().and_then(|s| s.public_key.as_deref());
            key == Some(public_key) && is_of_account(u, kind, namespace, name)
        })
    }

    /// The NatsUsers of `namespace` that `keep`.
    pub fn users_in(
        &self,
        namespace: &str,
        keep: impl Fn(&NatsUser) -> bool,
    ) -> Vec<Arc<NatsUser>> {
        listed(&self.users, |u| {
            u.namespace().as_deref() == Some(namespace) && keep(u)
        })
    }

    /// The NatsAccounts that `keep`.
    pub fn accounts_where(&self, keep: impl Fn(&NatsAccount) -> bool) -> Vec<Arc<NatsAccount>> {
        listed(&self.accounts, keep)
    }

    /// NatsConnection `namespace`/`name`.
    pub fn connection(&self, namespace: &str, name: &str) -> Option<Arc<NatsConnection>> {
        named(&self.connections, namespace, name)
    }

    /// The NatsConnections of `namespace`, each with the creds Secret it names.
    pub fn creds_readers(&self, namespace: &str) -> Vec<CredsReader> {
        listed(&self.connections, |c| {
            c.namespace().as_deref() == Some(namespace)
        })
        .iter()
        .map(|c| CredsReader {
            namespace: namespace.to_string(),
            name: c.name_any(),
            secret: c
                .spec
                .credentials
                .as_ref()
                .map(|k| k.secret_key_ref.name.clone()),
        })
        .collect()
    }

    /// The grants of `namespace`, by name.
    pub fn grants_in(&self, namespace: &str) -> Vec<NatsReferenceGrant> {
        listed(&self.grants, |g| {
            g.namespace().as_deref() == Some(namespace)
        })
        .into_iter()
        .map(|g| (*g).clone())
        .collect()
    }

    /// Whether the grants of the target's namespace admit the reference (§7).
    pub fn admits(&self, from: Referrer<'_>, to: Target<'_>) -> bool {
        from.namespace == to.namespace
            || controller_kit::grants::admits(&self.grants_in(to.namespace), from, to)
    }

    /// Whether NatsAccount `a` is admitted to its NatsOperator by the grants of that namespace.
    pub fn account_admitted(&self, a: &NatsAccount) -> bool {
        let ns = a.namespace().unwrap_or_default();
        let (op_ns, op_name) = operator_of(a);
        ns == op_ns
            || grants::account_admission(&ns, &op_ns, &op_name, &self.grants_in(&op_ns)).is_ok()
    }
}

/// Fills `feed`'s store with a first list of `objects` (for the tests of other modules).
#[cfg(test)]
pub(crate) async fn listed_with<K: Watched>(feed: Feed<K>, objects: Vec<K>) {
    let mut events = vec![Ok(watcher::Event::Init)];
    events.extend(
        objects
            .into_iter()
            .map(|o| Ok(watcher::Event::InitApply(o))),
    );
    events.push(Ok(watcher::Event::InitDone));
    feed.apply(futures::stream::iter(events))
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// Applies `events` through `feed` (for the tests of other modules).
#[cfg(test)]
pub(crate) async fn applied<K: Watched>(feed: Feed<K>, events: Vec<watcher::Event<K>>) {
    feed.apply(futures::stream::iter(events.into_iter().map(Ok)))
        .for_each(|_| futures::future::ready(()))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;
    use nats_api::nats::NatsReferenceGrantSpec;

    /// A first list of `objects` as the watcher yields it.
    fn first_list<K: Watched>(objects: Vec<K>) -> Vec<watcher::Result<watcher::Event<K>>> {
        let mut events = vec![Ok(watcher::Event::Init)];
        events.extend(
            objects
                .into_iter()
                .map(|o| Ok(watcher::Event::InitApply(o))),
        );
        events.push(Ok(watcher::Event::InitDone));
        events
    }

    async fn drain<K: Watched>(feed: Feed<K>, events: Vec<watcher::Result<watcher::Event<K>>>) {
        feed.apply(futures::stream::iter(events))
            .for_each(|_| futures::future::ready(()))
            .await;
    }

    fn grant(ns: &str, name: &str) -> NatsReferenceGrant {
        NatsReferenceGrant {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..ObjectMeta::default()
            },
            spec: NatsReferenceGrantSpec {
                from: vec![],
                to: vec![],
            },
        }
    }

    #[tokio::test]
    async fn every_pass_waiting_for_the_index_wakes_once_each_kind_is_listed() {
        let (index, feeds) = new();
        let index = Arc::new(index);
        let waiting: Vec<_> = (0..8)
            .map(|_| {
                let index = index.clone();
                tokio::spawn(async move { index.ready().await.is_ok() })
            })
            .collect();
        tokio::task::yield_now().await;
        assert_eq!(index.unready().len(), 6, "nothing listed yet");
        drain(feeds.operators, first_list(vec![])).await;
        drain(feeds.system_accounts, first_list(vec![])).await;
        drain(feeds.accounts, first_list(vec![])).await;
        drain(feeds.users, first_list(vec![])).await;
        drain(feeds.connections, first_list(vec![])).await;
        drain(
            feeds.grants,
            first_list(vec![grant("b", "g2"), grant("b", "g1")]),
        )
        .await;
        for w in waiting {
            let woke = tokio::time::timeout(Duration::from_secs(5), w).await;
            assert!(matches!(woke, Ok(Ok(true))), "a waiter was never woken");
        }
        assert!(index.unready().is_empty());
        let names: Vec<String> = index.grants_in("b").iter().map(|g| g.name_any()).collect();
        assert_eq!(names, ["g1", "g2"], "in the order a LIST gives");
    }

    #[tokio::test]
    async fn a_feed_that_ends_before_its_first_list_stops_the_index() {
        let (index, feeds) = new();
        drop(feeds);
        let stopped = index.ready().await;
        assert!(matches!(
            stopped,
            Err(Error::IndexStopped {
                kind: "NatsOperator"
            })
        ));
    }

    #[tokio::test]
    async fn a_change_wakes_the_controllers_of_its_kind_only() {
        let (index, feeds) = new();
        let mut grants = Box::pin(index.wakes(Kind::Grant));
        let mut users = Box::pin(index.wakes(Kind::User));
        drain(feeds.grants, first_list(vec![grant("a", "g")])).await;
        let woke = tokio::time::timeout(Duration::from_secs(5), grants.next()).await;
        assert_eq!(woke.ok(), Some(Some(())));
        let idle = tokio::time::timeout(Duration::from_millis(50), users.next()).await;
        assert!(idle.is_err(), "no user changed");
    }
}
