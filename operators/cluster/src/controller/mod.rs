//! The cluster controller's reconciler, generic over the [`ServerLifecycle`] port: the binary
//! runs it with the Kubernetes implementation, the sim with its local one.
//!
//! One pass over a NatsCluster: gather its inputs (trust roots, preloaded accounts, leaf remotes
//! and grants, Secrets), check the refusals, plan and render every server, keep the route CA and
//! route certificate and the leaf remotes' Secret, apply the shared objects, create absent
//! servers, then let the rollout core decide the one next step ([`step::next_step`]: the gate,
//! the step order, `force-step` and `replace-server` cleared once read) and take it — a reload
//! or restart (`apply_step`) or one step of a scale-down or replacement (`removal`) — then
//! observe the servers and write status by server-side apply on the status subresource.
//! `status.rollout.gate.since` and `status.removals` carry the rollout across controller
//! restarts. Which fields changed is judged against the plan the server runs, which this
//! process remembers by revision; a revision rendered before it started restarts, saying so.
//! Deletion goes through the deletion guard ([`deletion`]).
//!
//! A refusal, an object in the way or a failing port is a condition, retried with a backoff;
//! only a failure to reach the Kubernetes API is an error. Nothing crashes the loop.

pub mod deletion;
pub mod gauges;
pub mod inputs;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_kit::backoff::Backoff;
use controller_kit::conditions::{self, Desired};
use controller_kit::events::Events;
use controller_kit::metrics::Metrics;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use nats_api::cluster::{
    ConfigAppliedBy, ConfigStatus, JetStreamLimits, JetStreamStatus, NatsCluster,
    NatsClusterStatus, RolloutStatus, ServerRemoval, ServerStatus, annotation, condition, names,
    reason,
};

use crate::conditions::Verdict;
use crate::lifecycle::{
    DesiredServer, LifecycleError, ObservedServer, ServerFile, ServerLifecycle,
};
use crate::nats::{observe, system_connection};
use crate::objects::apply::{FIELD_MANAGER, apply_owned, delete_owned};
use crate::objects::{Owner, configmap, labels, leaf_remotes, tls_secret_name};
use crate::observation::{self, Observation};
use crate::plan::{ClusterInputs, Layout, leaf_ca_file, leaf_creds_file, plan_servers};
use crate::refusals::{self, Hold, Refusal};
use crate::render::{self, ServerPlan};
use crate::rollout;
use crate::rollout::step;
use crate::route_ca::{self, RouteCa};
use rollout::observe::Targets;
use rollout::order::{Action as StepAction, StepKind};
use std::collections::BTreeSet;

/// How often a NatsCluster that is not yet Settled, or is held or progressing, is looked at again.
pub const RECHECK: Duration = Duration::from_secs(5);
/// How often a Settled NatsCluster is looked at again.
pub const RESYNC: Duration = Duration::from_secs(300);

/// Settings of a controller process.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `--allow-gateway-without-tls`: render gateways without TLS instead of refusing them.
    pub allow_gateway_without_tls: bool,
    /// `--controller-namespace`: the namespace the NetworkPolicy admits monitoring from.
    pub controller_namespace: String,
    /// `--cluster-domain`.
    pub cluster_domain: String,
    /// The wait before looking again while not Settled.
    pub recheck: Duration,
    /// The wait before looking again once Settled.
    pub resync: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            allow_gateway_without_tls: false,
            controller_namespace: "nats-system".into(),
            cluster_domain: "cluster.local".into(),
            recheck: RECHECK,
            resync: RESYNC,
        }
    }
}

/// What every pass shares.
pub struct Context<L: ServerLifecycle> {
    pub client: kube::Client,
    pub lifecycle: L,
    pub settings: Settings,
    pub metrics: Metrics,
    pub events: Events,
    pub backoff: Backoff,
    /// The plans this process rendered, by revision: what a running server's config was, so a
    /// step can tell which fields changed (reload or restart, and `restartReason`).
    pub plans: std::sync::Mutex<std::collections::HashMap<String, ServerPlan>>,
}

/// Plans remembered before the oldest are forgotten (a few revisions per server suffice).
const REMEMBERED_PLANS: usize = 4096;

impl<L: ServerLifecycle> Context<L> {
    fn remember(&self, revision: &str, plan: &ServerPlan) {
        if let Ok(mut plans) = self.plans.lock() {
            if plans.len() >= REMEMBERED_PLANS && !plans.contains_key(revision) {
                plans.clear();
            }
            plans
                .entry(revision.to_string())
                .or_insert_with(|| plan.clone());
        }
    }

    fn recall(&self, revision: &str) -> Option<ServerPlan> {
        self.plans.lock().ok()?.get(revision).cloned()
    }
}

/// A context over `lifecycle`.
pub fn context<L: ServerLifecycle>(
    client: kube::Client,
    lifecycle: L,
    settings: Settings,
    metrics: Metrics,
) -> Arc<Context<L>> {
    Arc::new(Context {
        events: Events::new(client.clone(), FIELD_MANAGER),
        client,
        lifecycle,
        settings,
        metrics,
        backoff: Backoff::default(),
        plans: Default::default(),
    })
}

/// A failure to talk to the Kubernetes API (everything else becomes a condition).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{object}: Kubernetes API: {source}")]
    Kube {
        object: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// The metric label of the error.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
        }
    }
}

fn describe(cluster: &NatsCluster) -> String {
    format!(
        "NatsCluster {}/{}",
        cluster.namespace().unwrap_or_default(),
        cluster.name_any()
    )
}

/// What one pass decided, written as status.
#[derive(Clone, Debug)]
struct Outcome {
    ready: Verdict,
    settled: Verdict,
    progressing: Verdict,
    gateways: Option<(Vec<nats_api::cluster::GatewayStatus>, Verdict)>,
    leafnodes: Option<(Vec<nats_api::cluster::LeafRemoteStatus>, Verdict)>,
    observed: Vec<ObservedServer>,
    observation: Observation,
    endpoints: Option<nats_api::cluster::Endpoints>,
    revision: Option<String>,
    rollout: Option<RolloutStatus>,
    jetstream: Option<JetStreamStatus>,
    /// The port or the objects failed (Ready=False ReconcileFailed): looked at again after a
    /// backoff that grows per consecutive failure, not at the recheck pace.
    failed: bool,
    /// How this pass applied a new revision and why, if it stepped a server.
    applied: Option<ConfigStatus>,
    /// `status.removals`, when this pass stepped the servers.
    removals: Option<Vec<ServerRemoval>>,
}

/// Progressing for a hold: True while the controller waits, False when it refuses.
fn held(r: &Refusal) -> Verdict {
    Verdict::new(r.hold == Hold::Waiting, r.reason, r.message.clone())
}

/// A NatsCluster's revision as a whole: the servers' revisions in ordinal order, hashed.
pub fn cluster_revision(revisions: &[String]) -> String {
    configmap::revision(&revisions.join(","))
}

