//! The auth controller: NATS operator, accounts and users as resources.
