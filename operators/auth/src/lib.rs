//! The auth controller: NATS operator, accounts and users as resources.
//!
//! The pure core (design §5.1–§5.4, §7): one function per rule, each with its table of cases
//! beside it; and [`controller`], the Kubernetes shell that gathers inputs, asks the core and
//! writes what it decided (Secrets, status, Events, JWT pushes).

pub mod account;
pub mod controller;
pub mod creds_secret;
pub mod deletion_hold;
pub mod deletions;
pub mod distribution;
pub mod exports;
pub mod gates;
pub mod grants;
pub mod keys;
pub mod kick;
pub mod operator;
pub mod presets;
pub mod push_rules;
pub mod revocations;
pub mod roster;
pub mod supplied;
pub mod trust;
pub mod uniqueness;
pub mod units;
pub mod user;
pub mod user_keys;
pub mod withdrawal;