/// The files a local server reads beside its nats.conf: each listener's certificate, and the
/// leaf remotes' creds and CAs (Kubernetes mounts the same from Secrets and ignores these).
fn server_files(
    layout: &dyn Layout,
    ordinal: u32,
    listeners: &BTreeMap<&'static str, BTreeMap<String, Vec<u8>>>,
    leaf: &[leaf_remotes::LeafRemoteFiles],
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

/// Keeps the self-signed route CA (`<name>-routes-ca`) and the route certificate issued under it,
/// reissued under the same key once a third of its validity remains. Returns the certificate's
/// files, or the name of a Secret in the way.
async fn route_certificate<L: ServerLifecycle>(
    ctx: &Context<L>,
    owner: &Owner,
) -> Result<Result<BTreeMap<String, Vec<u8>>, String>, Error> {
    let ns = &owner.namespace;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let uid = owner.reference.uid.as_str();
    let ca_name = names::routes_ca_secret(&owner.name);
    let ca_secret = inputs::secret(&ctx.client, ns, &ca_name).await?;
    if let Some(s) = &ca_secret
        && !refusals::controlled_by(s.owner_references(), uid)
    {
        return Ok(Err(format!("Secret/{ca_name}")));
    }
    let now = time::OffsetDateTime::now_utc();
    let kube_err = |object: String| move |source| Error::Kube { object, source };
    let ca = match ca_secret
        .as_ref()
        .and_then(|s| RouteCa::from_secret(&owner.name, s).ok())
    {
        Some(ca) => ca,
        None => {
            let ca = match RouteCa::generate(&owner.name, now) {
                Ok(ca) => ca,
                Err(e) => return Ok(Err(format!("route CA: {e}"))),
            };
            api.patch(
                &ca_name,
                &kube::api::PatchParams::apply(FIELD_MANAGER).force(),
                &kube::api::Patch::Apply(&ca.secret(owner)),
            )
            .await
            .map_err(kube_err(format!("Secret {ns}/{ca_name}")))?;
            ca
        }
    };
    let tls_name = route_ca::routes_tls_secret(&owner.name);
    let current = inputs::secret(&ctx.client, ns, &tls_name).await?;
    if let Some(s) = &current {
        if !refusals::controlled_by(s.owner_references(), uid) {
            return Ok(Err(format!("Secret/{tls_name}")));
        }
        let same_ca = inputs::secret_key(s, route_ca::CA_CERT_KEY)
            .is_some_and(|c| c == ca.cert_pem.as_bytes());
        if same_ca && !route_ca::secret_needs_reissue(s, now) {
            return Ok(Ok(inputs::tls_files(s)));
        }
    }
    let dns = route_ca::route_dns_names(&owner.name, ns, &ctx.settings.cluster_domain);
    let ips = [std::net::IpAddr::from([127, 0, 0, 1])];
    let issued = match ca.issue(&dns, &ips, now) {
        Ok(c) => c,
        Err(e) => return Ok(Err(format!("route certificate: {e}"))),
    };
    let secret = issued.secret(owner);
    api.patch(
        &tls_name,
        &kube::api::PatchParams::apply(FIELD_MANAGER).force(),
        &kube::api::Patch::Apply(&secret),
    )
    .await
    .map_err(kube_err(format!("Secret {ns}/{tls_name}")))?;
    Ok(Ok(inputs::tls_files(&secret)))
}

/// One pass over `cluster`.
async fn pass<L: ServerLifecycle>(
    cluster: &NatsCluster,
    ctx: &Context<L>,
) -> Result<Outcome, Error> {
    let spec = &cluster.spec;
    let name = cluster.name_any();
    let ns = cluster.namespace().unwrap_or_default();
    let replicas = spec.replicas.max(0) as u32;
    let expected: Vec<String> = (0..replicas).map(|i| names::server(&name, i)).collect();
    let mut foreign: Vec<String> = vec![];
    let mut failure: Option<String> = None;

    let owner = Owner::of(cluster).map_err(|e| e.to_string());
    let refused_gateway =
        refusals::gateway_without_tls(spec, ctx.settings.allow_gateway_without_tls);
    let gathered = inputs::gather(&ctx.client, cluster).await?;
    let mut holds = gathered.holds.clone();
    if let Some(gw_tls) = spec.gateway.as_ref().and_then(|g| g.tls.as_ref()) {
        let secret_name = tls_secret_name(&name, "gateway", Some(gw_tls));
        let s = inputs::secret(&ctx.client, &ns, &secret_name).await?;
        let keys = inputs::keys_of(s.as_ref());
        let keys_ref: Option<Vec<&str>> = keys
            .as_ref()
            .map(|k| k.iter().map(String::as_str).collect());
        if let Some(r) = refusals::gateway_certificate(spec, &secret_name, keys_ref.as_deref()) {
            holds.push(r);
        }
    }

    // The servers' own answers, from those the port reports Ready before this pass writes
    // anything: they say how the servers run (auth plane or not) and how they are.
    let observed_before = ctx.lifecycle.observe(cluster).await.unwrap_or_default();
    let ready_servers: Vec<(String, crate::lifecycle::ServerAddress)> = observed_before
        .iter()
        // Servers beyond replicas too: until removed they are members, and one may be the meta
        // leader, the only reliable judge of the meta group's currency.
        .filter(|o| o.ready)
        .map(|o| {
            (
                o.server_name.clone(),
                ctx.lifecycle.address(cluster, o.ordinal),
            )
        })
        .collect();
    let asks = observe::Asks {
        jetstream: spec.jetstream.is_some(),
        gateways: spec.gateway.is_some(),
        leafnodes: !spec.leaf_remotes.is_empty(),
    };
    let access = system_access(ctx, cluster).await?;
    let observation = if ready_servers.is_empty() {
        Observation {
            failure: Some("no server is Ready".into()),
            ..Default::default()
        }
    } else {
        match &access {
            Some(access) => observe::over_system(&name, &ready_servers, asks, access).await,
            None => observe::over_monitor(&ready_servers, asks).await,
        }
    };
    let mut settled = crate::conditions::settled::settled(&expected, asks.jetstream, &observation);
    // Adding or removing auth holds, unless restart-all says to restart every server at once.
    let restart_all = cluster.annotations().contains_key(annotation::RESTART_ALL);
    let carried_auth_change =
        match refusals::auth_change(spec, observation::running_with_auth(&observation)) {
            Some(r) if restart_all => Some(r),
            Some(r) => {
                holds.push(r);
                None
            }
            None => None,
        };

    let layout = ctx.lifecycle.layout(cluster);
    let plans = plan_servers(
        &ClusterInputs {
            name: &name,
            spec,
            trust: gathered.trust.clone(),
            account_preloads: gathered.account_preloads.clone(),
            leaf_remotes: gathered.leaf_remotes.clone(),
        },
        layout.as_ref(),
    );
    let plans: Vec<ServerPlan> = match plans {
        Ok(p) => p,
        Err(e) => {
            holds.push(Refusal {
                reason: reason::UNSUPPORTED_SPEC,
                message: e.to_string(),
                hold: Hold::Refused,
            });
            vec![]
        }
    };
    let revisions: Vec<String> = plans
        .iter()
        .map(|p| crate::revision::of_server(spec, &render::render(p)))
        .collect();
    let mut target = (!revisions.is_empty()).then(|| cluster_revision(&revisions));

    let mut progressing: Option<Verdict> = None;
    let mut rollout: Option<RolloutStatus> = None;
    let mut applied: Option<ConfigStatus> = None;
    let mut removals: Option<Vec<ServerRemoval>> = None;
    let observed: Vec<ObservedServer>;

    let blocked = refused_gateway.clone().or_else(|| holds.first().cloned());
    match (&owner, blocked) {
        (Err(e), _) => {
            failure = Some(e.clone());
            observed = vec![];
        }
        (Ok(_), Some(r)) => {
            progressing = Some(held(&r));
            observed = ctx.lifecycle.observe(cluster).await.unwrap_or_else(|e| {
                failure = Some(e.to_string());
                vec![]
            });
        }
        (Ok(owner), None) => {
            let done = apply_servers(
                ctx,
                cluster,
                owner,
                &gathered,
                &plans,
                layout.as_ref(),
                &Seen {
                    revisions: &revisions,
                    observation: &observation,
                    settled: &settled,
                    system: access.as_ref(),
                    ready: &ready_servers,
                    auth_change: carried_auth_change.clone(),
                    restart_all,
                },
            )
            .await?;
            match done {
                Ok(done) => {
                    // The servers' revisions as applied (with any restart material).
                    target = Some(done.target);
                    foreign.extend(done.foreign);
                    progressing = done.progressing;
                    rollout = done.rollout;
                    observed = done.observed;
                    applied = done.config;
                    removals = Some(done.removals);
                    settled = crate::conditions::settled::settled_after_restarts(
                        settled,
                        &done.restarted,
                    );
                }
                Err(e) => {
                    failure = Some(e.to_string());
                    observed = ctx.lifecycle.observe(cluster).await.unwrap_or_default();
                }
            }
        }
    }

    let ready = match (&refused_gateway, &failure) {
        (Some(r), _) => Verdict::new(false, r.reason, r.message.clone()),
        (None, Some(f)) => Verdict::new(false, reason::RECONCILE_FAILED, f.clone()),
        (None, None) => crate::conditions::ready::ready(replicas, &observed, &foreign),
    };
    let progressing = progressing.unwrap_or_else(|| match &refused_gateway {
        Some(r) => held(r),
        None => Verdict::new(
            false,
            reason::UP_TO_DATE,
            format!(
                "every server runs revision {}",
                target.clone().unwrap_or_default()
            ),
        ),
    });
    let gateways = spec.gateway.as_ref().map(|g| {
        let remotes: Vec<String> = g
            .remotes
            .iter()
            .filter(|r| r.name != name)
            .map(|r| r.name.clone())
            .collect();
        crate::conditions::gateways::gateways(&remotes, &observation)
    });
    let leafnodes = (!spec.leaf_remotes.is_empty())
        .then(|| crate::conditions::leafnodes::leafnodes(&gathered.leaf_views, &observation));
    let endpoints = plans.first().map(|p| ctx.lifecycle.endpoints(cluster, p));
    let jetstream = spec.jetstream.as_ref().map(|_| JetStreamStatus {
        meta_leader: observation::meta_leader(&observation),
        limits: plans
            .first()
            .and_then(|p| p.jetstream.as_ref())
            .map(|j| JetStreamLimits {
                max_memory_store: j.max_memory_store.map(|b| {
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                        crate::quantity::of_bytes(b),
                    )
                }),
                max_file_store: j.max_file_store.map(|b| {
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                        crate::quantity::of_bytes(b),
                    )
                }),
            }),
    });
    Ok(Outcome {
        ready,
        settled,
        progressing,
        gateways,
        leafnodes,
        observed,
        observation,
        endpoints,
        revision: target,
        rollout,
        jetstream,
        failed: failure.is_some(),
        applied,
        removals,
    })
}

