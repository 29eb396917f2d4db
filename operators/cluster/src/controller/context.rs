//! What every pass shares: the kit's shared parts (the client, metrics, Events, the backoff), the
//! server-lifecycle port, the settings, and the plans this process rendered. Nothing global.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use controller_kit::context::{HasShared, Shared};
use controller_kit::metrics::Metrics;

use crate::objects::server_side_apply::FIELD_MANAGER;
use crate::render::ServerPlan;
use crate::server_lifecycle::ServerLifecycle;

/// How often a NatsCluster that is not yet Settled, or is held or progressing, is looked at again.
pub const RECHECK: Duration = Duration::from_secs(5);
/// How often a NatsCluster that is not yet Settled but has no server Ready, whose readiness a
/// watch delivers, is looked at again ([`crate::pace`]).
pub const IDLE_RECHECK: Duration = Duration::from_secs(60);
/// How often a Settled NatsCluster is looked at again.
pub const RESYNC: Duration = Duration::from_secs(300);
/// How often a rollout holding at its gate, with servers still to step, is looked at again
/// ([`crate::pace`]).
pub const GATE_RECHECK: Duration = Duration::from_millis(250);

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
    /// The wait before looking again while not Settled with no server Ready to ask, where the
    /// port watches readiness ([`crate::pace`]).
    pub idle_recheck: Duration,
    /// The wait before looking again once Settled.
    pub resync: Duration,
    /// The wait before looking again while a rollout holds at its gate ([`crate::pace`]).
    pub gate_recheck: Duration,
    /// `--watch-namespaces` and `--concurrency`.
    pub scope: controller_kit::scope::Scope,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            allow_gateway_without_tls: false,
            controller_namespace: "nats-system".into(),
            cluster_domain: "cluster.local".into(),
            recheck: RECHECK,
            idle_recheck: IDLE_RECHECK,
            resync: RESYNC,
            gate_recheck: GATE_RECHECK,
            scope: controller_kit::scope::Scope::default(),
        }
    }
}

/// What every pass shares.
pub struct Context<L: ServerLifecycle> {
    /// The client, metrics, Events, backoff and due times (the kit's), writing as
    /// [`FIELD_MANAGER`].
    pub shared: Shared,
    /// How the servers are reached.
    pub server_lifecycle: L,
    /// The process settings.
    pub settings: Settings,
    /// The plans this process rendered, by revision: what a running server's config was, so a
    /// step can tell which fields changed (reload or restart, and `restartReason`).
    pub plans: Mutex<HashMap<String, ServerPlan>>,
}

/// Plans remembered before the oldest are forgotten (a few revisions per server suffice).
const REMEMBERED_PLANS: usize = 4096;

impl<L: ServerLifecycle> HasShared for Context<L> {
    fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl<L: ServerLifecycle> Context<L> {
    /// Remembers the plan of `revision`.
    pub fn remember(&self, revision: &str, plan: &ServerPlan) {
        if let Ok(mut plans) = self.plans.lock() {
            if plans.len() >= REMEMBERED_PLANS && !plans.contains_key(revision) {
                plans.clear();
            }
            plans
                .entry(revision.to_string())
                .or_insert_with(|| plan.clone());
        }
    }

    /// The plan of `revision`, if this process rendered it.
    pub fn recall(&self, revision: &str) -> Option<ServerPlan> {
        self.plans.lock().ok()?.get(revision).cloned()
    }
}

/// A context over `server_lifecycle`.
pub fn context<L: ServerLifecycle>(
    client: kube::Client,
    server_lifecycle: L,
    settings: Settings,
    metrics: Metrics,
) -> Arc<Context<L>> {
    Arc::new(Context {
        shared: Shared::new(client, metrics, FIELD_MANAGER).scoped(settings.scope.clone()),
        server_lifecycle,
        settings,
        plans: Default::default(),
    })
}
