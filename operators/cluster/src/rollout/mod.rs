//! The rollout (design §4.4, §4.5) as pure functions over plain data: observations in, one
//! decision out, so the Kubernetes and the local server lifecycle share them.
//!
//! - [`gate`]: whether the next voluntary step may be taken, and what it waits for.
//! - [`order`]: which step comes next (scale-down, restart, replacement; the meta leader's
//!   server last), paused, `force-step`, AuthChangeBlocked.
//! - [`removal`]: one server's scale-down or replacement, step by step.
//! - [`observe`]: from observed servers, JSZ and the meta view to those inputs.
//! - [`status`]: `status.rollout`, `status.removals`, `status.config` and Progressing.

pub mod gate;
pub mod observe;
pub mod order;
pub mod removal;
pub mod status;