/// The system user the controller asks the servers with, when `auth.systemCredentials` names one.
async fn system_access<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
) -> Result<Option<system_connection::SystemAccess>, Error> {
    let ns = cluster.namespace().unwrap_or_default();
    let Some(creds) = cluster
        .spec
        .auth
        .as_ref()
        .and_then(|a| a.system_credentials.as_ref())
    else {
        return Ok(None);
    };
    let key = creds
        .secret_key_ref
        .key
        .as_deref()
        .unwrap_or(nats_api::common::DEFAULT_CREDS_KEY);
    let Some(text) = inputs::secret(&ctx.client, &ns, &creds.secret_key_ref.name)
        .await?
        .and_then(|s| inputs::secret_key(&s, key))
        .and_then(|b| String::from_utf8(b).ok())
    else {
        return Ok(None);
    };
    let ca_pem = match &cluster.spec.tls {
        Some(tls) => inputs::secret(
            &ctx.client,
            &ns,
            &tls_secret_name(&cluster.name_any(), "client", Some(tls)),
        )
        .await?
        .and_then(|s| inputs::secret_key(&s, "ca.crt")),
        None => None,
    };
    Ok(Some(system_connection::SystemAccess {
        creds: text,
        ca_pem,
    }))
}

/// What this pass saw of the servers before writing anything.
struct Seen<'a> {
    /// Each server's rendered revision, ordinal order.
    revisions: &'a [String],
    observation: &'a Observation,
    settled: &'a Verdict,
    system: Option<&'a system_connection::SystemAccess>,
    /// The Ready servers within replicas and where they are reached.
    ready: &'a [(String, crate::lifecycle::ServerAddress)],
    /// An auth change `restart-all` is to carry (without the annotation it is held before this).
    auth_change: Option<Refusal>,
    /// The `restart-all` annotation is set.
    restart_all: bool,
}

/// What applying the servers came to.
struct AppliedServers {
    foreign: Vec<String>,
    /// `status.removals` after this pass.
    removals: Vec<ServerRemoval>,
    config: Option<ConfigStatus>,
    progressing: Option<Verdict>,
    rollout: Option<RolloutStatus>,
    observed: Vec<ObservedServer>,
    /// The NATS cluster's revision as a whole.
    target: String,
    /// Servers this pass restarted (a restart step, or every one under restart-all).
    restarted: Vec<String>,
}

