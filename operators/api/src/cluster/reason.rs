//! Condition reasons of NatsCluster, grouped by the condition that carries them.

// Ready
/// Ready=True: every server's pod is Ready.
pub const ALL_SERVERS_READY: &str = "AllServersReady";
/// Ready=True: some server is not ready but the meta group keeps its quorum.
pub const QUORUM_AVAILABLE: &str = "QuorumAvailable";
/// Ready=False: too few servers answer for the meta group to keep its quorum.
pub const QUORUM_UNAVAILABLE: &str = "QuorumUnavailable";
/// Ready=False: an object could not be written (for example one of the same name exists and is
/// not controlled by this NatsCluster); the message names every such object.
pub const RECONCILE_FAILED: &str = "ReconcileFailed";
/// Ready=False and Progressing=False: `spec.gateway` without `tls`, refused unless the cluster
/// controller runs with `--allow-gateway-without-tls`.
pub const GATEWAY_WITHOUT_TLS: &str = "GatewayWithoutTLS";

// Settled
/// Settled=True: every Raft group's members are current.
pub const ALL_GROUPS_CURRENT: &str = "AllGroupsCurrent";
/// Settled=True: no JetStream, nothing to wait for.
pub const SERVERS_SILENT: &str = "ServersSilent";
/// Settled=False: some Raft group has no leader.
pub const GROUPS_LEADERLESS: &str = "GroupsLeaderless";
/// Settled=False: some Raft group has members offline.
pub const MEMBERS_OFFLINE: &str = "MembersOffline";
/// Settled=False: some Raft group has members behind its leader.
pub const GROUPS_CATCHING_UP: &str = "GroupsCatchingUp";
/// Settled=Unknown or Deleting=True: the NATS cluster could not be observed.
pub const OBSERVATION_FAILED: &str = "ObservationFailed";

// Progressing
/// Progressing=False: every server runs the target revision.
pub const UP_TO_DATE: &str = "UpToDate";
/// Progressing=True: the servers are being created for the first time.
pub const CREATING: &str = "Creating";
/// Progressing=True: servers restart one at a time onto the target revision.
pub const ROLLING_RESTART: &str = "RollingRestart";
/// Progressing=True: the gate has held the next step for ten minutes; the message names the
/// groups that are not current.
pub const GATE_BLOCKED: &str = "GateBlocked";
/// Progressing=True: `spec.rollout.paused` holds the next step.
pub const ROLLOUT_PAUSED: &str = "RolloutPaused";
/// Progressing=True: a reload of the servers has been requested and not yet confirmed.
pub const RELOAD_PENDING: &str = "ReloadPending";
/// Progressing=True: servers beyond `spec.replicas` wait their turn for removal.
pub const SCALE_DOWN_PENDING: &str = "ScaleDownPending";
/// Progressing=True: a server beyond `spec.replicas` is being evacuated and removed.
pub const SCALING_DOWN: &str = "ScalingDown";
/// Progressing=True: a server is being replaced (volume claim template change or replace-server).
pub const REPLACING_SERVER: &str = "ReplacingServer";
/// Progressing=False: a stream's replica count exceeds the new size, or nothing can be
/// evacuated without system credentials; nothing is forced.
pub const SCALE_DOWN_BLOCKED: &str = "ScaleDownBlocked";
/// Progressing=False: a replacement cannot proceed (for example JetStream without system credentials).
pub const REPLACEMENT_BLOCKED: &str = "ReplacementBlocked";
/// Progressing=True: the gateway certificate is not issued yet, or its Secret has no `ca.crt`.
pub const GATEWAY_CERTIFICATE_NOT_READY: &str = "GatewayCertificateNotReady";
/// Progressing=False: `spec.auth.trustRef` names no NatsOperatorTrust (or no grant admits it).
pub const TRUST_NOT_FOUND: &str = "TrustNotFound";
/// Progressing=True: a Secret the spec names (`spec.auth.systemCredentials`) does not exist;
/// the message names its namespace/name, and the servers are held until it appears.
pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
/// Progressing=True: the NatsOperatorTrust has no JWTs yet.
pub const TRUST_NOT_READY: &str = "TrustNotReady";
/// Progressing=False: the NatsOperatorTrust's JWTs do not decode or do not match.
pub const TRUST_INVALID: &str = "TrustInvalid";
/// Progressing=False: a NatsAccountTrust is malformed or refused.
pub const ACCOUNT_TRUST_INVALID: &str = "AccountTrustInvalid";
/// Progressing=True: a NatsAccountTrust has no public key yet.
pub const ACCOUNT_TRUST_NOT_READY: &str = "AccountTrustNotReady";
/// Progressing=False: the spec asks for something this controller cannot render (for example
/// a leaf preloading an account without a volume and without `resolver: Cache`).
pub const UNSUPPORTED_SPEC: &str = "UnsupportedSpec";
/// Progressing=False: `auth` is being added or removed on a running NATS cluster, which cannot
/// roll one server at a time; held until every server is restarted together.
pub const AUTH_CHANGE_BLOCKED: &str = "AuthChangeBlocked";

// GatewaysConnected
/// GatewaysConnected=True: every remote of `spec.gateway.remotes` is reachable.
pub const ALL_MEMBERS_REACHABLE: &str = "AllMembersReachable";
/// GatewaysConnected=False: some remotes are unreachable; the message names them.
pub const MEMBERS_UNREACHABLE: &str = "MembersUnreachable";

// LeafnodesConnected
/// LeafnodesConnected=True: every leaf remote is held by every server.
pub const REMOTES_CONNECTED: &str = "RemotesConnected";
/// LeafnodesConnected=False: some leaf remote is not connected on some server.
pub const REMOTES_DISCONNECTED: &str = "RemotesDisconnected";
/// LeafnodesConnected=False: a leaf remote's NatsConnection is not admitted by a grant and was
/// rendered out; the message names it.
pub const REMOTE_NOT_PERMITTED: &str = "RemoteNotPermitted";
/// LeafnodesConnected=False: a leaf remote's NatsConnection does not exist.
pub const REMOTE_NOT_FOUND: &str = "RemoteNotFound";

// Deleting
/// Deleting=True: stream groups remain on the NATS cluster; the message names them.
pub const JETSTREAM_DATA_REMAINS: &str = "JetStreamDataRemains";
