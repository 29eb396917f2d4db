//! The conditions a NatsCluster's status reads (design §4.7, API.md) as pure functions of what
//! the reconciler observed: the servers (pods or processes) through the server lifecycle port, and the
//! servers' own answers ([`crate::observation`]). Each condition is decided as the kit's
//! [`Decided`](controller_kit::conditions::Decided): its type, status, reason and message.
//!
//! - [`ready`]: Ready, every server or a quorum of them Ready.
//! - [`settled`]: Settled, every Raft group led and current, every server answering.
//! - [`gateways`]: GatewaysConnected and `status.gateways`.
//! - [`leafnodes`]: LeafnodesConnected and `status.leafRemotes`.

pub mod gateways;
pub mod leafnodes;
pub mod ready;
pub mod settled;

#[cfg(test)]
mod tests;

/// Names as a condition message lists them.
fn names(list: &[String]) -> String {
    list.join(", ")
}
