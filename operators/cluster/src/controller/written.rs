//! What a pass's writes came to ([`Written`]): nothing written (unowned, or held), the port
//! failing partway, or the servers applied, stepped and observed again ([`Rolled`]). The
//! conditions and the status are judged from it.

use nats_api::cluster::NatsCluster;

use super::apply::Applied;
use super::context::Context;
use super::error::Error;
use super::observe_servers::Seen;
use super::step_rollout::{self, Chosen, RolloutReport, Taken};
use crate::refusals::Refusal;
use crate::server_lifecycle::{ObservedServer, ServerLifecycle};
use nats_api::cluster::reason;

/// What a pass's writes came to.
pub enum Written {
    /// The NatsCluster has no namespace, name or uid to own its objects by: nothing was written.
    Unowned(String),
    /// A hold: nothing was written. The servers as the port observed them, or why it could not.
    Held {
        hold: Refusal,
        observed: Result<Vec<ObservedServer>, String>,
    },
    /// The port failed partway; the servers as it observed them afterwards.
    Failed {
        error: String,
        observed: Vec<ObservedServer>,
    },
    /// Applied, stepped and observed again.
    Rolled(Box<Rolled>),
}

impl Written {
    /// Why the pass failed (Ready=False ReconcileFailed, looked at again after a backoff that
    /// grows per consecutive failure, not at the recheck pace).
    pub fn failure(&self) -> Option<&str> {
        match self {
            Written::Unowned(e) => Some(e),
            Written::Held { observed, .. } => observed.as_ref().err().map(String::as_str),
            Written::Failed { error, .. } => Some(error),
            Written::Rolled(_) => None,
        }
    }

    /// The servers as the port observed them last.
    pub fn observed(&self) -> &[ObservedServer] {
        match self {
            Written::Unowned(_) => &[],
            Written::Held { observed, .. } => observed.as_deref().unwrap_or_default(),
            Written::Failed { observed, .. } => observed,
            Written::Rolled(r) => &r.observed,
        }
    }

    pub fn rolled(&self) -> Option<&Rolled> {
        match self {
            Written::Rolled(r) => Some(r),
            _ => None,
        }
    }
}

/// The servers of a pass nothing held: applied, stepped and observed again.
pub struct Rolled {
    pub applied: Applied,
    pub chosen: Chosen,
    pub taken: Taken,
    /// The servers as the port observed them after the step.
    pub observed: Vec<ObservedServer>,
    pub report: RolloutReport,
    /// Objects of a rendered name the NatsCluster does not control, left untouched (the
    /// writes' and the removal's), sorted.
    pub foreign: Vec<String>,
}

impl Rolled {
    pub fn new(
        cluster: &NatsCluster,
        applied: Applied,
        chosen: Chosen,
        taken: Taken,
        observed: Vec<ObservedServer>,
    ) -> Self {
        let mut foreign: Vec<String> = applied.foreign.iter().chain(&taken.left).cloned().collect();
        foreign.sort();
        foreign.dedup();
        let report = step_rollout::report(cluster, &applied, &chosen, &taken);
        Rolled {
            applied,
            chosen,
            taken,
            observed,
            report,
            foreign,
        }
    }
}

/// A hold: nothing is written; the servers as the pass first observed them are its status's
/// (observed again only when that observation failed).
pub async fn held<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    seen: &Seen,
    plans: &[crate::render::ServerPlan],
    hold: Refusal,
) -> Written {
    // A gateway waiting for the Secret cert-manager writes still gets its Certificate (with the
    // other shared objects, none of which starts a server): cert-manager writes the Secret only
    // for a Certificate that exists, so holding it back would wait forever.
    if hold.reason == reason::GATEWAY_CERTIFICATE_NOT_READY
        && issued_gateway(cluster)
        && let Err(e) = ctx.server_lifecycle.apply_shared(cluster, plans).await
    {
        tracing::warn!(error = %e, "writing the gateway's Certificate while its Secret is awaited");
    }
    let observed = seen
        .servers_or_observe(ctx, cluster)
        .await
        .map_err(|e| e.to_string());
    Written::Held { hold, observed }
}

/// Whether the gateway's certificate comes from cert-manager (`gateway.tls.certManager`).
fn issued_gateway(cluster: &NatsCluster) -> bool {
    cluster
        .spec
        .gateway
        .as_ref()
        .and_then(|g| g.tls.as_ref())
        .is_some_and(|t| t.cert_manager.is_some())
}

/// A failing port is a condition (Ready=False ReconcileFailed), not an error of the reconcile:
/// the servers are observed again for status. Any other error fails the reconcile.
pub async fn caught<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    rolled: Result<Rolled, Error>,
) -> Result<Written, Error> {
    match rolled {
        Ok(r) => Ok(Written::Rolled(Box::new(r))),
        Err(Error::ServerLifecycle(e)) => Ok(Written::Failed {
            error: e.to_string(),
            observed: ctx
                .server_lifecycle
                .observe(cluster)
                .await
                .unwrap_or_default(),
        }),
        Err(e) => Err(e),
    }
}

/// Objects in the way are an event too (Ready names them).
pub async fn tell_foreign<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    foreign: &[String],
) {
    if foreign.is_empty() {
        return;
    }
    let message = format!(
        "not controlled by this NatsCluster, left untouched: {}",
        foreign.join(", ")
    );
    ctx.shared
        .events
        .publish(cluster, true, reason::RECONCILE_FAILED, message)
        .await;
}