/// Writes the controller's own Secrets and the shared objects, creates absent servers and steps
/// changed ones.
async fn apply_servers<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    owner: &Owner,
    gathered: &inputs::Inputs,
    plans: &[ServerPlan],
    layout: &(dyn Layout + Send + Sync),
    seen: &Seen<'_>,
) -> Result<Result<AppliedServers, LifecycleError>, Error> {
    let spec = &cluster.spec;
    let name = &owner.name;
    let ns = &owner.namespace;
    let uid = owner.reference.uid.as_str();
    let mut foreign = vec![];

    // The certificates each listener mounts.
    let mut listeners: BTreeMap<&'static str, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    let self_signed_routes = crate::objects::cluster::controller_secret_names(owner, spec, false)
        .contains(&names::routes_ca_secret(name));
    if self_signed_routes {
        match route_certificate(ctx, owner).await? {
            Ok(files) => {
                listeners.insert("routes", files);
            }
            Err(f) => foreign.push(f),
        }
    } else if spec.route_tls_enabled() {
        let tls = spec.routes.as_ref().and_then(|r| r.tls.as_ref());
        let secret_name = match tls.and_then(|t| t.secret_ref.as_ref()) {
            Some(s) => s.name.clone(),
            None => route_ca::routes_tls_secret(name),
        };
        if let Some(s) = inputs::secret(&ctx.client, ns, &secret_name).await? {
            listeners.insert("routes", inputs::tls_files(&s));
        }
    }
    let named_listeners = [
        ("client", spec.tls.as_ref()),
        (
            "gateway",
            spec.gateway.as_ref().and_then(|g| g.tls.as_ref()),
        ),
        (
            "leafnodes",
            spec.leafnodes.as_ref().and_then(|l| l.tls.as_ref()),
        ),
    ];
    for (listener, tls) in named_listeners {
        if let Some(tls) = tls
            && let Some(s) =
                inputs::secret(&ctx.client, ns, &tls_secret_name(name, listener, Some(tls))).await?
        {
            listeners.insert(listener, inputs::tls_files(&s));
        }
    }

    // The leaf remotes' projected Secret: the admitted remotes' files only.
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    match leaf_remotes::leaf_remotes_secret(owner, &gathered.leaf_files) {
        Some(s) => match apply_owned(&secrets, "Secret", uid, &s).await {
            Ok(f) => foreign.extend(f),
            Err(e) => return Ok(Err(e)),
        },
        None => {
            if let Err(e) =
                delete_owned(&secrets, "Secret", uid, &names::leaf_remotes_secret(name)).await
            {
                return Ok(Err(e));
            }
        }
    }

    // Without a system user to reload them, rotated certificates are a restart (see
    // certificate_reload): their digest joins each server's workload revision. Read from the
    // spec, not from whether the creds work now: an unreadable creds Secret must not turn
    // into a restart of every server.
    let system_user = spec
        .auth
        .as_ref()
        .is_some_and(|a| a.system_credentials.is_some());
    let material = crate::certificate_reload::restart_material(&listeners, system_user);
    let revisions: Vec<String> = seen
        .revisions
        .iter()
        .map(|r| crate::revision::with_restart_material(r, material.as_deref()))
        .collect();
    let desired: Vec<DesiredServer> = plans
        .iter()
        .zip(revisions.iter())
        .enumerate()
        .map(|(i, (plan, revision))| DesiredServer {
            ordinal: i as u32,
            plan: plan.clone(),
            config: render::render(plan),
            revision: revision.clone(),
            files: server_files(layout, i as u32, &listeners, &gathered.leaf_files),
        })
        .collect();

    let shared = match ctx.lifecycle.apply_shared(cluster, plans).await {
        Ok(a) => a,
        Err(e) => return Ok(Err(e)),
    };
    foreign.extend(shared.foreign);
    let before = match ctx.lifecycle.observe(cluster).await {
        Ok(o) => o,
        Err(e) => return Ok(Err(e)),
    };
    let now = conditions::now();
    let prev_removals: Vec<ServerRemoval> = cluster
        .status
        .as_ref()
        .map(|s| s.removals.clone())
        .unwrap_or_default();
    let mut creating = vec![];
    let mut changed = vec![];
    for d in &desired {
        // A server being replaced is created again by its removal's Recreate step.
        let replacing = prev_removals.iter().any(|r| r.name == d.plan.server_name);
        match step::server_state(d, &before) {
            step::ServerState::Absent if replacing => continue,
            step::ServerState::Changed => {
                changed.push(d.ordinal);
                continue;
            }
            step::ServerState::InFlux => continue,
            step::ServerState::Absent => creating.push(d.plan.server_name.clone()),
            step::ServerState::Current => {}
        }
        // Absent: created; present on its revision: kept as rendered.
        match ctx.lifecycle.apply_server(cluster, d).await {
            Ok(a) => foreign.extend(a.foreign),
            Err(e) => return Ok(Err(e)),
        }
    }
    let replicas = desired.len() as u32;
    let targets: Targets = desired
        .iter()
        .map(|d| (d.ordinal, d.revision.clone()))
        .collect();
    let reported = step::reported_revisions(&desired, seen.observation);
    let answered: BTreeSet<String> = seen.observation.answers.keys().cloned().collect();
    let meta = rollout::observe::meta_observation(spec.jetstream.is_some(), seen.observation);
    let settled = step::settled_view(seen.settled);
    let force_step = cluster
        .annotations()
        .get(annotation::FORCE_STEP)
        .map(String::as_str);
    // replace-server: recorded in status.removals (which carries it across controller
    // restarts) and cleared once read, a name that is no server of this cluster too.
    let members_now = rollout::observe::members(&step::running(&before, &reported), &targets);
    let read = rollout::order::read_replace_server(
        cluster
            .annotations()
            .get(annotation::REPLACE_SERVER)
            .map(String::as_str),
        replicas,
        &members_now,
        &prev_removals,
        &now,
    );
    let mut removals = prev_removals.clone();
    removals.extend(read.record);
    if read.clear {
        clear_annotation(ctx, cluster, annotation::REPLACE_SERVER).await?;
    }
    if let Some(unknown) = &read.unknown {
        ctx.events
            .publish(
                cluster,
                true,
                "ReplaceServerUnknown",
                format!("replace-server names {unknown}, no server of this NatsCluster"),
            )
            .await;
    }
    let volume_mismatch =
        rollout::volume::mismatches(rollout::volume::desired_shape(spec).as_ref(), &before);
    let replace = rollout::order::replacements(replicas, &members_now, &removals, &volume_mismatch);
    let (gate, decision) = step::next_step(&step::StepInput {
        replicas,
        observed: &before,
        targets: &targets,
        reported: &reported,
        answered: &answered,
        meta: &meta,
        settled: &settled,
        paused: spec.rollout_paused(),
        force_step,
        // Without restart-all, adding or removing auth was held before any step.
        auth_change: seen.auth_change.clone(),
        restart_all: seen.restart_all,
        replace: &replace,
        removals: &removals,
    });
    if decision.clear_force_step {
        clear_annotation(ctx, cluster, annotation::FORCE_STEP).await?;
    }
    if decision.clear_restart_all {
        clear_annotation(ctx, cluster, annotation::RESTART_ALL).await?;
    }
    let running = step::running(&before, &reported);
    let mut config = None;
    let mut restarted = vec![];
    if let StepAction::Take(s) | StepAction::Forced(s) = &decision.action
        && s.kind == StepKind::Restart
        && let Some(d) = desired.iter().find(|d| d.ordinal == s.ordinal)
    {
        let old = running
            .iter()
            .find(|o| o.ordinal == s.ordinal)
            .and_then(|o| o.revision.clone());
        let (how, result) = apply_step(ctx, cluster, d, old.as_deref(), seen).await;
        if let Err(e) = result {
            return Ok(Err(e));
        }
        if how.applied_by == Some(ConfigAppliedBy::Restart) {
            restarted.push(d.plan.server_name.clone());
        }
        config = Some(how);
    }
    if let StepAction::RestartAll(steps) = &decision.action {
        let why = seen
            .auth_change
            .as_ref()
            .map(|r| r.message.clone())
            .unwrap_or_default();
        let all: Vec<&DesiredServer> = steps
            .iter()
            .filter_map(|s| desired.iter().find(|d| d.ordinal == s.ordinal))
            .collect();
        match restart_all(ctx, cluster, &all, &why).await {
            (how, Ok(())) => config = how,
            (_, Err(e)) => return Ok(Err(e)),
        }
        restarted.extend(all.iter().map(|d| d.plan.server_name.clone()));
    }
    let mut removal_step = None;
    if let StepAction::Take(s) | StepAction::ContinueRemoval(s) = &decision.action
        && let Some(kind) = s.kind.removal()
    {
        let (taken, left) = removal(
            ctx, cluster, s, kind, &removals, &desired, &before, &meta, seen,
        )
        .await;
        foreign.extend(left);
        let previous = removals.iter().find(|r| r.name == s.server).cloned();
        if !matches!(taken, rollout::removal::RemovalStep::Failed { .. }) {
            removals.retain(|r| r.name != s.server);
            if let Some(entry) =
                rollout::status::removal_entry(&s.server, &taken, kind, previous.as_ref(), &now)
            {
                removals.push(entry);
            }
        }
        removal_step = Some(taken);
    }
    let certificates = match seen.system {
        Some(access) => {
            reload_for_certificates(
                ctx, cluster, &desired, &decision, &reported, &listeners, access, seen,
            )
            .await
        }
        None => None,
    };
    for d in &desired {
        ctx.remember(&d.revision, &d.plan);
    }
    let observed = match ctx.lifecycle.observe(cluster).await {
        Ok(o) => o,
        Err(e) => return Ok(Err(e)),
    };
    foreign.sort();
    foreign.dedup();

    let previous_gate = cluster
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.gate.as_ref());
    let gate_st = if decision.pending.is_empty() {
        None
    } else {
        rollout::gate::gate_status(&gate, previous_gate, &now)
    };
    let servers = rollout::observe::gate_servers(
        &step::running(&before, &reported),
        &targets,
        &reported,
        &answered,
    );
    let target = cluster_revision(&revisions);
    let progressing = if !creating.is_empty() {
        Some(Verdict::new(
            true,
            reason::CREATING,
            format!("creating {}", creating.join(", ")),
        ))
    } else if decision.action == StepAction::UpToDate {
        certificates.map(|p| Verdict::new(p.status, p.reason, p.message))
    } else {
        let p = rollout::status::progressing(
            &target,
            &decision,
            removal_step.as_ref(),
            gate_st.as_ref(),
            &now,
        );
        Some(Verdict::new(p.status, p.reason, p.message))
    };
    if !foreign.is_empty() {
        ctx.events
            .publish(
                cluster,
                true,
                reason::RECONCILE_FAILED,
                format!(
                    "not controlled by this NatsCluster, left untouched: {}",
                    foreign.join(", ")
                ),
            )
            .await;
    }
    let rollout = rollout::status::rollout_status(&target, &servers, &decision, gate_st).or(Some(
        RolloutStatus {
            target_revision: Some(target.clone()),
            updated: servers.iter().map(|s| s.name.clone()).collect(),
            ..Default::default()
        },
    ));
    Ok(Ok(AppliedServers {
        removals,
        config,
        foreign,
        progressing,
        rollout,
        observed,
        target,
        restarted,
    }))
}

