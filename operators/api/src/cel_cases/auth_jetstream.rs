//! CEL rows of the `auth` and `jetstream` groups (filled by the auth/jetstream API helper).

use super::Case;

/// The rows of the auth and jetstream kinds.
pub fn cases() -> Vec<Case> {
    Vec::new()
}
