//! GatewaysConnected and `status.gateways`: a member of the supercluster is reachable when
//! every answering server holds an outbound gateway connection to it.

use controller_kit::conditions::Decided;
use nats_api::cluster::{GatewayStatus, condition, reason};
use nats_wire::monitor::Gatewayz;

use super::names;
use crate::observation::Observation;

/// status.gateways and GatewaysConnected: a member is reachable when every answering server
/// holds an outbound gateway connection to it.
pub fn gateways(remotes: &[String], obs: &Observation) -> (Vec<GatewayStatus>, Decided) {
    let answering: Vec<&Gatewayz> = obs
        .answers
        .values()
        .filter_map(|a| a.gatewayz.as_ref())
        .collect();
    let statuses: Vec<GatewayStatus> = remotes
        .iter()
        .map(|r| {
            let outbound = answering
                .iter()
                .filter(|g| {
                    g.outbound_gateways
                        .get(r)
                        .is_some_and(|o| o.connection.is_some())
                })
                .count() as i32;
            let inbound = answering
                .iter()
                .map(|g| {
                    g.inbound_gateways
                        .get(r)
                        .map_or(0, |v| v.iter().filter(|c| c.connection.is_some()).count())
                })
                .sum::<usize>() as i32;
            GatewayStatus {
                name: r.clone(),
                connected: outbound > 0 && outbound as usize == answering.len(),
                inbound,
                outbound,
            }
        })
        .collect();
    let unreachable: Vec<String> = statuses
        .iter()
        .filter(|s| !s.connected)
        .map(|s| s.name.clone())
        .collect();
    let verdict = if answering.is_empty() {
        Decided::new(
            condition::GATEWAYS_CONNECTED,
            false,
            reason::MEMBERS_UNREACHABLE,
            obs.failure
                .clone()
                .unwrap_or_else(|| "no server answered GATEWAYZ".into()),
        )
    } else if unreachable.is_empty() {
        Decided::new(
            condition::GATEWAYS_CONNECTED,
            true,
            reason::ALL_MEMBERS_REACHABLE,
            if remotes.is_empty() {
                "no other member is listed".to_string()
            } else {
                format!("every server holds a gateway to {}", names(remotes))
            },
        )
    } else {
        Decided::new(
            condition::GATEWAYS_CONNECTED,
            false,
            reason::MEMBERS_UNREACHABLE,
            format!(
                "not every server holds a gateway to {}",
                names(&unreachable)
            ),
        )
    };
    (statuses, verdict)
}
