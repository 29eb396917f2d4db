//! What a step does: the scenario language's actions, one variant each, with what each needs
//! (the host, a sim topology, a node) and the line the runner prints for it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::*;

/// What a step does. Servers are named (`c1-0`) or chosen: `stream-leader:<stream>`,
/// `stream-follower:<stream>`, `meta-leader`, `meta-follower:<cluster>`, `last-faulted`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    Kill9 {
        server: String,
    },
    Sigterm {
        server: String,
    },
    LameDuck {
        server: String,
    },
    Pause {
        server: String,
    },
    Resume {
        server: String,
    },
    Restart {
        server: String,
    },
    WipeStore {
        server: String,
    },
    /// A power loss: every server named (selectors too) is SIGKILLed at once, then every byte
    /// each wrote since its last fsync of that file is dropped. Their stores must be on the
    /// fault layer (`topology.fault_layer`). The servers stay down until a `restart`.
    LoseUnsynced {
        servers: Vec<String>,
    },
    /// Reads every message stream `stream` holds (its publisher's, by `Nats-Msg-Id`) and records
    /// as count `count` how many messages its publisher had acknowledged are not there: what
    /// a fault took from the store, whatever the consumers had already received.
    AuditStream {
        stream: String,
        count: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Reads each replica's own copy of stream `stream` (sim topologies: each server holding one
    /// is stopped, its store copied and opened by a standalone server, then restarted, one at a
    /// time) and reports per replica its messages, first and last sequence, and which
    /// acknowledged messages of its publisher it lacks or holds otherwise (`replica_reads`).
    ReadReplicas {
        stream: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Damages every file of a stopped server's store matching `file_glob` (relative to the
    /// store directory; `*` within a segment, `**` across): `kind` `bitflip` flips the low bit
    /// of the middle byte, `truncate` cuts the second half. A glob matching nothing fails.
    Corrupt {
        server: String,
        #[serde(alias = "file-glob")]
        file_glob: String,
        kind: CorruptKind,
    },
    /// Appends raw config text to the server's config and reloads it.
    Reload {
        server: String,
        append: String,
    },
    CutGateway {
        a: String,
        b: String,
    },
    RestoreGateway {
        a: String,
        b: String,
    },
    CutLeaf {
        leaf: String,
    },
    /// Cuts `server`'s routes to the peers `from` names (every peer of its cluster when empty),
    /// as a partition does: the server and its clients run on (`topology.route_proxies`).
    CutRoutes {
        server: String,
        #[serde(default)]
        from: Vec<String>,
    },
    /// Lifts what `cut_routes` of `server` (from the peers `from` names, all when empty) cut.
    RestoreRoutes {
        server: String,
        #[serde(default)]
        from: Vec<String>,
    },
    RestoreLeaf {
        leaf: String,
    },
    WaitMetaLeader {
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    WaitStreamLeader {
        stream: String,
        /// A server selector the new leader must differ from (e.g. `last-faulted` after a lame duck,
        /// which still answers for a few milliseconds as leader).
        #[serde(default)]
        other_than: Option<String>,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    WaitHealthz {
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Waits until the server's process has exited by itself: a lame duck's end, once the
    /// server closed its clients (sim topologies only).
    WaitExited {
        server: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Counts, from the servers, how many of the workload's streams each server leads and
    /// records the spread (most minus fewest) as figure `name` (see `leaders`).
    RecordLeaderSpread {
        name: String,
    },
    // Steps on the host: its kube-apiserver and the controllers running against it (a scenario
    // with any of them runs on the local backend, see `Scenario::needs_host`).
    ApplyManifest {
        path: String,
    },
    Annotate {
        object: String,
        annotation: String,
    },
    WaitCondition {
        object: String,
        condition: String,
        /// Text the condition's message must contain, if any.
        #[serde(default)]
        message: Option<String>,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    RestartController {
        controller: String,
    },
    /// Kills the replica of `controller` that holds its Lease (no release: a SIGKILL) and starts
    /// a fresh standby in its place; the controller must run as `replicas:`.
    KillLeader {
        controller: String,
    },
    /// Applies a manifest holding NatsClusters and waits until the cluster controller has
    /// every server of each running and healthy on the local server lifecycle.
    ApplyNatsCluster {
        path: String,
        #[serde(with = "crate::duration", default = "default_cluster_wait")]
        timeout: Duration,
    },
    /// Waits until the cluster controller has restarted server `server` (lame duck, then
    /// started under a new revision) since the scenario began: a step that follows a rollout.
    /// `server: any` ([`ANY_SERVER`]) waits for the first server restarted, whichever it is: the
    /// order of a rollout depends on which server leads the meta group, which is chance.
    WaitServerRestarted {
        server: String,
        #[serde(with = "crate::duration", default = "default_cluster_wait")]
        timeout: Duration,
    },
    /// Waits until `status.<field>` of the object (a number, or a list's length; a dotted path
    /// reaches deeper) meets `rule` (`">= 1"`); the value it read is the step's value.
    WaitStatus {
        object: String,
        field: String,
        rule: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Waits until every stream of the workload's account (or each of `streams`) is led in NATS
    /// cluster `cluster` with exactly its replicas, every one current: no move under way, none
    /// left half done.
    WaitStreamsSettled {
        cluster: String,
        #[serde(default)]
        streams: Vec<String>,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    // Steps through the system account (`hand_moves`).
    /// Moves every stream group of every account off NATS cluster `from` into the servers
    /// tagged `to`, one ACCOUNT.STREAM.MOVE after the other, each waited for until done (at
    /// most `timeout` each): the floor an evacuation's time is measured against.
    MoveByHand {
        from: String,
        to: Vec<String>,
        #[serde(with = "crate::duration", default = "default_cluster_wait")]
        timeout: Duration,
    },
    /// Waits until every stream group of every account, read through the system account, is
    /// led in NATS cluster `cluster` with exactly its replicas, all in it.
    WaitGroupsSettled {
        cluster: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Every publisher of `publishers` stops sending new messages now.
    StopPublishers {},
    // Steps on objects and on the clients of an auth plane (`auth_steps`).
    /// Deletes an object; done once the apiserver accepted the delete (finalizers may hold it).
    Delete {
        object: String,
    },
    /// Waits until the object no longer exists: its finalizers released.
    WaitGone {
        object: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// Replaces the object's status with `{}` through the status subresource: a lost status.
    WipeStatus {
        object: String,
    },
    /// Waits until the server closed the connection of client `client`.
    WaitDisconnected {
        client: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
    /// A fresh connection with client `client`'s creds to every server of every cluster, one by
    /// one, is refused with an authorization error; fails naming every server that admits it.
    ExpectRefused {
        client: String,
    },
    /// The JWT in the NatsAccount's `status.jwt` revokes the user of client `client` (the key
    /// and issue time of the creds read when the workload started).
    ExpectJwtRevokes {
        object: String,
        client: String,
    },
    /// Waits until server `server` no longer holds the JWT of NatsAccount `object` in its
    /// resolver directory (the account's key as recorded when the workload started).
    WaitAccountAbsent {
        object: String,
        server: String,
        #[serde(with = "crate::duration", default = "default_wait")]
        timeout: Duration,
    },
}

pub(super) fn default_cluster_wait() -> Duration {
    Duration::from_secs(180)
}

fn default_wait() -> Duration {
    Duration::from_secs(30)
}

impl Action {
    /// Whether the step needs the host (kube-apiserver and controllers).
    pub fn needs_controllers(&self) -> bool {
        matches!(
            self,
            Action::ApplyManifest { .. }
                | Action::Annotate { .. }
                | Action::WaitCondition { .. }
                | Action::RestartController { .. }
                | Action::KillLeader { .. }
                | Action::ApplyNatsCluster { .. }
                | Action::WaitServerRestarted { .. }
                | Action::WaitStatus { .. }
                | Action::Delete { .. }
                | Action::WaitGone { .. }
                | Action::WipeStatus { .. }
                | Action::ExpectJwtRevokes { .. }
                | Action::WaitAccountAbsent { .. }
        )
    }

    /// Whether the step reads the NATS system through the JetStream controller's view of it
    /// (`jetstream_controller::system_view`): the moves by hand an evacuation is measured against.
    pub fn reads_as_the_controller(&self) -> bool {
        matches!(
            self,
            Action::MoveByHand { .. } | Action::WaitGroupsSettled { .. }
        )
    }

    /// The client a step names, if any.
    pub fn client(&self) -> Option<&str> {
        match self {
            Action::WaitDisconnected { client, .. }
            | Action::ExpectRefused { client }
            | Action::ExpectJwtRevokes { client, .. } => Some(client),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Action::Kill9 { server } => format!("kill -9 {server}"),
            Action::Sigterm { server } => format!("SIGTERM {server}"),
            Action::LameDuck { server } => format!("lame duck {server}"),
            Action::Pause { server } => format!("SIGSTOP {server}"),
            Action::Resume { server } => format!("SIGCONT {server}"),
            Action::Restart { server } => format!("restart {server} on its store"),
            Action::WipeStore { server } => format!("wipe the store of {server}"),
            Action::AuditStream { stream, count, .. } => {
                format!("count acknowledged messages missing from {stream} as {count}")
            }
            Action::ReadReplicas { stream, .. } => {
                format!("read each replica's own copy of {stream}")
            }
            Action::LoseUnsynced { servers } => {
                format!(
                    "power loss of {}: unsynced writes dropped",
                    servers.join(", ")
                )
            }
            Action::Corrupt {
                server,
                file_glob,
                kind,
            } => format!("{kind:?} {file_glob} in the store of {server}").to_lowercase(),
            Action::Reload { server, .. } => format!("edit config of {server} and reload"),
            Action::CutGateway { a, b } => format!("cut gateway {a} <-> {b}"),
            Action::RestoreGateway { a, b } => format!("restore gateway {a} <-> {b}"),
            Action::CutLeaf { leaf } => format!("cut leaf link of {leaf}"),
            Action::RestoreLeaf { leaf } => format!("restore leaf link of {leaf}"),
            Action::CutRoutes { server, from } => route_steps::describe("cut", server, from),
            Action::RestoreRoutes { server, from } => {
                route_steps::describe("restore", server, from)
            }
            Action::WaitMetaLeader { .. } => "wait for a meta leader with all peers".into(),
            Action::WaitStreamLeader { stream, .. } => format!("wait for a leader of {stream}"),
            Action::WaitHealthz { .. } => "wait for healthz on every server".into(),
            Action::WaitExited { server, .. } => format!("wait until {server} exited"),
            Action::RecordLeaderSpread { name } => {
                format!("count the stream leaders per server as {name}")
            }
            Action::ApplyManifest { path } => format!("apply manifest {path}"),
            Action::Annotate { object, annotation } => format!("annotate {object} {annotation}"),
            Action::WaitCondition {
                object,
                condition,
                message,
                ..
            } => match message {
                Some(m) => format!("wait for {object} condition {condition} saying {m:?}"),
                None => format!("wait for {object} condition {condition}"),
            },
            Action::RestartController { controller } => format!("restart controller {controller}"),
            Action::KillLeader { controller } => {
                format!("kill the leading replica of controller {controller}")
            }
            Action::ApplyNatsCluster { path, .. } => format!("apply NatsCluster manifest {path}"),
            Action::WaitServerRestarted { server, .. } if server == ANY_SERVER => {
                "wait until the controller restarted a server".to_string()
            }
            Action::WaitServerRestarted { server, .. } => {
                format!("wait until the controller restarted {server}")
            }
            Action::WaitStatus {
                object,
                field,
                rule,
                ..
            } => format!("wait until {object} status.{field} {rule}"),
            Action::WaitStreamsSettled {
                cluster, streams, ..
            } if streams.is_empty() => format!("wait until every stream is settled in {cluster}"),
            Action::WaitStreamsSettled {
                cluster, streams, ..
            } => format!("wait until {} is settled in {cluster}", streams.join(", ")),
            Action::MoveByHand { from, to, .. } => format!(
                "move every stream off {from} into the servers tagged {} by hand",
                to.join(", ")
            ),
            Action::WaitGroupsSettled { cluster, .. } => {
                format!("wait until every group of every account is settled in {cluster}")
            }
            Action::StopPublishers {} => "stop the publishers".into(),
            Action::Delete { object } => format!("delete {object}"),
            Action::WaitGone { object, .. } => format!("wait until {object} is gone"),
            Action::WipeStatus { object } => format!("wipe the status of {object}"),
            Action::WaitDisconnected { client, .. } => {
                format!("wait until the server closed client {client}'s connection")
            }
            Action::ExpectRefused { client } => {
                format!("expect client {client}'s creds refused by every server")
            }
            Action::ExpectJwtRevokes { object, client } => {
                format!("expect the JWT of {object} to revoke client {client}'s user")
            }
            Action::WaitAccountAbsent { object, server, .. } => {
                format!("wait until {server} no longer holds the JWT of {object}")
            }
        }
    }
}
