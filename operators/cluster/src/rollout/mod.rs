//! The rollout (design §4.4, §4.5) as pure functions over plain data: observations in, one
//! decision out, so the Kubernetes and the local server lifecycle share them.
//!
//! - [`gate`]: whether the next voluntary step may be taken, and what it waits for.
//! - [`order`]: which step comes next (scale-down, restart, replacement; the meta leader's
//!   server last), paused, `force-step`, `replace-server`, AuthChangeBlocked.
//! - [`removal`]: one server's scale-down or replacement, step by step.
//! - [`observe`]: from observed servers, JSZ and the meta view to those inputs.
//! - [`status`]: `status.rollout`, `status.removals`, `status.config` and Progressing.
//! - [`volume`]: which servers a changed `jetstream.volumeClaimTemplate` replaces.
//!
//! One reconcile pass, in the order the reconciler calls them:
//!
//! 1. Observe: the lifecycle's servers, JSZ of this NATS cluster over the system user, the meta
//!    group (`Wire::meta_group`, which reaches a meta leader in another NATS cluster, wrapped as
//!    `MetaView::FromLeader`; else `MetaView::FromFollowers`), each server's `/varz` digest.
//! 2. A server's revision is the one it *runs*: the one whose rendered config has the digest its
//!    `/varz` reports ([`observe::reported_revision`]). A reload therefore updates it without
//!    touching the workload (on Kubernetes the pod template's revision would restart the pod).
//! 3. [`order::read_replace_server`] records a named replacement in `status.removals` and asks
//!    for the annotation to be cleared; [`order::replacements`] lists what to replace.
//! 4. [`gate::gate`] over [`observe::gate_servers`], then [`order::decide`]; clear `force-step`
//!    when the decision says so.
//! 5. For `Take`/`Forced` restarts: the lifecycle's `apply_server`. For a removal
//!    (`ContinueRemoval`, or `Take` of a scale-down or replacement): [`removal::next`] and do its
//!    one step; record [`status::removal_entry`].
//! 6. Write [`gate::gate_status`], [`status::rollout_status`], [`status::config_status`] and
//!    [`status::progressing`]. Since `status.rollout.gate.since` and `status.removals` carry the
//!    state, a restarted controller resumes where it was and restarts no server twice.

pub mod gate;
pub mod observe;
pub mod order;
pub mod removal;
pub mod status;
pub mod step;
pub mod volume;
