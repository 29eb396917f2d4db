//! `jetstream.nats.mikluko.io`: the kinds the JetStream controller serves.
//!
//! NatsStream, NatsConsumer, NatsKeyValue and NatsObjectStore carry the NATS configuration of the
//! object they manage in camelCase beside `connectionRef` and the lifecycle policies; NatsBalancer,
//! NatsSystemBalancer and NatsClusterEvacuation move stream groups between servers.
//!
//! Every CEL transition rule on a NATS config field compares only against a value the old spec set,
//! so the controller's late initialization of omitted fields (Adopt, AdoptOrCreate) is never
//! refused; a value once set can then change only where nats-server would accept the change.

mod balancer;
mod consumer;
mod duration;
mod evacuation;
#[cfg(test)]
mod invariants;
mod key_value;
mod lifecycle;
mod object_store;
mod stream;
mod system_balancer;

pub use balancer::*;
pub use consumer::*;
pub use duration::*;
pub use evacuation::*;
pub use key_value::*;
pub(crate) use lifecycle::drop_type_description;
pub use lifecycle::*;
pub use object_store::*;
pub use stream::*;
pub use system_balancer::*;

/// The API group of the JetStream controller.
pub const GROUP: &str = "jetstream.nats.mikluko.io";

/// The field manager the JetStream controller writes spec (late initialization) and status with.
pub const FIELD_MANAGER: &str = "jetstream-controller";

/// The finalizer the JetStream controller holds a resource with while its deletion policy runs.
pub const FINALIZER: &str = "jetstream.nats.mikluko.io/finalizer";

/// The key of the ownership marker in a stream's or consumer's own metadata map; its value is the
/// UID of the owning resource.
pub const OWNER_METADATA_KEY: &str = "jetstream.nats.mikluko.io/owner";

/// The pool name status reports for streams in no pool and streams with no resource.
pub const DEFAULT_POOL: &str = "default";

/// Condition types of the JetStream kinds.
pub mod condition {
    /// The object matches its spec on the server (object kinds), or the balancer/evacuation runs.
    pub const READY: &str = "Ready";
    /// The last comparison of the server object with spec found them equal or corrected the drift.
    pub const SYNCED: &str = "Synced";
    /// The resource cannot proceed without an edit (Hold) or a later recheck (Retry).
    pub const TERMINAL: &str = "Terminal";
    /// The server object existed before the resource and was adopted.
    pub const ADOPTED: &str = "Adopted";
    /// A balancer or evacuation holds its next move; the reason says why.
    pub const HOLDING: &str = "Holding";
    /// A stream matches more than one pool of a NatsBalancer; it belongs to the first.
    pub const OVERLAPPING: &str = "Overlapping";
    /// NatsSystemBalancer: the replicas of every stream of its NATS cluster agree.
    pub const REPLICAS_CONSISTENT: &str = "ReplicasConsistent";
    /// A NatsStream being deleted: its deletion ran on the server (reason `DeletedOnServer`).
    pub const DELETING: &str = "Deleting";
}

/// Condition reasons of the JetStream kinds.
pub mod reason {
    /// The server object matches spec.
    pub const MATCHES_SPEC: &str = "MatchesSpec";
    /// The server object drifted from spec and spec was reapplied (reported once).
    pub const DRIFT_CORRECTED: &str = "DriftCorrected";
    /// Applying spec to the server failed.
    pub const SYNC_FAILED: &str = "SyncFailed";
    /// Reading the server object failed.
    pub const OBSERVE_FAILED: &str = "ObserveFailed";
    /// An object of this name exists that no resource owns, and adoptionPolicy is Never.
    pub const EXISTS_UNOWNED: &str = "ExistsUnowned";
    /// The object's ownership marker names another resource.
    pub const OWNED_BY_OTHER: &str = "OwnedByOther";
    /// nats-server refused the configuration.
    pub const REJECTED: &str = "Rejected";
    /// The stream of this name is not a key-value bucket or object store.
    pub const NOT_A_BUCKET: &str = "NotABucket";
    /// An object of this name existed without an ownership marker and was adopted.
    pub const FOUND_UNOWNED: &str = "FoundUnowned";
    /// adoptionPolicy is Adopt and no object of this name exists.
    pub const NOT_FOUND: &str = "NotFound";
    /// A placement move of the stream is in progress.
    pub const MOVING: &str = "Moving";
    /// The referenced NatsConnection or NatsStream does not exist.
    pub const REFERENCE_NOT_FOUND: &str = "ReferenceNotFound";
    /// The reference crosses namespaces and no NatsReferenceGrant admits it.
    pub const REFERENCE_NOT_PERMITTED: &str = "ReferenceNotPermitted";
    /// A balancer runs passes.
    pub const BALANCING: &str = "Balancing";
    /// The connection's NATS server is not clustered; there is nothing to balance.
    pub const NOT_CLUSTERED: &str = "NotClustered";
    /// Another NatsSystemBalancer already balances this NATS cluster.
    pub const DUPLICATE_BALANCER: &str = "DuplicateBalancer";
    /// A balancing pass failed.
    pub const PASS_FAILED: &str = "PassFailed";
    /// Holding: the NATS cluster is settled and balanced; nothing to move.
    pub const SETTLED: &str = "Settled";
    /// Holding: some group is not current; no move while unsettled.
    pub const UNSETTLED: &str = "Unsettled";
    /// Holding: the balancer's own last move has not finished.
    pub const MOVE_PENDING: &str = "MovePending";
    /// Holding: another balancer holds the NATS cluster's move lease.
    pub const MOVE_LEASE_HELD: &str = "MoveLeaseHeld";
    /// Holding: the system balancer has a move pending on the stream.
    pub const YIELDING_TO_SYSTEM_BALANCER: &str = "YieldingToSystemBalancer";
    /// A stream matches more than one pool.
    pub const OVERLAPPING: &str = "Overlapping";
    /// Evacuation: a source server does not answer, the meta group has no leader, or a server is offline.
    pub const SERVERS_DOWN: &str = "ServersDown";
    /// Evacuation: a source server carries the target tags; the evacuation refuses to start.
    pub const SOURCE_CARRIES_TARGET_TAGS: &str = "SourceCarriesTargetTags";
    /// Evacuation: resources whose spec pins them to the source remain (status.pinned).
    pub const PINNED_RESOURCES_REMAIN: &str = "PinnedResourcesRemain";
    /// Evacuation: every movable stream left the source.
    pub const EVACUATED: &str = "Evacuated";
    /// ReplicasConsistent: every stream's replicas at the same last sequence hold the same.
    pub const REPLICAS_AGREE: &str = "ReplicasAgree";
    /// ReplicasConsistent: a replica holds other messages than its peers, pass after pass.
    pub const REPLICAS_DIVERGED: &str = "ReplicasDiverged";
    /// Deleting: the stream is no longer on the server (deleted by this resource's
    /// `deletionPolicy: Delete`, or found gone); its consumers went with it.
    pub const DELETED_ON_SERVER: &str = "DeletedOnServer";
}

