//! The server-lifecycle port (ARCHITECTURE.md §2): the only way the cluster controller reaches
//! its servers. The Kubernetes implementation writes ConfigMaps, StatefulSets and the cluster's
//! shared objects and reads Pods; the sim's local implementation (`sim::local`) runs
//! nats-server processes (a restart is lame duck, wait for exit, start with the new config).
//! Everything else — rollout order, the gate, reload through `$SYS`, removal, status — is the
//! same code over both.

pub mod claim_deletion;
pub mod config_projection;
pub mod kubernetes;

use std::future::Future;

use nats_api::cluster::{Endpoints, NatsCluster};

use crate::plan::Layout;
use crate::render::ServerPlan;

/// A file a server reads beside its nats.conf (TLS material, a leaf remote's creds or CA), at the
/// absolute path the [`Layout`] gave it. Kubernetes delivers these through Secret volumes and
/// ignores them here; the local implementation writes them before the server (re)loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerFile {
    pub path: String,
    pub contents: Vec<u8>,
}

/// One server as the controller wants it.
#[derive(Clone, Debug)]
pub struct DesiredServer {
    pub ordinal: u32,
    pub plan: ServerPlan,
    /// The rendered nats.conf.
    pub config: String,
    /// The server's revision (`revision::of_server`: config and workload) it is tagged with.
    pub revision: String,
    pub files: Vec<ServerFile>,
}

/// What the implementation observed of one server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedServer {
    pub ordinal: u32,
    pub server_name: String,
    /// The workload exists (a StatefulSet; a process started and not yet deleted).
    pub present: bool,
    /// The pod is Ready / the process is up and its monitoring port answers `/healthz`.
    pub ready: bool,
    /// The revision the running workload was started under (pod template annotation; process).
    pub revision: Option<String>,
    /// How many times the server was (re)started by this implementation or its pod restarted.
    pub restarts: u32,
    /// The claim its data volume was made from (Kubernetes: the StatefulSet's claim template,
    /// fixed at creation); none without one or when it cannot be told.
    pub volume: Option<crate::rollout::volume::ClaimShape>,
    /// A PVC of the name of the server's data claim while it exists, being deleted or not, and
    /// whether it is proven the claim of the server's own StatefulSet
    /// ([`crate::objects::claims`]): a replacement makes the server again only once it is gone,
    /// or the new pod would find its claim being deleted, or mount one that is not its own.
    pub claim: Option<(String, crate::rollout::removal::Claim)>,
}

/// Where a server is reached from the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerAddress {
    pub client_url: String,
    pub monitor_url: String,
}

/// What an apply found in the way: objects of a rendered name the NatsCluster does not control,
/// named `Kind/name`, which were left untouched (Ready=False, ReconcileFailed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub foreign: Vec<String>,
    /// What a delete left because it only looks like the server's (a PVC carrying its labels
    /// that is not proven its claim), `Kind/name: why`: told in an Event, never deleted.
    pub kept: Vec<String>,
}

/// Why the port could not do what it was asked, naming the object.
#[derive(Debug, thiserror::Error)]
pub enum ServerLifecycleError {
    #[error("{action} {object}: {reason}")]
    Failed {
        action: &'static str,
        object: String,
        reason: String,
    },
}

/// How the cluster controller reaches the servers of a NatsCluster.
pub trait ServerLifecycle: Send + Sync + 'static {
    /// Whether a server's readiness changing calls for a pass through a watch (Kubernetes: its
    /// pod's), so a NatsCluster with no server Ready need not be rechecked to see one come up
    /// ([`crate::pace`]). Not locally: a process coming up is seen only by looking.
    const READINESS_WATCHED: bool = false;

    /// Where the servers of this NatsCluster listen and keep their files. Stable across calls
    /// for the same cluster (the local implementation keeps the ports it allocated).
    fn layout(&self, cluster: &NatsCluster) -> Box<dyn Layout + Send + Sync>;

    /// Writes what every server shares (Kubernetes: client, headless, gateway and leafnode
    /// Services, PodDisruptionBudget, NetworkPolicy, cert-manager Certificates).
    fn apply_shared(
        &self,
        cluster: &NatsCluster,
        plans: &[ServerPlan],
    ) -> impl Future<Output = Result<Applied, ServerLifecycleError>> + Send;

    /// Writes the server's config and files only, leaving the running workload as it is: what
    /// a reload reads.
    fn write_config(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> impl Future<Output = Result<Applied, ServerLifecycleError>> + Send;

    /// How long a config written by [`write_config`](Self::write_config) may take to reach the
    /// file its server reads: what a reload waits beyond its own time (Kubernetes: the kubelet
    /// projecting the ConfigMap, [`config_projection`]). None locally: the file is written in place.
    fn config_projection(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// Writes config and files and the workload tagged with `server.revision`: starts a server
    /// that is absent, restarts one running under another revision (Kubernetes: the pod
    /// template changes; local: lame duck, wait for exit, start), leaves one on it alone.
    fn apply_server(
        &self,
        cluster: &NatsCluster,
        server: &DesiredServer,
    ) -> impl Future<Output = Result<Applied, ServerLifecycleError>> + Send;

    /// Deletes server `ordinal`'s workload and config; its storage too when `remove_storage`
    /// (Kubernetes: only a PVC proven the claim of the server's own StatefulSet,
    /// [`crate::objects::claims`], deleted before that StatefulSet, which is what proves it).
    fn delete_server(
        &self,
        cluster: &NatsCluster,
        ordinal: u32,
        remove_storage: bool,
    ) -> impl Future<Output = Result<Applied, ServerLifecycleError>> + Send;

    /// Every server of the NatsCluster the implementation knows of, ordinal order, including
    /// ones beyond `spec.replicas` still present.
    fn observe(
        &self,
        cluster: &NatsCluster,
    ) -> impl Future<Output = Result<Vec<ObservedServer>, ServerLifecycleError>> + Send;

    /// The plan server `ordinal`'s config was rendered from, as stored beside that config, when
    /// that config is of `revision`: how a controller that restarted tells which fields the
    /// next change touches (reload or restart) without having rendered the old config itself.
    fn stored_plan(
        &self,
        cluster: &NatsCluster,
        ordinal: u32,
        revision: &str,
    ) -> impl Future<Output = Option<ServerPlan>> + Send;

    /// Whether every server's workload and storage is gone (Kubernetes: no StatefulSet and no
    /// PersistentVolumeClaim carries the NatsCluster's labels), so no JetStream data is left.
    /// By default it cannot be told: `false`, and the deletion guard asks the servers.
    fn servers_gone(
        &self,
        _cluster: &NatsCluster,
    ) -> impl Future<Output = Result<bool, ServerLifecycleError>> + Send {
        async { Ok(false) }
    }

    /// How the controller dials server `ordinal` (system connection, `/varz`, `/healthz`).
    fn address(&self, cluster: &NatsCluster, ordinal: u32) -> ServerAddress;

    /// Where clients, monitoring and gateway peers reach the NATS cluster (`status.endpoints`),
    /// from the plan of its first server; by default the Kubernetes Service DNS names.
    fn endpoints(&self, cluster: &NatsCluster, plan: &ServerPlan) -> Endpoints {
        crate::objects::endpoints::endpoints(
            cluster.metadata.name.as_deref().unwrap_or_default(),
            cluster.metadata.namespace.as_deref().unwrap_or_default(),
            &cluster.spec,
            plan,
        )
    }
}
