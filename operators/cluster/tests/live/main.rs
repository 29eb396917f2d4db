//! The cluster controller's pieces against real nats-servers: the rendered configs loaded by
//! `nats-server -t`, reloads and rollouts. The local server lifecycle's live test is the sim's
//! (`sim/tests/live/local_lifecycle.rs`).

mod quickstart_boots;
mod reload_live;
mod rendered_configs_load;
mod rollout_live;