/// Takes one restart step on `d`: a reload where every changed field reloads and a system user
/// can ask for it (confirmed by the `/varz` digest), a restart otherwise or when the reload
/// fails. Returns how it was applied and why, for `status.config`.
///
/// The plan the server runs comes from the plans this controller process rendered (by
/// revision); one it never rendered (a revision from before it started) counts as a restart
/// with that reason, since nothing says which fields changed.
async fn apply_step<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    d: &DesiredServer,
    old: Option<&str>,
    seen: &Seen<'_>,
) -> (ConfigStatus, Result<(), LifecycleError>) {
    // This process's memory first, else what the lifecycle stored beside the running config
    // (a controller that restarted mid-rollout still reloads what reloads).
    let old_plan = match old {
        Some(r) => match ctx.recall(r) {
            Some(p) => Some(p),
            None => ctx.lifecycle.stored_plan(cluster, d.ordinal, r).await,
        },
        None => None,
    };
    let mode = old_plan
        .as_ref()
        .map(|p| crate::apply_mode::apply_mode(p, &d.plan, &cluster.spec.version));
    let workload_changed = !old.is_some_and(|o| crate::revision::same_workload(o, &d.revision));
    let route = match &mode {
        Some(m) => crate::reload::route(m, seen.system.is_some(), workload_changed),
        None => crate::reload::Route::Restart {
            reason: format!(
                "the config {} runs (revision {}) was rendered before this controller started; \
                 its changed fields are unknown",
                d.plan.server_name,
                old.unwrap_or("unknown")
            ),
        },
    };
    let mut reload_failed: Option<String> = None;
    if route == crate::reload::Route::Reload
        && let Some(access) = seen.system
    {
        match reload(ctx, cluster, d, access, seen).await {
            Ok(()) => {
                ctx.events
                    .publish(
                        cluster,
                        false,
                        "RolloutStep",
                        format!(
                            "reloaded {} onto revision {}",
                            d.plan.server_name, d.revision
                        ),
                    )
                    .await;
                let how = rollout::status::config_status(
                    &d.revision,
                    mode.as_ref()
                        .unwrap_or(&crate::apply_mode::ApplyMode::Unchanged),
                    None,
                    None,
                );
                return (how, Ok(()));
            }
            Err(why) => {
                tracing::warn!(server = %d.plan.server_name, reason = %why, "reload failed; restarting");
                reload_failed = Some(why);
            }
        }
    }
    let result = ctx.lifecycle.apply_server(cluster, d).await.map(|_| ());
    ctx.events
        .publish(
            cluster,
            false,
            "RolloutStep",
            format!(
                "restarting {} for revision {}",
                d.plan.server_name, d.revision
            ),
        )
        .await;
    let restarted = |reason: String| ConfigStatus {
        revision: Some(d.revision.clone()),
        applied_by: Some(ConfigAppliedBy::Restart),
        restart_reason: Some(reason),
    };
    let how = match (&route, &mode) {
        (crate::reload::Route::Restart { reason }, _) => restarted(reason.clone()),
        (crate::reload::Route::Reload, Some(m)) => {
            rollout::status::config_status(&d.revision, m, reload_failed.as_deref(), None)
        }
        _ => restarted(format!(
            "the rendered config of {} changed outside the fields compared for reload",
            d.plan.server_name
        )),
    };
    (how, result)
}

/// Rotated certificates, with a system user: every server running its target revision, and not
/// stepped in this pass, whose listeners serve another certificate than their Secrets hold is
/// asked to reload (confirmed by the NotAfter it reports). Returns Progressing=True
/// ReloadPending naming the servers not yet serving the new certificates, if any.
#[allow(clippy::too_many_arguments)]
async fn reload_for_certificates<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    desired: &[DesiredServer],
    decision: &rollout::order::Decision,
    reported: &BTreeMap<String, String>,
    listeners: &BTreeMap<&'static str, BTreeMap<String, Vec<u8>>>,
    access: &system_connection::SystemAccess,
    seen: &Seen<'_>,
) -> Option<rollout::status::Progress> {
    use crate::certificate_reload as certs;
    let (want, unreadable) = certs::desired(listeners);
    if !unreadable.is_empty() {
        tracing::warn!(certificates = ?unreadable, "certificates not read; no server is judged by them");
    }
    let stepped: BTreeSet<&str> = match &decision.action {
        StepAction::Take(s) | StepAction::Forced(s) | StepAction::ContinueRemoval(s) => {
            [s.server.as_str()].into()
        }
        StepAction::RestartAll(all) => all.iter().map(|s| s.server.as_str()).collect(),
        _ => BTreeSet::new(),
    };
    let current: Vec<String> = desired
        .iter()
        .filter(|d| reported.get(&d.plan.server_name) == Some(&d.revision))
        .map(|d| d.plan.server_name.clone())
        .filter(|n| !stepped.contains(n.as_str()))
        .collect();
    let loaded: BTreeMap<String, BTreeMap<String, i64>> = seen
        .observation
        .answers
        .iter()
        .map(|(n, a)| (n.clone(), a.certificates.clone()))
        .collect();
    let stale = certs::to_reload(&current, &want, &loaded);
    if stale.is_empty() {
        return None;
    }
    let wire = match system_connection::dial_system(seen.ready, access).await {
        Ok(w) => w,
        Err(e) => {
            return Some(rollout::status::certificates_pending(
                &stale,
                &format!("system connection: {e}"),
            ));
        }
    };
    let timing = crate::reload::ReloadTiming {
        confirm_within: Duration::from_secs(10),
        ..Default::default()
    };
    let mut pending = vec![];
    let mut last_error = String::new();
    for (server, listeners) in &stale {
        match crate::nats::reload::reload_for_certificates(&wire, server, &want, timing).await {
            Ok(()) => {
                ctx.events
                    .publish(
                        cluster,
                        false,
                        "CertificatesReloaded",
                        format!(
                            "reloaded {server}: it serves the rotated certificates of {}",
                            listeners.join(", ")
                        ),
                    )
                    .await;
            }
            Err(e) => {
                tracing::info!(server = %server, reason = %e, "rotated certificates not yet served");
                last_error = e;
                pending.push((server.clone(), listeners.clone()));
            }
        }
    }
    (!pending.is_empty()).then(|| rollout::status::certificates_pending(&pending, &last_error))
}

/// `restart-all`: restarts every server in `all` now, one write after the other and no gate
/// between (on Kubernetes every StatefulSet is written, so their pods restart together), since
/// servers with and without an auth plane do not route to each other. No reload is tried: an
/// auth plane is restart-only. Returns `status.config` for the last server written.
async fn restart_all<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    all: &[&DesiredServer],
    why: &str,
) -> (Option<ConfigStatus>, Result<(), LifecycleError>) {
    let names: Vec<&str> = all.iter().map(|d| d.plan.server_name.as_str()).collect();
    ctx.events
        .publish(
            cluster,
            false,
            "RolloutStep",
            format!(
                "restarting {} at once (restart-all): {why}",
                names.join(", ")
            ),
        )
        .await;
    let mut how = None;
    for d in all {
        if let Err(e) = ctx.lifecycle.apply_server(cluster, d).await {
            return (how, Err(e));
        }
        how = Some(ConfigStatus {
            revision: Some(d.revision.clone()),
            applied_by: Some(ConfigAppliedBy::Restart),
            restart_reason: Some(format!("restart-all: {why}")),
        });
    }
    (how, Ok(()))
}

/// Takes the next step of one server's removal (design §4.5): evacuate, wait, step the meta
/// leader down, `$JS.API.SERVER.REMOVE`, delete its workload, config and labelled storage,
/// recreate it (replacement) and wait until the meta leader lists it again. Returns the step
/// and the objects the lifecycle left because the NatsCluster does not control them.
///
/// The lifecycle reports whether the server's workload exists; the PVC and ConfigMap rules
/// are its `delete_server`'s (a PVC only with the server's labels), whose leftovers are named.
#[allow(clippy::too_many_arguments)]
async fn removal<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    s: &rollout::order::Step,
    kind: rollout::removal::RemovalKind,
    removals: &[ServerRemoval],
    desired: &[DesiredServer],
    before: &[ObservedServer],
    meta: &rollout::gate::MetaObservation,
    seen: &Seen<'_>,
) -> (rollout::removal::RemovalStep, Vec<String>) {
    use rollout::removal::{RemovalInput, RemovalStep, ServerObjects};
    let answers: Vec<(String, nats_wire::monitor::Jsz)> = seen
        .observation
        .answers
        .values()
        .filter_map(|a| Some((a.name.clone(), a.jsz.clone()?)))
        .collect();
    let streams = rollout::observe::stream_replicas(&answers);
    let groups = rollout::observe::groups_on(&answers, &s.server);
    let not_current = rollout::observe::not_current(&answers, Some(&s.server));
    let (leader, peers) = match meta {
        rollout::gate::MetaObservation::FromLeader { leader, peers } => {
            (Some(leader.as_str()), Some(peers.as_slice()))
        }
        _ => (None, None),
    };
    let observed = before.iter().find(|o| o.ordinal == s.ordinal);
    let objects = ServerObjects {
        statefulset: observed.is_some_and(|o| o.present),
        pvc: None,
        configmap: None,
    };
    let input = RemovalInput {
        server: &s.server,
        kind,
        phase: removals
            .iter()
            .find(|r| r.name == s.server)
            .map(|r| r.phase),
        jetstream: cluster.spec.jetstream.is_some(),
        system_credentials: seen.system.is_some(),
        new_size: cluster.spec.replicas.max(0) as u32,
        streams: &streams,
        groups_on_server: &groups,
        not_current_apart_from_server: &not_current,
        meta_leader: leader,
        meta_peers: peers,
        objects: &objects,
        server_ready: observed.is_some_and(|o| o.ready),
    };
    let step = rollout::removal::next(&input);
    let wire = || async {
        match seen.system {
            Some(access) => system_connection::dial_system(seen.ready, access)
                .await
                .map_err(|e| format!("system connection: {e}")),
            None => Err("no system user".to_string()),
        }
    };
    let peer = nats_wire::jsapi::PeerRef::name(&s.server);
    let asked = match &step {
        RemovalStep::Evacuate => match wire().await {
            Ok(w) => w.server_evacuate(&peer).await.map_err(|e| e.to_string()),
            Err(e) => Err(e),
        },
        RemovalStep::StepDownMetaLeader => match wire().await {
            Ok(w) => w
                .meta_leader_stepdown(None)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e),
        },
        RemovalStep::RemovePeer => match wire().await {
            Ok(w) => w.server_remove(&peer).await.map_err(|e| e.to_string()),
            Err(e) => Err(e),
        },
        RemovalStep::Delete { .. } => {
            match ctx.lifecycle.delete_server(cluster, s.ordinal, true).await {
                Ok(a) => return (step, a.foreign),
                Err(e) => Err(e.to_string()),
            }
        }
        RemovalStep::Recreate => match desired.iter().find(|d| d.ordinal == s.ordinal) {
            Some(d) => ctx
                .lifecycle
                .apply_server(cluster, d)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            None => Ok(()),
        },
        _ => Ok(()),
    };
    match asked {
        Ok(()) => {
            if !matches!(
                step,
                RemovalStep::WaitEvacuation { .. } | RemovalStep::WaitRejoin { .. }
            ) {
                ctx.events
                    .publish(
                        cluster,
                        false,
                        "RemovalStep",
                        format!("{}: {step:?}", s.server),
                    )
                    .await;
            }
            (step, vec![])
        }
        // The step is asked again next pass (its phase unchanged); meanwhile Progressing says
        // what failed.
        Err(e) => (
            RemovalStep::Failed {
                step: Box::new(step),
                error: e,
            },
            vec![],
        ),
    }
}