/// Event reasons the JetStream controller records.
pub mod event {
    /// A balancer or evacuation requested a move.
    pub const MOVE_STARTED: &str = "MoveStarted";
    /// A move finished.
    pub const MOVE_DONE: &str = "MoveDone";
    /// A pending move was cancelled (CANCEL_MOVE).
    pub const MOVE_CANCELLED: &str = "MoveCancelled";
    /// nats-server refused a move request.
    pub const MOVE_REFUSED: &str = "MoveRefused";
    /// A pending move found undone (its subject back on `from`) pass after pass was given up.
    pub const MOVE_ABANDONED: &str = "MoveAbandoned";
    /// An evacuation refused to start.
    pub const EVACUATION_REFUSED: &str = "EvacuationRefused";
    /// A stream's replicas were found diverged pass after pass (Warning).
    pub const REPLICAS_DIVERGED: &str = "ReplicasDiverged";
    /// A balancer's interval, stored below the floor before the CEL rule, paced at the floor.
    pub const INTERVAL_RAISED: &str = "IntervalRaised";
}

/// Prometheus metric names of the JetStream controller (prefix `nats_operator_`).
pub mod metric {
    /// Gauge: leader skew of a balancer pool {namespace, name, pool}.
    pub const BALANCER_LEADER_SKEW: &str = "nats_operator_balancer_leader_skew";
    /// Gauge: replica skew of a system balancer's NATS cluster {namespace, name, pool="system"}.
    pub const BALANCER_REPLICA_SKEW: &str = "nats_operator_balancer_replica_skew";
    /// Gauge: moves a balancer has pending {namespace, name, move_kind}.
    pub const BALANCER_PENDING_MOVES: &str = "nats_operator_balancer_pending_moves";
    /// Counter: pending moves given up, found undone pass after pass {namespace, name}.
    pub const BALANCER_MOVES_ABANDONED: &str = "nats_operator_balancer_moves_abandoned_total";
    /// Counter: balancing passes held {namespace, name, reason}.
    pub const BALANCER_HELD_PASSES: &str = "nats_operator_balancer_held_passes_total";
    /// Gauge: streams of a system balancer's NATS cluster whose replicas diverged {namespace, name}.
    pub const STREAMS_DIVERGED: &str = "nats_operator_streams_diverged";
    /// Gauge: streams an evacuation has still to move {namespace, name}.
    pub const EVACUATION_REMAINING: &str = "nats_operator_evacuation_remaining";
    /// Gauge: moved streams with no resource whose config still names the source {namespace, name}.
    pub const EVACUATION_STALE_PLACEMENTS: &str = "nats_operator_evacuation_stale_placements";
    /// Counter: apiserver requests made by balancer and evacuation passes {kind, verb, resource}:
    /// `kind` the pass's (NatsBalancer, NatsSystemBalancer, NatsClusterEvacuation), `verb` the
    /// request's (get, list, watch, create, update, patch, delete), `resource` the plural it
    /// names (`other` for one outside the controller's fixed set).
    pub const PASS_APISERVER_REQUESTS: &str = "nats_operator_pass_apiserver_requests_total";
    /// Counter: passes put off because their NatsConnection held its share of the request
    /// slots {kind}.
    pub const CONNECTION_SHARE_DEFERRED: &str = "nats_operator_connection_share_deferred_total";
}
