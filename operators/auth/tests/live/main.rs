//! The auth controller's rules against real nats-servers in operator mode, and the controller
//! itself through a real kube-apiserver with its system connection (`live_controller`).

#[path = "../apirig/mod.rs"]
mod apirig;
#[path = "../common/mod.rs"]
mod common;

mod adoption;
mod imports;
mod live_controller;
mod presets;
mod recovery;
mod revocation;
mod scoped;
mod stepdown;
mod story_02;
mod system_key;
