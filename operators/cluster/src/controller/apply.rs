//! Phase 5, apply: the writes of a pass nothing holds, in a fixed order — the listeners'
//! certificates (the route CA and certificate the controller keeps itself), the leaf remotes'
//! projected Secret, the shared objects (Services, PodDisruptionBudget, NetworkPolicy,
//! Certificates, through the port), then every absent server created and every server on its
//! revision kept as rendered. A server on another revision is left to the step. What another
//! owner holds is left untouched and named.

use nats_api::cluster::{NatsCluster, ServerRemoval, names};

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;

use super::context::Context;
use super::error::Error;
use super::gather::Gathered;
use super::listener_certificates::{self, Listeners};
use super::observe_servers::Seen;
use super::plan_servers::{Planned, cluster_revision};
use crate::objects::Owner;
use crate::objects::leaf_remotes::{self, LeafRemoteFiles};
use crate::objects::server_side_apply::{apply_owned, failed};
use crate::plan::{Layout, leaf_ca_file, leaf_creds_file};
use crate::refusals::controlled_by;
use crate::render;
use crate::rollout::next_step::{ServerState, server_state};
use crate::server_lifecycle::{DesiredServer, ObservedServer, ServerFile, ServerLifecycle};

/// What the writes left the servers as.
pub struct Applied {
    /// The certificates each listener mounts.
    pub listeners: Listeners,
    /// Every server as this pass wants it, its revision with any restart material.
    pub desired: Vec<DesiredServer>,
    /// The servers as the port observed them once the shared objects were written.
    pub before: Vec<ObservedServer>,
    /// The servers this pass creates.
    pub creating: Vec<String>,
    /// Objects of a rendered name the NatsCluster does not control, left untouched.
    pub foreign: Vec<String>,
    /// The NATS cluster's revision as a whole, with any restart material.
    pub target: String,
}

/// Writes what `cluster`'s servers need, in order, and creates its absent servers.
pub async fn apply<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    owner: &Owner,
    gathered: &Gathered,
    seen: &Seen,
    planned: &Planned,
) -> Result<Applied, Error> {
    let (listeners, mut foreign) =
        listener_certificates::listeners(ctx, owner, &cluster.spec).await?;
    foreign.extend(leaf_remotes_secret(ctx, owner, &gathered.leaf_remotes.files).await?);
    let desired = desired_servers(cluster, planned, &listeners, &gathered.leaf_remotes.files);
    let shared = ctx
        .server_lifecycle
        .apply_shared(cluster, &planned.plans)
        .await?;
    foreign.extend(shared.foreign);
    let before = seen.servers_or_observe(ctx, cluster).await?;
    let (creating, kept) = create_absent(ctx, cluster, &desired, &before).await?;
    foreign.extend(kept);
    let revisions: Vec<String> = desired.iter().map(|d| d.revision.clone()).collect();
    Ok(Applied {
        listeners,
        target: cluster_revision(&revisions),
        desired,
        before,
        creating,
        foreign,
    })
}

/// The leaf remotes' projected Secret: the admitted remotes' files only, emptied (never deleted:
/// the chart grants no `delete` on Secrets) when none carries a file while the Secret this
/// NatsCluster controls still holds some. Returns what is in the way of it.
async fn leaf_remotes_secret<L: ServerLifecycle>(
    ctx: &Context<L>,
    owner: &Owner,
    files: &[LeafRemoteFiles],
) -> Result<Option<String>, Error> {
    let secrets: Api<Secret> = Api::namespaced(ctx.shared.client.clone(), &owner.namespace);
    let uid = owner.reference.uid.as_str();
    let carries = files
        .iter()
        .any(|f| f.credentials.is_some() || f.ca.is_some());
    let holds = if carries {
        false
    } else {
        let name = names::leaf_remotes_secret(&owner.name);
        secrets
            .get_opt(&name)
            .await
            .map_err(|e| failed("read", "Secret", &name, e))?
            .is_some_and(|s| {
                controlled_by(s.owner_references(), uid)
                    && s.data.as_ref().is_some_and(|d| !d.is_empty())
            })
    };
    match leaf_remotes::leaf_remotes_secret(owner, files, holds) {
        Some(s) => Ok(apply_owned(&secrets, "Secret", uid, &s).await?),
        None => Ok(None),
    }
}

/// Every server as this pass wants it. Without a system user to reload them, rotated
/// certificates are a restart (see certificate_reload): their digest joins each server's
/// workload revision. Read from the spec, not from whether the creds work now: an unreadable
/// creds Secret must not turn into a restart of every server.
fn desired_servers(
    cluster: &NatsCluster,
    planned: &Planned,
    listeners: &Listeners,
    leaf_files: &[LeafRemoteFiles],
) -> Vec<DesiredServer> {
    let system_user = cluster
        .spec
        .auth
        .as_ref()
        .is_some_and(|a| a.system_credentials.is_some());
    let material = crate::certificate_reload::restart_material(listeners, system_user);
    planned
        .plans
        .iter()
        .zip(planned.revisions.iter())
        .enumerate()
        .map(|(i, (plan, revision))| DesiredServer {
            ordinal: i as u32,
            plan: plan.clone(),
            config: render::render(plan),
            revision: crate::revision::with_restart_material(revision, material.as_deref()),
            files: server_files(planned.layout.as_ref(), i as u32, listeners, leaf_files),
        })
        .collect()
}

/// Creates every absent server and writes every server on its revision as rendered; a server
/// on another revision, or in flux, is left to the step, and one being replaced to its
/// removal's Recreate step. Returns the servers created and what is in the way.
async fn create_absent<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    desired: &[DesiredServer],
    before: &[ObservedServer],
) -> Result<(Vec<String>, Vec<String>), Error> {
    let removals: &[ServerRemoval] = cluster.status.as_ref().map_or(&[], |s| &s.removals);
    let mut creating = vec![];
    let mut foreign = vec![];
    for d in desired {
        let replacing = removals.iter().any(|r| r.name == d.plan.server_name);
        match server_state(d, before) {
            ServerState::Absent if replacing => continue,
            ServerState::Changed | ServerState::InFlux => continue,
            ServerState::Absent => creating.push(d.plan.server_name.clone()),
            ServerState::Current => {}
        }
        foreign.extend(ctx.server_lifecycle.apply_server(cluster, d).await?.foreign);
    }
    Ok((creating, foreign))
}

/// The files a local server reads beside its nats.conf: each listener's certificate, and the
/// leaf remotes' creds and CAs (Kubernetes mounts the same from Secrets and ignores these).
fn server_files(
    layout: &dyn Layout,
    ordinal: u32,
    listeners: &Listeners,
    leaf: &[LeafRemoteFiles],
) -> Vec<ServerFile> {
    let mut files = vec![];
    for (listener, contents) in listeners {
        let dir = layout.tls_dir(ordinal, listener);
        for (name, bytes) in contents {
            files.push(ServerFile {
                path: format!("{dir}/{name}"),
                contents: bytes.clone(),
            });
        }
    }
    let dir = layout.leaf_remotes_dir(ordinal);
    for r in leaf {
        if let Some(c) = &r.credentials {
            files.push(ServerFile {
                path: format!("{dir}/{}", leaf_creds_file(r.index)),
                contents: c.clone(),
            });
        }
        if let Some(c) = &r.ca {
            files.push(ServerFile {
                path: format!("{dir}/{}", leaf_ca_file(r.index)),
                contents: c.clone(),
            });
        }
    }
    files
}