/// Writes `d`'s config, asks its server to reload it over the system user and confirms it by
/// the digest of what was rendered; any error is the reason to restart instead.
async fn reload<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    d: &DesiredServer,
    access: &system_connection::SystemAccess,
    seen: &Seen<'_>,
) -> Result<(), String> {
    ctx.lifecycle
        .write_config(cluster, d)
        .await
        .map_err(|e| format!("writing the config of {}: {e}", d.plan.server_name))?;
    let wire = system_connection::dial_system(seen.ready, access)
        .await
        .map_err(|e| format!("system connection: {e}"))?;
    let digest = crate::reload::config_digest(&render::render_block(&d.plan));
    match crate::nats::reload::reload_server(
        &wire,
        &d.plan.server_name,
        &digest,
        crate::reload::ReloadTiming::default(),
    )
    .await
    {
        crate::reload::ReloadDecision::Reloaded | crate::reload::ReloadDecision::AlreadyCurrent => {
            Ok(())
        }
        crate::reload::ReloadDecision::Restart { reason } => Err(reason),
    }
}

/// Removes `key` from the NatsCluster's annotations (force-step and replace-server, once read).
async fn clear_annotation<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    key: &str,
) -> Result<(), Error> {
    let api: Api<NatsCluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    let patch = serde_json::json!({"metadata": {"annotations": {key: null}}});
    api.patch(
        &cluster.name_any(),
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .map_err(|source| Error::Kube {
        object: format!("{} annotation {key}", describe(cluster)),
        source,
    })?;
    Ok(())
}

/// Writes the outcome as status and returns when to look again.
async fn write_status<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    outcome: Outcome,
) -> Result<Duration, Error> {
    let prev = cluster.status.clone().unwrap_or_default();
    let now = conditions::now();
    let generation = cluster.metadata.generation;
    let mut conds = prev.conditions.clone();
    let set = |conds: &mut Vec<_>, type_: &str, v: &Verdict| {
        conditions::upsert(
            conds,
            &Desired::new(type_, v.status, v.reason, v.message.clone()),
            generation,
            &now,
        )
    };
    set(&mut conds, condition::READY, &outcome.ready);
    set(&mut conds, condition::SETTLED, &outcome.settled);
    set(&mut conds, condition::PROGRESSING, &outcome.progressing);
    match &outcome.gateways {
        Some((_, v)) => set(&mut conds, condition::GATEWAYS_CONNECTED, v),
        None => conditions::remove(&mut conds, condition::GATEWAYS_CONNECTED),
    }
    match &outcome.leafnodes {
        Some((_, v)) => set(&mut conds, condition::LEAFNODES_CONNECTED, v),
        None => conditions::remove(&mut conds, condition::LEAFNODES_CONNECTED),
    }
    let replicas = cluster.spec.replicas.max(0) as u32;
    let expected: Vec<String> = (0..replicas)
        .map(|i| names::server(&cluster.name_any(), i))
        .collect();
    let servers: Vec<ServerStatus> = outcome
        .observed
        .iter()
        .map(|o| ServerStatus {
            name: o.server_name.clone(),
            version: outcome
                .observation
                .answers
                .get(&o.server_name)
                .and_then(|a| a.version.clone()),
            ready: o.ready,
            config_revision: o.revision.clone(),
        })
        .collect();
    let status = NatsClusterStatus {
        observed_generation: generation,
        conditions: conds,
        version: observation::common_version(&outcome.observation, &expected),
        replicas: Some(cluster.spec.replicas),
        ready_replicas: Some(
            crate::conditions::ready::ready_count(replicas, &outcome.observed) as i32,
        ),
        endpoints: outcome.endpoints.clone(),
        config: outcome.revision.clone().map(|r| match &outcome.applied {
            Some(a) => ConfigStatus {
                revision: Some(r),
                ..a.clone()
            },
            None => ConfigStatus {
                revision: Some(r),
                applied_by: prev.config.as_ref().and_then(|c| c.applied_by),
                restart_reason: prev.config.as_ref().and_then(|c| c.restart_reason.clone()),
            },
        }),
        rollout: outcome.rollout.clone(),
        removals: outcome.removals.clone().unwrap_or(prev.removals.clone()),
        jetstream: outcome.jetstream.clone(),
        gateways: outcome.gateways.clone().map(|g| g.0).unwrap_or_default(),
        leaf_remotes: outcome.leafnodes.clone().map(|l| l.0).unwrap_or_default(),
        servers,
    };
    let api: Api<NatsCluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    controller_kit::status::apply(&api, &cluster.name_any(), FIELD_MANAGER, &status)
        .await
        .map_err(|source| Error::Kube {
            object: describe(cluster),
            source,
        })?;
    ctx.metrics.set_conditions(
        "NatsCluster",
        &cluster.namespace().unwrap_or_default(),
        &cluster.name_any(),
        &status.conditions,
    );
    gauges::export_rollout(
        &ctx.metrics,
        &cluster.namespace().unwrap_or_default(),
        &cluster.name_any(),
        status.rollout.as_ref(),
    );
    let key = describe(cluster);
    if outcome.failed {
        return Ok(ctx.backoff.failed(&format!("{key} (failing)")));
    }
    ctx.backoff.succeeded(&format!("{key} (failing)"));
    let busy = !outcome.settled.status
        || outcome.progressing.status
        || !outcome.ready.status
        || outcome.gateways.as_ref().is_some_and(|g| !g.1.status)
        || outcome.leafnodes.as_ref().is_some_and(|l| !l.1.status);
    Ok(if busy {
        ctx.settings.recheck
    } else {
        ctx.settings.resync
    })
}

