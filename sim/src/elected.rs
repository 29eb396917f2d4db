//! A controller run as replicas under leader election, in-process: each replica a task with its
//! own [`Process`] and [`Elector`] on the host's apiserver, as each binary runs itself
//! (`controller_kit::start::run`, without the signals), so a scenario can kill the leader
//! mid-rollout and watch the standby take over.
//!
//! Killing the leader aborts its task and drops its elector without a release: a SIGKILL, the
//! node gone. Its Lease stays held until it expires, and only then may another replica lead. A
//! fresh standby is started in its place, as a Deployment recreates the pod. A replica whose
//! elector loses the Lease ends its task, as the binary exits.

use std::time::Duration;

use controller_kit::leader::{Elector, Timings};
use controller_kit::process_state::Process;
use kube::Client;
use tokio::task::JoinHandle;

use crate::control_plane::controller_factories::ControllerFactory;
use crate::local::LocalServerLifecycle;

/// Where the in-process replicas keep their Leases.
pub const LEASE_NAMESPACE: &str = "default";

/// The replicas' election timings: 6 s, 4 s, 500 ms, so a takeover after a kill comes within a
/// scenario's step and the standby's retries cost little.
pub const TIMINGS: Timings = Timings {
    lease_duration: Duration::from_secs(6),
    renew_deadline: Duration::from_secs(4),
    retry_period: Duration::from_millis(500),
};

/// One replica: its Lease identity, its process (whether it leads) and its task.
#[derive(Debug)]
pub struct Replica {
    /// Its identity in the Lease (`<controller>-<n>`).
    pub identity: String,
    process: Process,
    task: JoinHandle<()>,
}

impl Replica {
    /// Whether this replica leads now.
    pub fn leads(&self) -> bool {
        self.process.leads() && !self.task.is_finished()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every replica of one controller, and how many were ever started.
pub struct Replicas {
    controller: String,
    factory: ControllerFactory,
    client: Client,
    server_lifecycle: LocalServerLifecycle,
    replicas: Vec<Replica>,
    started: u32,
    /// The identities of the leaders killed, in order.
    pub killed: Vec<String>,
}

impl Replicas {
    /// Starts `count` replicas of `controller` (its Lease `<controller>-controller`).
    pub fn start(
        controller: &str,
        factory: ControllerFactory,
        client: Client,
        server_lifecycle: LocalServerLifecycle,
        count: u32,
    ) -> Self {
        let mut r = Replicas {
            controller: controller.to_string(),
            factory,
            client,
            server_lifecycle,
            replicas: Vec::new(),
            started: 0,
            killed: Vec::new(),
        };
        for _ in 0..count {
            r.add();
        }
        r
    }

    fn add(&mut self) {
        let identity = format!("{}-{}", self.controller, self.started);
        self.started += 1;
        let process = Process::standby();
        let mut elector = Elector::new(
            self.client.clone(),
            LEASE_NAMESPACE,
            &format!("{}-controller", self.controller),
            identity.clone(),
            TIMINGS,
            process.clone(),
        );
        let controllers = process.scope((self.factory)(
            self.client.clone(),
            self.server_lifecycle.clone(),
        ));
        let who = identity.clone();
        let task = tokio::spawn(async move {
            tokio::select! {
                () = controllers => tracing::error!(replica = %who, "every controller ended"),
                lost = elector.run() => tracing::warn!(replica = %who, reason = %lost, "the Lease is lost: the replica ends"),
            }
        });
        self.replicas.push(Replica {
            identity,
            process,
            task,
        });
    }

    /// The identity of the replica leading now, if one does.
    pub fn leader(&self) -> Option<&str> {
        self.replicas
            .iter()
            .find(|r| r.leads())
            .map(|r| r.identity.as_str())
    }

    /// How many replicas run (leading or standing by).
    pub fn running(&self) -> usize {
        self.replicas
            .iter()
            .filter(|r| !r.task.is_finished())
            .count()
    }

    /// Kills the leader (no release) and starts a fresh standby in its place; returns the
    /// killed identity, or `None` when no replica leads.
    pub fn kill_leader(&mut self) -> Option<String> {
        let i = self.replicas.iter().position(Replica::leads)?;
        let killed = self.replicas.remove(i);
        killed.task.abort();
        let identity = killed.identity.clone();
        drop(killed);
        self.killed.push(identity.clone());
        self.add();
        Some(identity)
    }
}
