//! CEL rows of the `nats` and `cluster` groups.

use super::Case;

/// The rows of the nats and cluster kinds.
pub fn cases() -> Vec<Case> {
    Vec::new()
}