async fn reconcile<L: ServerLifecycle>(
    cached: Arc<NatsCluster>,
    ctx: Arc<Context<L>>,
) -> Result<Action, Error> {
    use tracing::Instrument;
    // Each pass reads its object fresh: the watch cache may still hold the object from before
    // the last pass's status write, and a pass over that stale status would drop what the
    // last one recorded (a replace-server read into status.removals and already cleared).
    let api: kube::Api<NatsCluster> =
        kube::Api::namespaced(ctx.client.clone(), &cached.namespace().unwrap_or_default());
    let cluster = match api
        .get_opt(&cached.name_any())
        .await
        .map_err(|source| Error::Kube {
            object: describe(&cached),
            source,
        })? {
        Some(fresh) => Arc::new(fresh),
        None => return Ok(Action::await_change()),
    };
    let span = controller_kit::trace::reconcile_span(
        "NatsCluster",
        &cluster.namespace().unwrap_or_default(),
        &cluster.name_any(),
    );
    let started = Instant::now();
    let result = async {
        if cluster.meta().deletion_timestamp.is_some() {
            // The deletion guard first; then the owner references take the objects with it.
            if let Some(wait) = deletion::on_delete(&ctx, &cluster).await? {
                return Ok(Action::requeue(wait));
            }
            ctx.metrics.forget(
                "NatsCluster",
                &cluster.namespace().unwrap_or_default(),
                &cluster.name_any(),
            );
            gauges::forget_rollout(
                &ctx.metrics,
                &cluster.namespace().unwrap_or_default(),
                &cluster.name_any(),
            );
            return Ok(Action::await_change());
        }
        deletion::keep_finalizer(&ctx, &cluster).await?;
        let outcome = pass(&cluster, &ctx).await?;
        let wait = write_status(&ctx, &cluster, outcome).await?;
        Ok(Action::requeue(wait))
    }
    .instrument(span)
    .await;
    ctx.metrics.reconciled("NatsCluster", started.elapsed());
    if result.is_ok() {
        ctx.backoff.succeeded(&describe(&cluster));
    }
    result
}

fn error_policy<L: ServerLifecycle>(
    cluster: Arc<NatsCluster>,
    err: &Error,
    ctx: Arc<Context<L>>,
) -> Action {
    let key = describe(&cluster);
    ctx.metrics.failed("NatsCluster", err.label());
    let wait = ctx.backoff.failed(&key);
    tracing::warn!(object = %key, error = %err, ?wait, "reconcile failed");
    Action::requeue(wait)
}

/// The NatsCluster a pod of one of its servers belongs to (by its instance label).
fn pod_owner(pod: Pod) -> Option<ObjectRef<NatsCluster>> {
    if pod.labels().get(labels::NAME).map(String::as_str) != Some(labels::NAME_VALUE) {
        return None;
    }
    let instance = pod.labels().get(labels::INSTANCE)?;
    Some(ObjectRef::new(instance).within(&pod.namespace()?))
}

/// Whether `cluster` reads the object `kind` `namespace/name` (its trust roots, a preloaded or
/// leaf-bound account, a leaf remote's connection), or, for a NatsReferenceGrant, any object in
/// the grant's namespace: a change to it calls for a pass at once.
pub fn refers_to(cluster: &NatsCluster, kind: &str, namespace: &str, name: &str) -> bool {
    let own = cluster.namespace().unwrap_or_default();
    let spec = &cluster.spec;
    let auth = spec.auth.as_ref();
    let mut refs: Vec<(&str, &nats_api::common::ObjectReference)> = vec![];
    if let Some(a) = auth {
        refs.push(("NatsOperatorTrust", &a.trust_ref));
        refs.extend(a.account_trust_refs.iter().map(|r| ("NatsAccountTrust", r)));
    }
    for r in &spec.leaf_remotes {
        refs.push(("NatsConnection", &r.connection_ref));
        if let Some(a) = &r.local_account_trust_ref {
            refs.push(("NatsAccountTrust", a));
        }
    }
    refs.iter().any(|(k, r)| {
        let ns = r.namespace.as_deref().unwrap_or(&own);
        match kind {
            "NatsReferenceGrant" => ns == namespace && ns != own,
            _ => *k == kind && ns == namespace && r.name == name,
        }
    })
}

/// The Secrets `cluster` reads, as (namespace, name): the client, route, gateway and leafnode
/// TLS Secrets, the system user's creds, and each leaf remote's NatsConnection creds and CA (in
/// the connection's namespace; `connections` are the NatsConnections known).
pub fn secrets_read(
    cluster: &NatsCluster,
    connections: &[Arc<nats_api::nats::NatsConnection>],
) -> Vec<(String, String)> {
    let own = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let spec = &cluster.spec;
    // Every listener's certificate Secret, whoever writes it (the user, cert-manager, or this
    // controller for the self-signed routes): a rotation is reloaded or restarted at once.
    let listeners = [
        ("client", spec.tls.as_ref()),
        (
            "gateway",
            spec.gateway.as_ref().and_then(|g| g.tls.as_ref()),
        ),
        (
            "leafnodes",
            spec.leafnodes.as_ref().and_then(|l| l.tls.as_ref()),
        ),
    ];
    let mut out: Vec<(String, String)> = listeners
        .into_iter()
        .filter_map(|(listener, tls)| Some(tls_secret_name(&name, listener, Some(tls?))))
        .map(|n| (own.clone(), n))
        .collect();
    if spec.route_tls_enabled() {
        let tls = spec.routes.as_ref().and_then(|r| r.tls.as_ref());
        match tls.and_then(|t| t.secret_ref.as_ref()) {
            Some(r) => out.push((own.clone(), r.name.clone())),
            None => out.push((own.clone(), route_ca::routes_tls_secret(&name))),
        }
    }
    if let Some(c) = spec
        .auth
        .as_ref()
        .and_then(|a| a.system_credentials.as_ref())
    {
        out.push((own.clone(), c.secret_key_ref.name.clone()));
    }
    for remote in &spec.leaf_remotes {
        let ns = remote.connection_ref.namespace.as_deref().unwrap_or(&own);
        let Some(conn) = connections.iter().find(|c| {
            c.namespace().as_deref() == Some(ns) && c.name_any() == remote.connection_ref.name
        }) else {
            continue;
        };
        let creds = conn.spec.credentials.as_ref().map(|c| &c.secret_key_ref);
        let ca = conn
            .spec
            .tls
            .as_ref()
            .and_then(|t| t.ca.as_ref())
            .map(|c| &c.secret_key_ref);
        out.extend(
            creds
                .into_iter()
                .chain(ca)
                .map(|r| (ns.to_string(), r.name.clone())),
        );
    }
    out
}

