//! Rotated certificates reach the servers (design §4.2), with a system user: every server
//! running its target revision, and not stepped in this pass, whose listeners serve another
//! certificate than their Secrets hold is asked to reload, confirmed by the NotAfter it reports.
//! Without a system user a rotation is restart material instead (see
//! [`crate::certificate_reload`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use controller_kit::conditions::Decided;
use nats_api::cluster::NatsCluster;

use super::apply::Applied;
use super::context::Context;
use super::observe_servers::Seen;
use crate::certificate_reload as certs;
use crate::nats::ask_reload::reload_for_certificates;
use crate::nats::system_connection::dial_system;
use crate::reload::ReloadTiming;
use crate::rollout::order::{Action, Decision};
use crate::rollout::status::certificates_pending;
use crate::server_lifecycle::ServerLifecycle;

/// Reloads the servers serving rotated-out certificates. Returns Progressing=True ReloadPending
/// naming the servers not yet serving the new certificates, if any.
pub async fn reload_rotated<L: ServerLifecycle>(
    ctx: &Context<L>,
    cluster: &NatsCluster,
    seen: &Seen,
    applied: &Applied,
    decision: &Decision,
    reported: &BTreeMap<String, String>,
) -> Option<Decided> {
    let access = seen.system.as_ref()?;
    let (want, unreadable) = certs::desired(&applied.listeners);
    if !unreadable.is_empty() {
        tracing::warn!(certificates = ?unreadable, "certificates not read; no server is judged by them");
    }
    let stale = certs::to_reload(
        &untouched(applied, decision, reported),
        &want,
        &loaded(seen),
    );
    if stale.is_empty() {
        return None;
    }
    let wire = match dial_system(&seen.ready, access).await {
        Ok(w) => w,
        Err(e) => {
            return Some(certificates_pending(
                &stale,
                &format!("system connection: {e}"),
            ));
        }
    };
    let timing = ReloadTiming {
        confirm_within: Duration::from_secs(10),
        ..Default::default()
    };
    let mut pending = vec![];
    let mut last_error = String::new();
    for (server, listeners) in &stale {
        match reload_for_certificates(&wire, server, &want, timing).await {
            Ok(()) => {
                let message = format!(
                    "reloaded {server}: it serves the rotated certificates of {}",
                    listeners.join(", ")
                );
                ctx.shared
                    .events
                    .publish(cluster, false, "CertificatesReloaded", message)
                    .await;
            }
            Err(e) => {
                tracing::info!(server = %server, reason = %e, "rotated certificates not yet served");
                last_error = e;
                pending.push((server.clone(), listeners.clone()));
            }
        }
    }
    (!pending.is_empty()).then(|| certificates_pending(&pending, &last_error))
}

/// The servers reporting their target revision (`reported`) that `decision`'s step does not
/// touch.
fn untouched(
    applied: &Applied,
    decision: &Decision,
    reported: &BTreeMap<String, String>,
) -> Vec<String> {
    let stepped: BTreeSet<&str> = match &decision.action {
        Action::Take(s) | Action::Forced(s) | Action::ContinueRemoval(s) => {
            [s.server.as_str()].into()
        }
        Action::RestartAll(all) => all.iter().map(|s| s.server.as_str()).collect(),
        _ => BTreeSet::new(),
    };
    applied
        .desired
        .iter()
        .filter(|d| reported.get(&d.plan.server_name) == Some(&d.revision))
        .map(|d| d.plan.server_name.clone())
        .filter(|n| !stepped.contains(n.as_str()))
        .collect()
}

/// NotAfter of the certificate each listener of each answering server loaded.
fn loaded(seen: &Seen) -> BTreeMap<String, BTreeMap<String, i64>> {
    seen.observation
        .answers
        .iter()
        .map(|(n, a)| (n.clone(), a.certificates.clone()))
        .collect()
}
