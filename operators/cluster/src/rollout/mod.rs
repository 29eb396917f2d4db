//! The rollout (design §4.4, §4.5) as pure functions over plain data: observations in, one
//! decision out, so the Kubernetes and the local server lifecycle share them.
//!
//! - [`gate`]: whether the next voluntary step may be taken, and what it waits for.
//! - [`order`]: which step comes next (scale-down, restart, replacement; the meta leader's
//!   server last), paused, `force-step`, `replace-server`, AuthChangeBlocked.
//! - [`removal`]: one server's scale-down or replacement, step by step.
//! - [`rollout_inputs`]: from observed servers, JSZ answers and the meta group to those inputs.
//! - [`next_step`]: where each desired server stands, the revision it reports and runs, and the
//!   next step ([`next_step::next_step`]: the gate, then the step order).
//! - [`status`]: `status.rollout`, `status.removals`, `status.config` and Progressing.
//! - [`volume`]: which servers a changed `jetstream.volumeClaimTemplate` replaces.
//!
//! One reconcile pass, in the order the reconciler (`controller::step_rollout`) calls them:
//!
//! 1. Observe: the server lifecycle's servers, and what the servers answered before anything was
//!    written (`crate::observation::Observation`: STATSZ, VARZ and JSZ over the system user, or
//!    each server's monitoring endpoint). The meta group is the meta leader's own JSZ report
//!    when it answered ([`rollout_inputs::meta_observation`], `FromLeader`), else `FromFollowers`;
//!    Settled as the gate reads it is [`next_step::settled_view`].
//! 2. A server's revision is the one it *runs*: the one whose rendered config has the digest its
//!    `/varz` reports ([`next_step::reported_revisions`], [`rollout_inputs::reported_revision`]).
//!    A reload therefore updates it without touching the workload (on Kubernetes the pod template's
//!    revision would restart the pod); [`next_step::running`] keeps the workload's revision where
//!    the workload itself changed.
//! 3. [`order::read_replace_server`] records a named replacement in `status.removals` and asks
//!    for the annotation to be cleared; [`order::replacements`] lists what to replace, with
//!    [`rollout_inputs::volume_mismatches`].
//! 4. [`next_step::next_step`]: [`gate::gate`] over [`rollout_inputs::gate_servers`], then
//!    [`order::decide`]; clear `force-step` and `restart-all` when the decision says so.
//! 5. For `Take`/`Forced` restarts: a reload or the server lifecycle's `apply_server`; for
//!    `RestartAll`, every server at once. For a removal (`ContinueRemoval`, or `Take` of a
//!    scale-down or replacement): [`removal::next`] and do its one step; record
//!    [`status::removal_entry`].
//! 6. Write [`gate::gate_status`], [`status::rollout_status`], [`status::config_status`] and
//!    [`status::progressing`]. Since `status.rollout.gate.since` and `status.removals` carry the
//!    state, a restarted controller resumes where it was and restarts no server twice.

pub mod gate;
pub mod next_step;
pub mod order;
pub mod removal;
pub mod rollout_inputs;
pub mod status;
pub mod volume;