/// The NatsClusters among `clusters` that read the Secret `secret`: a rotated certificate or
/// creds file calls for a pass at once, not at the next resync.
fn secret_readers(
    clusters: &[Arc<NatsCluster>],
    connections: &[Arc<nats_api::nats::NatsConnection>],
    secret: &Secret,
) -> Vec<ObjectRef<NatsCluster>> {
    let key = (secret.namespace().unwrap_or_default(), secret.name_any());
    clusters
        .iter()
        .filter(|c| secrets_read(c, connections).contains(&key))
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

/// The NatsClusters in `store` that read `obj`.
fn readers<K: Resource<DynamicType = ()>>(
    store: &kube::runtime::reflector::Store<NatsCluster>,
    obj: &K,
) -> Vec<ObjectRef<NatsCluster>> {
    let kind = K::kind(&());
    let ns = obj.meta().namespace.clone().unwrap_or_default();
    let name = obj.meta().name.clone().unwrap_or_default();
    store
        .state()
        .iter()
        .filter(|c| refers_to(c, &kind, &ns, &name))
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

/// Runs the NatsCluster controller until it ends (it runs forever).
pub async fn run<L: ServerLifecycle>(ctx: Arc<Context<L>>) {
    use nats_api::nats::{NatsAccountTrust, NatsConnection, NatsOperatorTrust, NatsReferenceGrant};
    let client = ctx.client.clone();
    let pods =
        watcher::Config::default().labels(&format!("{}={}", labels::NAME, labels::NAME_VALUE));
    let controller = Controller::new(
        Api::<NatsCluster>::all(client.clone()),
        watcher::Config::default(),
    );
    let store = controller.store();
    let (s1, s2, s3, s4, s5) = (
        store.clone(),
        store.clone(),
        store.clone(),
        store.clone(),
        store,
    );
    // The NatsConnections known, so a Secret maps to the leaf remotes whose connection reads it.
    let (connections, writer) = kube::runtime::reflector::store::<NatsConnection>();
    let connections_in_sync = kube::runtime::reflector(
        writer,
        // Backed off, so a watch that keeps failing is not retried in a tight loop.
        kube::runtime::WatchStreamExt::default_backoff(watcher(
            Api::<NatsConnection>::all(client.clone()),
            watcher::Config::default(),
        )),
    )
    .for_each(|_| async {});
    let (redrive, again) = controller_kit::relist::redrive("NatsCluster");
    let controller = controller
        .owns(
            Api::<StatefulSet>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(
            Api::<ConfigMap>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
        )
        .watches(Api::<Pod>::all(client.clone()), pods, pod_owner)
        .watches(
            Api::<NatsOperatorTrust>::all(client.clone()),
            watcher::Config::default(),
            move |o| readers(&s1, &o),
        )
        .watches(
            Api::<NatsAccountTrust>::all(client.clone()),
            watcher::Config::default(),
            move |o| readers(&s2, &o),
        )
        .watches(
            Api::<NatsConnection>::all(client.clone()),
            watcher::Config::default(),
            move |o| readers(&s3, &o),
        )
        .watches(
            Api::<NatsReferenceGrant>::all(client.clone()),
            watcher::Config::default(),
            move |o| readers(&s4, &o),
        )
        .watches(
            Api::<Secret>::all(client),
            watcher::Config::default(),
            move |o| secret_readers(&s5.state(), &connections.state(), &o),
        )
        .reconcile_all_on(again)
        .run(reconcile::<L>, error_policy::<L>, ctx)
        .for_each(|r| {
            redrive.note(&r);
            controller_kit::trace::run_result("NatsCluster", &r);
            futures::future::ready(())
        });
    futures::join!(controller, connections_in_sync);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_revision_names_every_server_revision_in_order() {
        let a = cluster_revision(&["aa".into(), "bb".into()]);
        assert_eq!(a.len(), 8);
        assert_ne!(a, cluster_revision(&["bb".into(), "aa".into()]));
        assert_eq!(a, cluster_revision(&["aa".into(), "bb".into()]));
    }

    #[test]
    fn a_pod_maps_to_its_natscluster_by_instance_label() {
        let mut p = Pod::default();
        p.metadata.namespace = Some("nats".into());
        p.metadata.labels = Some(labels::server("demo", "demo-1"));
        let r = pod_owner(p.clone()).expect("a NatsCluster");
        assert_eq!(r.name, "demo");
        assert_eq!(r.namespace.as_deref(), Some("nats"));
        p.metadata.labels = Some([(labels::INSTANCE.to_string(), "demo".to_string())].into());
        assert!(pod_owner(p).is_none(), "not a NATS pod");
    }

    #[test]
    fn a_natscluster_reads_its_trusts_connections_and_grants_into_their_namespaces() {
        let c: NatsCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.nats.mikluko.io/v1beta1",
            "kind": "NatsCluster",
            "metadata": {"name": "edge", "namespace": "edge"},
            "spec": {
                "version": "2.15.0", "replicas": 1,
                "auth": {"trustRef": {"name": "t"}, "accountTrustRefs": [{"name": "a", "namespace": "shared"}]},
                "leafRemotes": [{"connectionRef": {"name": "hub", "namespace": "hubs"}, "localAccountTrustRef": {"name": "b"}}],
            },
        }))
        .expect("a NatsCluster");
        assert!(refers_to(&c, "NatsOperatorTrust", "edge", "t"));
        assert!(!refers_to(&c, "NatsOperatorTrust", "other", "t"));
        assert!(refers_to(&c, "NatsAccountTrust", "shared", "a"));
        assert!(refers_to(&c, "NatsAccountTrust", "edge", "b"));
        assert!(!refers_to(&c, "NatsAccountTrust", "edge", "a"));
        assert!(refers_to(&c, "NatsConnection", "hubs", "hub"));
        assert!(!refers_to(&c, "NatsConnection", "edge", "hub"));
        assert!(refers_to(&c, "NatsReferenceGrant", "hubs", "any"));
        assert!(refers_to(&c, "NatsReferenceGrant", "shared", "any"));
        assert!(
            !refers_to(&c, "NatsReferenceGrant", "edge", "any"),
            "no grant is needed in its own namespace"
        );
    }

    #[rstest::rstest]
    #[case::client_tls("edge", "client-tls", true)]
    #[case::route_tls("edge", "routes-tls", true)]
    #[case::gateway_tls("edge", "gw-tls", true)]
    #[case::leafnode_tls("edge", "leaf-tls", true)]
    #[case::system_creds("edge", "sys-creds", true)]
    #[case::remote_creds("hubs", "hub-creds", true)]
    #[case::remote_ca("hubs", "hub-ca", true)]
    #[case::same_name_other_namespace("hubs", "client-tls", false)]
    #[case::remote_creds_in_own_namespace("edge", "hub-creds", false)]
    #[case::unread("edge", "other", false)]
    #[case::unknown_connection_reads_nothing("hubs", "ghost-creds", false)]
    fn a_secret_maps_to_the_natsclusters_reading_it(
        #[case] namespace: &str,
        #[case] name: &str,
        #[case] read: bool,
    ) {
        use nats_api::nats::NatsConnection;
        let c: NatsCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.nats.mikluko.io/v1beta1",
            "kind": "NatsCluster",
            "metadata": {"name": "edge", "namespace": "edge"},
            "spec": {
                "version": "2.15.0", "replicas": 1,
                "tls": {"secretRef": {"name": "client-tls"}},
                "routes": {"tls": {"secretRef": {"name": "routes-tls"}}},
                "gateway": {"name": "edge", "discovery": "Explicit", "remotes": [{"name": "edge", "url": "nats://edge:7222"}], "tls": {"secretRef": {"name": "gw-tls"}}},
                "leafnodes": {"tls": {"secretRef": {"name": "leaf-tls"}}},
                "auth": {"trustRef": {"name": "t"}, "systemCredentials": {"secretKeyRef": {"name": "sys-creds"}}},
                "leafRemotes": [
                    {"connectionRef": {"name": "hub", "namespace": "hubs"}},
                    {"connectionRef": {"name": "ghost", "namespace": "hubs"}},
                ],
            },
        }))
        .expect("a NatsCluster");
        let conn: NatsConnection = serde_json::from_value(serde_json::json!({
            "apiVersion": "nats.mikluko.io/v1beta1",
            "kind": "NatsConnection",
            "metadata": {"name": "hub", "namespace": "hubs"},
            "spec": {
                "servers": ["tls://hub:7422"],
                "credentials": {"secretKeyRef": {"name": "hub-creds"}},
                "tls": {"ca": {"secretKeyRef": {"name": "hub-ca"}}},
            },
        }))
        .expect("a NatsConnection");
        let mut secret = Secret::default();
        secret.metadata.namespace = Some(namespace.into());
        secret.metadata.name = Some(name.into());
        let found = secret_readers(&[Arc::new(c)], &[Arc::new(conn)], &secret);
        assert_eq!(
            found.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            if read { vec!["edge"] } else { vec![] },
            "{namespace}/{name}"
        );
    }

    #[rstest::rstest]
    #[case::self_signed_routes("version: 2.15.0\nreplicas: 1\n", &["demo-routes-tls"])]
    #[case::routes_off("version: 2.15.0\nreplicas: 1\nroutes: {tls: {enabled: false}}\n", &[])]
    #[case::cert_manager_listeners(
        "version: 2.15.0\nreplicas: 1\ntls: {certManager: {issuerRef: {name: ca}}}\nroutes: {tls: {certManager: {issuerRef: {name: ca}}}}\n",
        &["demo-client-tls", "demo-routes-tls"]
    )]
    fn certificates_written_by_others_are_read_too(#[case] spec: &str, #[case] want: &[&str]) {
        let spec: nats_api::cluster::NatsClusterSpec = serde_yaml::from_str(spec).expect("spec");
        let mut c = NatsCluster::new("demo", spec);
        c.metadata.namespace = Some("nats".into());
        let mut got: Vec<String> = secrets_read(&c, &[]).into_iter().map(|(_, n)| n).collect();
        got.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn a_waiting_hold_progresses_a_refusal_does_not() {
        let r = Refusal {
            reason: reason::TRUST_NOT_FOUND,
            message: "m".into(),
            hold: Hold::Waiting,
        };
        assert!(held(&r).status);
        let r = Refusal {
            hold: Hold::Refused,
            ..r
        };
        assert!(!held(&r).status);
    }
}
