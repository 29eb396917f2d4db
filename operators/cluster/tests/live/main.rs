//! The cluster controller's pieces against real nats-servers: the local lifecycle, the rendered
//! configs loaded by `nats-server -t`, reloads and rollouts.

mod local_lifecycle;
mod quickstart_boots;
mod reload_live;
mod rendered_configs_load;
mod rollout_live;
