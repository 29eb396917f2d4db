//! The conditions a NatsCluster's status reads (design §4.7, API.md) as pure functions of what
//! the reconciler observed: the servers (pods or processes) through the lifecycle port, and the
//! servers' own answers ([`crate::observation`]). Each condition is a [`Verdict`].
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

/// A condition as decided: status, reason, message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Verdict {
    pub fn new(status: bool, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            reason,
            message: message.into(),
        }
    }
}

/// Names as a condition message lists them.
fn names(list: &[String]) -> String {
    list.join(", ")
}
