//! The cluster controller's NATS I/O: its system connection to the servers it deploys
//! ([`system_connection`]), asking them how they are ([`ask_observation`]), asking one to reload
//! ([`ask_reload`]) and asking a NATS cluster being deleted what data it still holds
//! ([`ask_remaining_data`]). The rules these feed are pure and live beside the rest of the core
//! (`crate::reload`, `crate::certificate_reload`, `crate::deletion_guard`).

pub mod ask_observation;
pub mod ask_reload;
pub mod ask_remaining_data;
pub mod system_connection;
