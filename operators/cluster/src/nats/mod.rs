//! The cluster controller's NATS I/O: its system connection to the servers it deploys
//! ([`system_connection`]), asking them how they are ([`observe`]), asking one to reload
//! ([`reload`]) and asking a NATS cluster being deleted what data it still holds
//! ([`deletion_guard`]). The rules these feed are pure and live beside the rest of the core
//! (`crate::reload`, `crate::certificate_reload`, `crate::deletion_guard`).

pub mod deletion_guard;
pub mod observe;
pub mod reload;
pub mod system_connection;
